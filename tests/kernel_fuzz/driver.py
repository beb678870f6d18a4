"""Fuzz the sanitized native kernel against its pure-Python twins, for a fixed time.

Run by tests/test_kernel_fuzz.py in a Python started with build.sanitizer_env() (ASan preloaded):

    python3 -m tests.kernel_fuzz.driver --module <build>/_kernel...so --seconds 150 [--seed N]

Each execution picks a target and calls the sanitized C function (the module built by build.py, loaded
from its path; store.kernel itself keeps to its twins under RMQ_KERNEL=python):

| target        | input                                                                  | checked against   |
|---------------|------------------------------------------------------------------------|-------------------|
| scan          | a seed of tests/data/kernel_corpus/ mutated (bit flips, header fields set to edge values, cuts, splices, BLANKs), from an ordinary or extreme start/limit | `_scan_py` on a sample |
| index_hashes  | the rows scan found, sometimes with a position or length forged         | `_index_hashes_py` |
| tags_codes    | the rows scan found, sometimes with a TAGS position or length forged    | `dispatch_twins.tags_codes_py` |
| unit_runs     | the rows scan found (repeated, some fields forged): units grouped by queue | `dispatch_twins.unit_runs_py` |
| index_put     | small index maps with stale slots, edge layouts, counts, times and hashes | `dispatch_twins.index_put_py` |
| place         | a seed record into a target at edge positions, offsets, timestamp positions | `_place_py`    |
| encode_record | topics, properties, hosts, versions and ints at and past their limits   | `_encode_record_py`; the record must scan back |
| java_hashes   | strings of ASCII, Latin-1, BMP, astral characters and lone surrogates   | `_java_hashes_py` |
| encode_put    | messages with edge fields under edge settings (maximum size, segment size) | `put_path._encode_for_put` (when C accepts, the same bytes) |
| index_select, cq_search_nearest, cq_nearest_queue, cq_search_boundary, read_message | see tests/kernel_fuzz/lookup_targets.py | their `*_py` twins |
| decode_records, pull_unfiltered, decode_columns, view_columns, walk_headers, crc32, encode_batch, place_batch, query_keys, query_message, found_result, put_fast, prefault, sync_range, group_commit | see decode_target.py, pull_target.py, columns_target.py, crc_target.py, put_batch_target.py, query_target.py, result_target.py, put_fast_target.py, prefault_target.py, group_commit_target.py; the groups are listed in registry.py (a new target adds a line there) | the twins each module names |

An out-of-bounds access or undefined behaviour aborts the process with the sanitizer's report (exit code
not 0). A disagreement with a twin prints the input, writes it to --report, and exits 1. On success the
last stdout line is a JSON summary: executions per target, how many were compared with a twin, seconds.
The run is deterministic for a seed and an execution count (--max-executions replays a failure).
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import importlib.util
import json
import os
import random
import struct
import sys
import time
import types

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS_DIR = os.path.join(REPO_ROOT, "tests", "data", "kernel_corpus")

if os.environ.get("RMQ_KERNEL") != "python":
    sys.exit("run with RMQ_KERNEL=python (build.sanitizer_env()): the twins must be the Python ones")

from store import kernel  # noqa: E402  (after the environment check)
from store.api import Message  # noqa: E402
from store.commitlog import put_path  # noqa: E402
from tests.kernel_fuzz import columns_target, dispatch_targets, registry  # noqa: E402
from tests.kernel_fuzz.edges import (  # noqa: E402
    INT64_EDGES, OUT_OF_RANGE, POSITION_EDGES, Disagreement, outcome)

MAGICS = [-626843481, -626843477, -875286124]            # v1, v2, BLANK
INT32_EDGES = [0, 1, -1, 2, 7, 8, 36, 40, 84, 100, 127, 128, 255, 256, 0x7FFF, 0x8000, 0xFFFF,
               0x10000, 0x7FFFFFFF, -0x80000000, -0x7FFFFFFF, 0x7FFFFFF0]


def load_native(path: str):
    """The sanitized extension at `path`, loaded under its own name without touching store.kernel."""
    spec = importlib.util.spec_from_file_location("store.kernel._kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sanitizers_active(path: str) -> dict[str, bool]:
    """Whether the ASan runtime is in this process and the module carries ASan and UBSan checks."""
    with open(path, "rb") as file:
        image = file.read()
    return {"asan_runtime": hasattr(ctypes.CDLL(None), "__asan_init"),
            "asan_checks": b"__asan_report_load" in image,
            "ubsan_checks": b"__ubsan_handle_" in image}


class Fuzzer:
    def __init__(self, native, seed: int, corpus_dir: str, compare_rate: float):
        self.native = native
        self.rng = random.Random(seed)
        self.compare_rate = compare_rate
        self.seeds: list[bytes] = []
        self.starts: list[list[int]] = []        # record positions of each seed
        self.records: list[bytes] = []           # whole records, for place
        for path in sorted(glob.glob(os.path.join(corpus_dir, "*.bin"))):
            data = open(path, "rb").read()
            out = kernel.scan_buffer(64)
            count = native.scan(data, 0, len(data), True, out)[0]
            rows = out[:count]
            self.seeds.append(data)
            self.starts.append(rows[:, kernel.COL["pos"]].tolist())
            for pos, size in rows[:, [kernel.COL["pos"], kernel.COL["size"]]].tolist():
                self.records.append(data[pos:pos + size])
        if not self.seeds or not self.records:
            raise SystemExit(f"no seed records in {corpus_dir}")
        self.executions = dict.fromkeys((
            "scan", "index_hashes", "place", "encode_record", "java_hashes", "encode_put", "tags_codes",
            "unit_runs", "index_put", "index_select", "cq_search_nearest", "cq_nearest_queue",
            "cq_search_boundary", "read_message", "decode_records", "pull_unfiltered",
            "decode_columns", "walk_headers", "encode_batch", "place_batch", "crc32", "query_keys",
            "query_message", "span_groups", "found_result", "fixed_columns", "put_fast",
            "prefault", "sync_range", "group_commit", "view_columns", "cq_keys"), 0)
        self.disagreement = Disagreement
        self.compared = dict.fromkeys(self.executions, 0)
        self.stops: dict[str, int] = {}
        self.last_input: dict = {}

    # -- mutation ----------------------------------------------------------------------------------

    def _field_positions(self, buf: bytearray, pos: int) -> list[tuple[int, int]]:
        """(position, width) of the header fields of a record at `pos` that steer the walk."""
        fields = [(pos, 4), (pos + 4, 4), (pos + 8, 4), (pos + 36, 4)]
        if pos + 40 <= len(buf):
            sys_flag = int.from_bytes(buf[pos + 36:pos + 40], "big", signed=True)
            body_len_pos = pos + 68 + (20 if sys_flag & 0x10 else 8) + (20 if sys_flag & 0x20 else 8)
            fields.append((body_len_pos, 4))
            if body_len_pos + 4 <= len(buf):
                body_len = max(0, int.from_bytes(buf[body_len_pos:body_len_pos + 4], "big", signed=True))
                topic_len_pos = body_len_pos + 4 + body_len
                version = 2 if buf[pos + 4:pos + 8] == struct.pack(">i", MAGICS[1]) else 1
                fields.append((topic_len_pos, version))
                if topic_len_pos + version <= len(buf):
                    topic_len = int.from_bytes(buf[topic_len_pos:topic_len_pos + version], "big")
                    fields.append((topic_len_pos + version + topic_len, 2))
        return [(p, w) for p, w in fields if 0 <= p and p + w <= len(buf)]

    def mutate(self, index: int) -> bytes:
        rng = self.rng
        buf = bytearray(self.seeds[index])
        starts = self.starts[index] or [0]
        for _ in range(rng.choice([1, 1, 1, 2, 2, 3, 4, 8])):
            op = rng.randrange(10)
            if op == 0 and buf:                                    # flip a bit
                buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
            elif op == 1 and buf:                                  # an edge byte
                buf[rng.randrange(len(buf))] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, 0x01, 0x02, 0x20])
            elif op in (2, 3, 4):                                  # a header field to an edge value
                fields = self._field_positions(buf, rng.choice(starts))
                if fields:
                    position, width = rng.choice(fields)
                    value = rng.choice(INT32_EDGES + MAGICS) if width == 4 else rng.choice(INT32_EDGES)
                    if rng.random() < 0.3:
                        value = int.from_bytes(buf[position:position + width], "big", signed=True) + \
                            rng.choice([-2, -1, 1, 2, 8])
                    buf[position:position + width] = (value % (1 << (8 * width))).to_bytes(width, "big")
            elif op == 5:                                          # cut the tail
                del buf[rng.randrange(len(buf) + 1):]
            elif op == 6 and buf:                                  # delete or duplicate a chunk
                a = rng.randrange(len(buf))
                b = min(len(buf), a + rng.choice([1, 2, 4, 8, 64, 512]))
                if rng.random() < 0.5:
                    del buf[a:b]
                else:
                    buf[a:a] = buf[a:b]
            elif op == 7:                                          # splice another seed
                other = self.seeds[rng.randrange(len(self.seeds))]
                cut = rng.randrange(len(other) + 1)
                buf += other[cut:] if rng.random() < 0.5 else other[:cut]
            elif op == 8:                                          # a BLANK filler
                buf += struct.pack(">ii", rng.choice([8, 64, len(buf), -1, 0x7FFFFFFF]), MAGICS[2])
            elif buf:                                              # zeros or noise
                a = rng.randrange(len(buf))
                b = min(len(buf), a + rng.randrange(1, 64))
                buf[a:b] = bytes(b - a) if rng.random() < 0.5 else os.urandom(b - a)
        return bytes(buf)                                          # exactly sized: ASan's red zones

    # -- targets -----------------------------------------------------------------------------------

    def _compare(self) -> bool:
        return self.rng.random() < self.compare_rate

    def scan(self) -> None:
        rng = self.rng
        index = rng.randrange(len(self.seeds))
        buf = self.mutate(index)
        roll = rng.random()
        start = 0 if roll < 0.6 else rng.choice(self.starts[index] or [0]) if roll < 0.75 else \
            rng.randrange(len(buf) + 16) if roll < 0.9 else rng.choice(POSITION_EDGES + OUT_OF_RANGE[:2])
        roll = rng.random()
        limit = len(buf) if roll < 0.6 else rng.randrange(len(buf) + 16) if roll < 0.85 else \
            rng.choice(POSITION_EDGES + OUT_OF_RANGE[:2])
        check_crc = rng.choice([0, 1, 2])       # none, BODYCRC, the [5.x] __CRC32# (forceVerifyPropCRC)
        capacity = rng.choice([1, 2, 3, 64])
        columns_target.walk_headers(self, buf, outcome, Disagreement)
        self.last_input = {"target": "scan", "buf": buf.hex(), "start": start, "limit": limit,
                           "check_crc": check_crc, "capacity": capacity}
        out_c = kernel.scan_buffer(capacity)
        got_c = outcome(self.native.scan, buf, start, limit, check_crc, out_c)
        self.executions["scan"] += 1
        if got_c[0] == "ok":
            kind = got_c[1][2]
            self.stops[str(kind)] = self.stops.get(str(kind), 0) + 1
        if self._compare():
            self.compared["scan"] += 1
            out_py = kernel.scan_buffer(capacity)
            got_py = outcome(kernel._scan_py, buf, start, limit, check_crc, out_py)
            if got_c != got_py:
                raise Disagreement(f"scan: C {got_c} != Python {got_py}")
            if got_c[0] == "ok" and not np.array_equal(out_c[:got_c[1][0]], out_py[:got_c[1][0]]):
                raise Disagreement("scan: the rows differ")
        if got_c[0] == "ok" and got_c[1][0] > 0:
            self.index_hashes(buf, out_c[:got_c[1][0]].copy())
            self.tags_codes(buf, out_c[:got_c[1][0]].copy())
            dispatch_targets.unit_runs(self, buf, out_c[:got_c[1][0]].copy())
            columns_target.decode_columns(self, buf, out_c[:got_c[1][0]].copy(), outcome, Disagreement)
            columns_target.view_columns(self, buf, out_c[:got_c[1][0]].copy(), outcome, Disagreement)

    def tags_codes(self, buf: bytes, rows: np.ndarray) -> None:
        dispatch_targets.tags_codes(self, buf, rows)

    def index_put(self) -> None:
        dispatch_targets.index_put(self)

    def index_hashes(self, buf: bytes, rows: np.ndarray) -> None:
        rng = self.rng
        if rng.random() < 0.3:                                     # a forged row
            column = rng.choice(["topic_pos", "topic_len", "keys_pos", "keys_len", "uniq_pos",
                                 "uniq_len", "sys_flag"])
            rows[rng.randrange(len(rows)), kernel.COL[column]] = rng.choice(
                POSITION_EDGES + [len(buf), len(buf) + 1, len(buf) - 1])
        capacity = rng.choice([0, 1, 2, 3, 8, 64])
        self.last_input = {"target": "index_hashes", "buf": buf.hex(), "rows": rows.tolist(),
                           "capacity": capacity}
        hashes_c, numbers_c = np.zeros(capacity, np.int64), np.zeros(capacity, np.int64)
        got_c = outcome(self.native.index_hashes, buf, rows, hashes_c, numbers_c)
        self.executions["index_hashes"] += 1
        if self._compare():
            self.compared["index_hashes"] += 1
            hashes_py, numbers_py = np.zeros(capacity, np.int64), np.zeros(capacity, np.int64)
            got_py = outcome(kernel._index_hashes_py, buf, rows, hashes_py, numbers_py)
            if got_c != got_py:
                raise Disagreement(f"index_hashes: C {got_c} != Python {got_py}")
            if got_c[0] == "ok" and got_c[1] > 0:
                n = got_c[1]
                if not (np.array_equal(hashes_c[:n], hashes_py[:n]) and
                        np.array_equal(numbers_c[:n], numbers_py[:n])):
                    raise Disagreement("index_hashes: the hashes differ")

    def place(self) -> None:
        rng = self.rng
        record = rng.choice(self.records)
        if rng.random() < 0.2:
            record = record[:rng.randrange(len(record) + 1)]
        slack = rng.choice([0, 0, 1, 7, 64])
        size = max(0, len(record) + slack - (1 if rng.random() < 0.1 else 0))
        position = rng.randrange(slack + 2) if rng.random() < 0.7 else rng.choice(POSITION_EDGES)
        ts_position = rng.choice([56, 68, 36, 35, len(record) - 8, len(record) - 7]) \
            if rng.random() < 0.7 else rng.choice(POSITION_EDGES)
        ints = [rng.choice(INT64_EDGES) if rng.random() < 0.95 else rng.choice(OUT_OF_RANGE)
                for _ in range(3)]
        if rng.random() < 0.5:
            record = bytearray(record)
        self.last_input = {"target": "place", "record": bytes(record).hex(), "size": size,
                           "position": position, "ts_position": ts_position, "ints": ints}
        target_c = bytearray(size)
        args = (position, record, ints[0], ints[1], ts_position, ints[2])
        got_c = outcome(self.native.place, target_c, *args)
        self.executions["place"] += 1
        if self._compare():
            self.compared["place"] += 1
            target_py = bytearray(size)
            got_py = outcome(kernel._place_py, target_py, *args)
            if got_c != got_py or target_c != target_py:
                raise Disagreement(f"place: C {got_c} != Python {got_py} (or the targets differ)")

    def encode_record(self) -> None:
        rng = self.rng
        topic = b"t" * rng.choice([0, 1, 5, 127, 128, 255, 256, 300, 32767, 32768, 65536])
        properties = b"p" * rng.choice([0, 3, 100, 32767, 32768, 65535, 65536, 70000])
        version = rng.choice([1, 2, 1, 2, 0, 3, -1, 2**31])
        hosts = [bytes(rng.choice([8, 20, 8, 20, 0, 7, 9, 21])) for _ in range(2)]
        body = os.urandom(rng.choice([0, 1, 100, 5000]))

        def int32():
            return rng.choice(INT32_EDGES) if rng.random() < 0.95 else rng.choice(OUT_OF_RANGE + [2**31])

        def int64():
            return rng.choice(INT64_EDGES) if rng.random() < 0.95 else rng.choice(OUT_OF_RANGE)
        args = (topic, int32(), int32(), int32() & ~0x30 | (0x10 if len(hosts[0]) == 20 else 0) |
                (0x20 if len(hosts[1]) == 20 else 0), int64(), int64(), int64(), hosts[0], int64(),
                hosts[1], int32(), int64(), body, properties, version)
        self.last_input = {"target": "encode_record", "args": repr(args)[:2000]}
        got_c = outcome(self.native.encode_record, *args)
        self.executions["encode_record"] += 1
        if got_c[0] == "ok":                       # whatever it encodes must scan back whole
            record = bytes(got_c[1])
            out = kernel.scan_buffer(1)
            if self.native.scan(record, 0, len(record), True, out)[:3] != (1, len(record), 0):
                raise Disagreement("encode_record: the record does not scan back")
        if self._compare():
            self.compared["encode_record"] += 1
            got_py = outcome(kernel._encode_record_py, *args)
            if got_c != got_py:
                raise Disagreement(f"encode_record: C {str(got_c)[:300]} != Python {str(got_py)[:300]}")

    def java_hashes(self) -> None:
        rng = self.rng
        alphabet = "aZ09#_ -\x00\x01\x02\x7féÿĀ漢\uffff\U00010000\U0001F600\U0010FFFF\ud800\udfff"
        texts = ["".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 3, 40, 300])))
                 for _ in range(rng.choice([0, 1, 5, 50]))]
        self.last_input = {"target": "java_hashes", "texts": texts}
        raw = self.native.java_hashes(texts)
        self.executions["java_hashes"] += 1
        if self._compare():
            self.compared["java_hashes"] += 1
            got = np.frombuffer(raw, dtype=np.int32).astype(np.int64)
            if not np.array_equal(got, kernel._java_hashes_py(texts)):
                raise Disagreement("java_hashes: the hashes differ")

    def encode_put(self) -> None:
        rng = self.rng

        def pick(options):
            return options[0] if rng.random() < 0.5 else rng.choice(options)
        properties = None
        if rng.random() < 0.7:
            properties = {rng.choice(["UNIQ_KEY", "a", "KEYS", "TAGS", "DELAY", "", "x\x01y", "é",
                                      f"p{rng.randrange(100)}"]):
                          rng.choice(["v", "", "a\x01b", "c\x02", "ü\U0001F600", "w" * 40000])
                          for _ in range(pick([1, 0, 3, 70]))}
        message = Message(
            topic=pick(["T", "t" * 127, "t" * 128, "t" * 32768, "bad topic!", "%RETRY%g"]),
            body=pick([os.urandom(rng.randrange(64)), b"", b"x" * 70000, bytearray(3), "text"]),
            queue_id=pick([0, 1, 65535, 65536, -1, 2**63, True]),
            tags=pick([None, "", "TagA", "a\x01", 5]),
            keys=pick([(), ["k1", "k2"], ("", "k"), "k1 k2", ["a\x02"], [1]]),
            properties=properties,
            flag=pick([0, 3, 2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**64]),
            sys_flag=pick([0, 4, 8, 12, 0x10, 0x30, 2**31, -1, 2**64]),
            born_timestamp=pick([None, 0, 2**63 - 1, 2**63, -2**63 - 1, 1.5]),
            born_host=pick([None, "", "10.1.2.3:77", "[::1]:5", "nohost"]))
        shape = rng.random()
        if shape < 0.05:                           # not a Message: its fields read by getattr
            message = types.SimpleNamespace(**{name: getattr(message, name)
                                               for name in Message.__slots__})
        elif shape < 0.08:                         # a Message with slots left unset
            half = object.__new__(Message)
            for name in rng.sample(Message.__slots__, rng.randrange(len(Message.__slots__))):
                object.__setattr__(half, name, getattr(message, name))
            message = half
        settings = put_path.PutSettings(
            pick(["127.0.0.1:10911", "[::2]:1"]),
            pick([4 << 20, -2**63, -1, 0, 10, 100, 2**31, 2**63 - 1]),
            rng.choice(["4.9", "5.x"]), rng.random() < 0.5, (1000, 5000),
            pick([1 << 20, 0, 100, 300, 2**31, 2**63 - 1, -2**63]))
        now_ms = pick([1_700_000_000_000, 0, -1, 2**63 - 1])
        shown = repr({name: getattr(message, name, "<unset>") for name in Message.__slots__})
        self.last_input = {"target": "encode_put", "message": shown[:2000],
                           "settings": repr(settings), "now_ms": now_ms}
        try:                                       # first: the Python path also learns the topic
            expected = put_path._encode_for_put(message, settings, now_ms)
        except Exception:                          # refused (PutRefused or a type error): C must decline
            expected = None
        context = settings.kernel_context
        if rng.random() < 0.05:                    # a malformed context: an error, never a crash
            broken = list(context)
            broken[rng.choice([3, 4, 5, 6])] = rng.choice(["x", 2**64, -2**64, None, 1.5])
            context = tuple(broken)
        got = outcome(self.native.encode_put, message, context, now_ms)
        self.executions["encode_put"] += 1
        if context is not settings.kernel_context or got[0] == "raise":
            return
        self.compared["encode_put"] += 1
        fast = got[1]
        if fast is None:
            return
        if expected is None:
            raise Disagreement("encode_put: C accepted what the Python path refuses")
        record, draft = expected
        if fast[0] != record or fast[1:] != (draft.topic, draft.queue_id, draft.sys_flag,
                                             draft.tags_code, draft.keys, draft.uniq_key,
                                             draft.store_timestamp_position):
            raise Disagreement("encode_put: C and the Python path encode differently")

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.6:
            self.scan()
        elif roll < 0.72:
            self.place()
        elif roll < 0.84:
            self.encode_record()
        elif roll < 0.88:
            self.java_hashes()
        elif roll < 0.91:
            self.index_put()
        elif roll < 0.94:
            self.encode_put()
        else:               # the targets issue #17 added: tests/kernel_fuzz/registry.py
            registry.step(self)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", required=True, help="the sanitized _kernel shared object")
    parser.add_argument("--seconds", type=float, default=150.0, help="time budget (wall clock)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument("--max-executions", type=int, default=None, help="stop after this many steps")
    parser.add_argument("--corpus", default=CORPUS_DIR)
    parser.add_argument("--compare-rate", type=float, default=0.5,
                        help="share of scan inputs also run through the twin")
    parser.add_argument("--report", default=None, help="write a disagreeing input here (JSON)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    active = sanitizers_active(args.module)
    print(f"kernel fuzz: seed {seed}, budget {args.seconds:.0f} s, sanitizers {active}",
          file=sys.stderr, flush=True)
    native = load_native(args.module)
    fuzzer = Fuzzer(native, seed, args.corpus, args.compare_rate)
    started = time.monotonic()
    deadline = started + args.seconds
    next_progress = started + 30
    steps = 0
    try:
        while (args.max_executions is None or steps < args.max_executions):
            fuzzer.step()
            steps += 1
            if steps % 64 == 0:
                now = time.monotonic()
                if now >= deadline:
                    break
                if now >= next_progress:
                    print(f"kernel fuzz: {steps} executions", file=sys.stderr, flush=True)
                    next_progress = now + 30
    except Disagreement as error:
        failure = {"seed": seed, "execution": steps, "error": str(error), **fuzzer.last_input}
        if args.report:
            with open(args.report, "w") as file:
                json.dump(failure, file)
        print(f"DISAGREEMENT after {steps} executions (seed {seed}): {error}\n"
              f"{json.dumps(fuzzer.last_input)[:4000]}", file=sys.stderr, flush=True)
        return 1
    summary = {"seed": seed, "executions": sum(fuzzer.executions.values()), "steps": steps,
               "by_target": fuzzer.executions, "compared_with_twin": fuzzer.compared,
               "scan_stops": fuzzer.stops, "seconds": round(time.monotonic() - started, 1),
               "corpus_seeds": len(fuzzer.seeds), "sanitizers": active}
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
