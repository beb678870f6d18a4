"""The fuzz targets of the dispatch kernels (store/kernel/c/dispatch.c), run by driver.py's Fuzzer
(`self` below): the sanitized C against `store.kernel.dispatch_twins`."""

from __future__ import annotations

import numpy as np

from store import kernel
from store.kernel import dispatch_twins
from tests.kernel_fuzz.edges import INT64_EDGES, OUT_OF_RANGE, POSITION_EDGES, Disagreement, outcome


def tags_codes(self, buf: bytes, rows: np.ndarray) -> None:
    """The rows scan found (`self` is the driver's Fuzzer), sometimes with TAGS forged."""
    rng = self.rng
    if rng.random() < 0.3:                                     # a forged row
        column = rng.choice(["tags_pos", "tags_len"])
        rows[rng.randrange(len(rows)), kernel.COL[column]] = rng.choice(
            POSITION_EDGES + [len(buf), len(buf) + 1, len(buf) - 1])
    self.last_input = {"target": "tags_codes", "buf": buf.hex(), "rows": rows.tolist()}
    out_c = np.zeros(len(rows), np.int64)
    got_c = outcome(self.native.tags_codes, buf, rows, out_c)
    self.executions["tags_codes"] += 1
    if self._compare():
        self.compared["tags_codes"] += 1
        out_py = np.zeros(len(rows), np.int64)
        got_py = outcome(dispatch_twins.tags_codes_py, buf, rows, out_py)
        if got_c != got_py:
            raise Disagreement(f"tags_codes: C {got_c} != Python {got_py}")
        if got_c[0] == "ok" and not np.array_equal(out_c, out_py):
            raise Disagreement("tags_codes: the codes differ")

def index_put(self) -> None:
    """Small index maps with stale slots, edge layouts, counts, times and hashes."""
    rng = self.rng
    slots, entries = rng.choice([1, 2, 3, 8, 64]), rng.choice([2, 3, 9, 40])
    size = 40 + 4 * slots + 20 * entries
    data = bytearray(rng.randrange(256) for _ in range(size)) if rng.random() < 0.5 else \
        bytearray(size)
    if rng.random() < 0.1:
        data = data[:rng.randrange(size)]                      # a map too small for the layout
    count = rng.randrange(0, entries + 12)
    hashes = np.array([rng.choice([0, 1, 2**31 - 1, rng.randrange(2**31)]) for _ in range(count)],
                      np.int64)
    if count and rng.random() < 0.1:
        hashes[rng.randrange(count)] = rng.choice([-1, 2**31, -2**63, 2**63 - 1])
    phys = np.array([rng.choice(INT64_EDGES) for _ in range(count)], np.int64)
    times = np.array([rng.choice(INT64_EDGES + [1_700_000_000_000, 1_700_000_001_500])
                      for _ in range(count)], np.int64)
    args = [slots, entries, rng.choice([0, 1, 1, 2, entries - 1, entries]),
            rng.choice(INT64_EDGES + [1_700_000_000_000])]
    if rng.random() < 0.15:
        args[rng.randrange(4)] = rng.choice(INT64_EDGES + OUT_OF_RANGE + [-1, 0])
    if count and rng.random() < 0.05:
        times = times[:-1]                                     # arrays of different lengths
    self.last_input = {"target": "index_put", "map": data.hex(), "args": args,
                       "hashes": hashes.tolist(), "phys": phys.tolist(), "times": times.tolist()}
    data_c = bytearray(data)
    got_c = outcome(self.native.index_put, data_c, *args, hashes, phys, times)
    self.executions["index_put"] += 1
    self.compared["index_put"] += 1
    data_py = bytearray(data)
    got_py = outcome(dispatch_twins.index_put_py, data_py, *args, hashes, phys, times)
    if got_c != got_py:
        raise Disagreement(f"index_put: C {got_c} != Python {got_py}")
    if data_c != data_py:
        raise Disagreement("index_put: the maps differ")


def unit_runs(self, buf: bytes, rows: np.ndarray) -> None:
    """The rows scan found, sometimes with a topic, TAGS, queue id or queue offset forged."""
    rng = self.rng
    if rng.random() < 0.3:
        column = rng.choice(["topic_pos", "topic_len", "tags_pos", "tags_len", "queue_id",
                             "queue_offset"])
        rows[rng.randrange(len(rows)), kernel.COL[column]] = rng.choice(
            POSITION_EDGES + [len(buf), len(buf) + 1, len(buf) - 1])
    if rng.random() < 0.3:                                     # rows of a few queues, repeated
        rows = np.ascontiguousarray(rows[[rng.randrange(len(rows)) for _ in range(rng.randrange(1, 40))]])
    self.last_input = {"target": "unit_runs", "buf": buf.hex(), "rows": rows.tolist()}
    n = len(rows)

    def run(function):
        runs, units = np.zeros((n, kernel.RUN_FIELDS), np.int64), bytearray(20 * n)
        offsets = np.zeros(n, np.int64)
        return outcome(function, buf, rows, runs, units, offsets), runs, units, offsets

    got_c, runs_c, units_c, offsets_c = run(self.native.unit_runs)
    self.executions["unit_runs"] += 1
    if self._compare():
        self.compared["unit_runs"] += 1
        got_py, runs_py, units_py, offsets_py = run(dispatch_twins.unit_runs_py)
        if got_c != got_py:
            raise Disagreement(f"unit_runs: C {got_c} != Python {got_py}")
        if got_c[0] == "ok" and got_c[1] >= 0 and not (
                np.array_equal(runs_c[:got_c[1]], runs_py[:got_c[1]]) and units_c == units_py and
                np.array_equal(offsets_c, offsets_py)):
            raise Disagreement("unit_runs: the units differ")
