"""The fuzz driver's `pull_unfiltered` target (store/kernel/c/pull.c), also run unsanitized by
tests/test_kernel_pull.py.

Input: a corpus seed (real RocketMQ records, some mutated) as the segment, at a base offset near 0 or
near the int64 edge; a window of up to 64 units pointing at its records (sometimes at forged
positions and sizes), the records' QUEUEID/QUEUEOFFSET set to match consecutive units or not;
transfer limits, caps, memory line, readable end, form and topic at edge values.

`pull_unfiltered` has no twin: it answers only when sure (None otherwise), so the check is that
whenever it answers, the answer is the Python path's: `_plan_unfiltered`'s count, the slices of
`_slice_records`, `_carries` passing on them and every record the unit's by `_wrong_record`
(the full check of the unit-by-unit loop), decoded records equal to `decode_message`'s.
"""

from __future__ import annotations

import struct

from store.codec import msgid
from store.codec.message import MessageRecord, decode_message
from store.codec.properties import decode_properties
from store.commitlog.read_plan import TransferLimits, _plan_unfiltered
from store.commitlog.record_match import _carries, _topic_of, _wrong_record

DECODERS = (MessageRecord, decode_message, decode_properties, msgid.host_to_string)
UNIT = struct.Struct(">qiq")
SIZE_EDGES = [0, -1, 1, 87, 88, 200, 1 << 20, 0x7FFFFFFF]
LIMIT_EDGES = [0, 1, 2, 8, 32, 64, 1000, 65536, 262144, 2**62]


def reference_check(args: tuple, result: tuple) -> str | None:
    """None if `result` (pull_unfiltered's outcome for `args`: ("ok", answer) or ("raise", type,
    message)) is what the Python path answers. Only a decoded pull may raise: then the Python
    path's `decode_message` raises the same on the planned, checked records."""
    (data, max_msg_nums, mem_bytes, mem_count, disk_bytes, disk_count, max_total, commit_log_max,
     in_memory, segment, base, readable, form, queue_id, first_offset, topic, _decoders) = args
    if result[0] == "ok" and result[1] is None:
        return None                         # "ask the Python path": always allowed
    if result[0] != "ok" and form != 2:
        return f"pull_unfiltered raised {result[1:]}"
    count = len(data) // UNIT.size
    if result[0] == "ok":
        taken, last_phy, records = result[1]
    else:
        limits = TransferLimits(mem_bytes, mem_count, disk_bytes, disk_count)
        taken = _plan_unfiltered([UNIT.unpack_from(data, k * UNIT.size)[0] for k in range(count)],
                                 [UNIT.unpack_from(data, k * UNIT.size)[1] for k in range(count)],
                                 max_msg_nums, limits, max_total, commit_log_max, in_memory)
        if taken is None:
            return f"pull_unfiltered raised {result[1:]} on a pull it had to leave to Python"
        last_phy, records = UNIT.unpack_from(data, (taken - 1) * UNIT.size)[0], [None] * taken
    count = len(data) // UNIT.size
    units = [UNIT.unpack_from(data, k * UNIT.size) for k in range(count)]
    phys, sizes = [u[0] for u in units], [u[1] for u in units]
    limits = TransferLimits(mem_bytes, mem_count, disk_bytes, disk_count)
    planned = _plan_unfiltered(phys, sizes, max_msg_nums, limits, max_total, commit_log_max,
                               in_memory)
    if planned != taken or last_phy != phys[taken - 1] or len(records) != taken:
        return f"plan: C took {taken} (last {last_phy}), Python {planned}"
    slices = []
    for phy, size in zip(phys[:taken], sizes[:taken]):
        at = phy - base
        if at < 0 or size <= 0 or at + size > readable:
            return f"C sliced {phy}+{size} outside [{base}, {base + readable})"
        slices.append(bytes(segment[at:at + size]))
    if form == 0 and not all(type(r) is bytes and r == s for r, s in zip(records, slices)):
        return "bytes records differ from the slices"
    if form == 1 and not all(type(r) is memoryview and bytes(r) == s
                             for r, s in zip(records, slices)):
        return "memoryview records differ from the slices"
    if form == 2:
        try:
            expected = ("ok", [decode_message(s) for s in slices])
        except Exception as error:          # the Python path's refusal, compared below
            expected = ("raise", type(error).__name__, str(error))
        if result[0] != "ok" or expected[0] != "ok":
            if result[0] == "ok" or result != expected:
                return f"decoding: C {result[:1] + result[1:][:2]} != Python {expected[:3]}"
        elif records != expected[1] or repr(records) != repr(expected[1]):
            return "decoded records differ from decode_message"
    if queue_id is not None:
        decode = {0: False, 1: "view", 2: True}[form]
        text = topic.decode() if topic is not None else "T"
        if topic is not None and not _carries(slices, queue_id, first_offset, None, text, decode):
            return "C served records _carries refuses"
        for index, (raw, phy) in enumerate(zip(slices, phys)):
            if _wrong_record(raw, text, queue_id, first_offset + index, phy) is not None and \
                    topic is not None:
                return f"C served a wrong record at unit {index}"
            if struct.unpack_from(">i", raw, 12)[0] != queue_id or \
                    struct.unpack_from(">q", raw, 20)[0] != first_offset + index:
                return f"C served a record of another queue offset at unit {index}"
    return None


def make_args(rng, seed: bytes, starts: list[int]) -> tuple:
    """One random call of pull_unfiltered on the seed segment whose records start at `starts`."""
    segment = bytearray(seed)
    base = rng.choice([0, 0, 1 << 30, 2**63 - len(segment) - 1, 2**62])
    picks = [rng.choice(starts) for _ in range(rng.choice([1, 2, 3, 8, 33, 64]))]
    if rng.random() < 0.5:
        picks = sorted(set(picks))
    queue_id = rng.choice([0, 1, 7, -1, 2**31 - 1])
    first_offset = rng.choice([0, 5, 2**40, 2**63 - 70])
    units = bytearray()
    for index, position in enumerate(picks):
        size = struct.unpack_from(">i", segment, position)[0] if position + 4 <= len(segment) else 0
        if rng.random() < 0.05:
            size = rng.choice(SIZE_EDGES)
        phy = base + position if rng.random() > 0.03 else rng.choice([0, -1, 2**63 - 1, base - 1])
        if position + 28 <= len(segment) and rng.random() < 0.8:
            struct.pack_into(">i", segment, position + 12, queue_id)
            struct.pack_into(">q", segment, position + 20, first_offset + index)
        units += UNIT.pack(phy, size, rng.randrange(-2**31, 2**31))
    for _ in range(rng.choice([0, 0, 0, 1, 3])):        # noise after the offsets were set
        if segment:
            segment[rng.randrange(len(segment))] = rng.randrange(256)
    if rng.random() < 0.03:
        units = units[:-rng.randrange(1, 20)] if units else units
    topic = None
    if rng.random() < 0.7 and picks:
        topic = _topic_at(bytes(segment), picks[0]) or b"TopicTest"
    phy_max = base + len(segment)
    commit_log_max = rng.choice([phy_max, phy_max + (1 << 30), base])
    in_memory = rng.choice([2**40, 0, len(segment) // 2, 2**63 - 1])
    readable = rng.choice([len(segment), len(segment), len(segment) // 2, len(segment) + 1, -1])
    return (bytes(units), rng.choice([1, 2, 8, 32, 64, 0, -1]), rng.choice(LIMIT_EDGES),
            rng.choice(LIMIT_EDGES), rng.choice(LIMIT_EDGES), rng.choice(LIMIT_EDGES),
            rng.choice([None, None, 0, 1, 1200, 40000]), commit_log_max, in_memory, bytes(segment),
            base, readable, rng.choice([0, 1, 2]), rng.choice([None, queue_id, queue_id]),
            first_offset, topic, DECODERS)


def _topic_at(segment: bytes, position: int) -> bytes | None:
    """The TOPIC of the record at `position` if it is UTF-8 (read_path passes `topic.encode()`)."""
    topic = _topic_of(memoryview(segment)[position:])
    try:
        return topic if topic is not None and topic.decode() else None
    except UnicodeDecodeError:
        return None


def run(native, rng, seeds, starts, outcome) -> tuple[str | None, bool, tuple]:
    """One execution: (disagreement or None, whether C answered, the arguments)."""
    index = rng.randrange(len(seeds))
    args = make_args(rng, seeds[index], starts[index] or [0])
    got = outcome(native.pull_unfiltered, *args)
    return reference_check(args, got), got[0] != "ok" or got[1] is not None, args


def pull_unfiltered(fuzzer, outcome, disagreement) -> None:
    """The driver's step for this target (every execution is checked)."""
    problem, answered, args = run(fuzzer.native, fuzzer.rng, fuzzer.seeds, fuzzer.starts, outcome)
    fuzzer.executions["pull_unfiltered"] += 1
    fuzzer.compared["pull_unfiltered"] += 1
    fuzzer.last_input = {"target": "pull_unfiltered", "units": args[0].hex(),
                         "segment": args[9].hex(), "rest": repr(args[1:9] + args[10:16])}
    if problem is not None:
        raise disagreement(f"pull_unfiltered: {problem}")
