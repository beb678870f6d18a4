"""Pure-Python twins of the dispatch kernels (`store/kernel/c/dispatch.c`): the same answers and the
same refusals (exception type and message) as the C functions, only slower.

| function   | what                                                                          |
|------------|-------------------------------------------------------------------------------|
| tags_codes | tagsCode of each scan row (Java hash of an ASCII TAGS; TAGS_CODE_ASK otherwise)|
| unit_runs  | consume-queue units of scan rows, grouped by queue (first appearance order)   |
| index_put  | `IndexFile.put_keys` into the map: entries, chains and slots as putKey writes them |

Imported by `store.kernel`, and imports nothing of the store (no cycle): the two scan-row columns it
reads are named here and checked against `store.kernel.COL` there.
"""

from __future__ import annotations

import numpy as np


SCAN_FIELDS, TAGS_POS_COLUMN, TAGS_LEN_COLUMN = 26, 16, 17
# The other scan columns unit_runs reads (checked against store.kernel.COL there too).
QUEUE_ID_COLUMN, QUEUE_OFFSET_COLUMN, PHY_COLUMN, SIZE_COLUMN = 2, 4, 5, 1
TOPIC_POS_COLUMN, TOPIC_LEN_COLUMN = 12, 13
RUN_FIELDS = 6
TAGS_CODE_ASK = -(1 << 63)        # "not ASCII: decode this TAGS value the Python way"
_INDEX_HEADER_BYTES, _SLOT_BYTES, _ENTRY_BYTES = 40, 4, 20
_INT32_MAX = (1 << 31) - 1
_PY_SSIZE_T_MAX = (1 << 63) - 1


def _refuse_overflow(*values_and_kinds) -> None:
    """The C argument parser's OverflowError for the first int out of range of its format ("n":
    Py_ssize_t, "L": long long), as `store.kernel._refuse_overflow` says it."""
    for value, kind in values_and_kinds:
        if isinstance(value, int) and not -(1 << 63) <= value <= _PY_SSIZE_T_MAX:
            raise OverflowError("Python int too large to convert to C ssize_t" if kind == "n"
                                else "int too big to convert")


def _int64_array(value, *, writable: bool = False) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == np.int64 and value.flags.c_contiguous \
        and (not writable or value.flags.writeable)


def tags_codes_py(buf, rows: np.ndarray, out: np.ndarray) -> int:
    if not (_int64_array(rows) and _int64_array(out, writable=True)) or \
            rows.size % SCAN_FIELDS or out.size != rows.size // SCAN_FIELDS:
        raise ValueError("rows and out must be aligned int64 arrays, one out per row")
    size = len(buf)
    asked = 0
    rows = rows.reshape(-1, SCAN_FIELDS)
    tags_pos, tags_len = TAGS_POS_COLUMN, TAGS_LEN_COLUMN
    codes = []
    for pos, length in rows[:, [tags_pos, tags_len]].tolist():
        if pos < 0:
            codes.append(0)
            continue
        if length < 0 or pos > size or length > size - pos:
            out[:len(codes)] = codes          # C wrote the rows before the forged one
            raise ValueError("a row points outside the buffer")
        value = bytes(buf[pos:pos + length])
        if not value.isascii():
            codes.append(TAGS_CODE_ASK)
            asked += 1
            continue
        h = 0
        for byte in value:
            h = (31 * h + byte) & 0xFFFFFFFF
        codes.append(h - (1 << 32) if h & 0x80000000 else h)
    out[:len(codes)] = codes
    return asked


def unit_runs_py(buf, rows: np.ndarray, out_runs: np.ndarray, out_units, out_queue_offsets) -> int:
    n = rows.size // SCAN_FIELDS if _int64_array(rows) else -1
    if n < 0 or rows.size % SCAN_FIELDS or not _int64_array(out_runs, writable=True) or \
            not _int64_array(out_queue_offsets, writable=True) or out_runs.size != n * RUN_FIELDS or \
            len(out_units) != 20 * n or out_queue_offsets.size != n:
        raise ValueError("rows, out_runs, out_units and out_queue_offsets must be aligned arrays "
                         "sized for the rows")
    size = len(buf)
    runs: dict[tuple[bytes, int], list] = {}        # queue -> [first, last, consecutive, rows]
    table_topic: dict[int, bytes] = {}              # row -> its TOPIC bytes
    columns = [TOPIC_POS_COLUMN, TOPIC_LEN_COLUMN, TAGS_POS_COLUMN, TAGS_LEN_COLUMN, QUEUE_ID_COLUMN,
               QUEUE_OFFSET_COLUMN, PHY_COLUMN, SIZE_COLUMN]
    table = rows.reshape(-1, SCAN_FIELDS)[:, columns].tolist()
    for number, (tp, tl, gp, gl, queue_id, queue_offset, _, _) in enumerate(table):
        if tp < 0 or tl < 0 or tp > size or tl > size - tp or \
                (gp >= 0 and (gl < 0 or gp > size or gl > size - gp)):
            raise ValueError("a row points outside the buffer")
        if gp >= 0 and not bytes(buf[gp:gp + gl]).isascii():
            return -1
        key = (bytes(buf[tp:tp + tl]), queue_id)
        table_topic[number] = key[0]
        run = runs.get(key)
        if run is None:
            runs[key] = [number, number, 1, [number]]
        else:
            if (queue_offset - table[run[1]][5]) & 0xFFFFFFFFFFFFFFFF != 1:
                run[2] = 0
            run[1] = number
            run[3].append(number)
    start = 0
    codes = np.zeros(n, dtype=np.int64)
    tags_codes_py(buf, rows, codes)
    units = np.frombuffer(out_units, dtype=[("phy", ">i8"), ("size", ">i4"), ("tags", ">i8")])
    topic_first: dict[bytes, int] = {}          # TOPIC bytes -> the first queue's number
    for number, (first, last, consecutive, members) in enumerate(runs.values()):
        topic_run = topic_first.setdefault(table_topic[first], number)
        out_runs.reshape(-1, RUN_FIELDS)[number] = (first, last, start, len(members), consecutive,
                                                    topic_run)
        for member in members:
            _, _, _, _, _, queue_offset, phy, size_bytes = table[member]
            units[start] = (phy, (size_bytes + (1 << 31)) % (1 << 32) - (1 << 31), codes[member])
            out_queue_offsets[start] = queue_offset
            start += 1
    del units
    return len(runs)


def index_put_py(map_buffer, max_hash_slot_num: int, max_index_num: int, index_count: int,
                 begin_timestamp: int, key_hashes: np.ndarray, phy_offsets: np.ndarray,
                 store_timestamps: np.ndarray) -> tuple[int, int]:
    _refuse_overflow((max_hash_slot_num, "n"), (max_index_num, "n"), (index_count, "n"),
                     (begin_timestamp, "L"))
    if not all(_int64_array(a) for a in (key_hashes, phy_offsets, store_timestamps)) or \
            not len(key_hashes) == len(phy_offsets) == len(store_timestamps):
        raise ValueError("key_hashes, phy_offsets and store_timestamps must be aligned int64 arrays "
                         "of one length")
    slot_num, entry_limit = max_hash_slot_num, max_index_num
    if slot_num <= 0 or entry_limit <= 1 or index_count < 0 or index_count > entry_limit or \
            slot_num > (_PY_SSIZE_T_MAX - 40) // 4 or \
            entry_limit > (_PY_SSIZE_T_MAX - 40 - 4 * slot_num) // 20 or \
            len(map_buffer) < 40 + 4 * slot_num + 20 * entry_limit:
        raise ValueError("the index layout does not fit the map")
    count = min(len(key_hashes), entry_limit - index_count)
    if count <= 0:
        return 0, 0
    key_hashes = key_hashes[:count]
    if int(key_hashes.min()) < 0 or int(key_hashes.max()) > _INT32_MAX:
        raise ValueError("a key hash is outside 0..2^31-1")
    slots_view = np.frombuffer(map_buffer, dtype=">i4", count=slot_num, offset=_INDEX_HEADER_BYTES)
    entries = np.frombuffer(map_buffer, dtype=">i4", count=5 * count,
                            offset=_INDEX_HEADER_BYTES + _SLOT_BYTES * slot_num
                            + _ENTRY_BYTES * index_count).reshape(count, 5)
    try:
        prev_index, head_slots, head_entries, new_chains = _chain_batch(
            key_hashes % slot_num, slots_view, index_count)
        time_diff = _time_diffs(store_timestamps[:count], begin_timestamp, index_count <= 1)
        phys = phy_offsets[:count].astype(">i8").view(">i4").reshape(count, 2)
        entries[:, 0] = key_hashes
        entries[:, 1:3] = phys
        entries[:, 3] = time_diff
        entries[:, 4] = prev_index
        slots_view[head_slots] = head_entries
    finally:
        del slots_view, entries          # no export of the map may outlive this call
    return count, new_chains


def _chain_batch(slots: np.ndarray, slot_table: np.ndarray, start_count: int):
    """The chains of a batch of keys taking entry numbers `start_count`, `start_count` + 1, ...:
    (prevIndex of each key, the slots the batch writes, the entry number each then holds, how many
    keys found their slot empty). A key's prevIndex is the previous key of the batch in its slot,
    else the slot's value before the batch, 0 when that is <= 0 or above the key's own entry number
    (putKey checks the slot against the count at its put)."""
    count = len(slots)
    entry_numbers = np.arange(start_count, start_count + count, dtype=np.int64)
    order = np.argsort(slots, kind="stable")     # keys grouped by slot, dispatch order kept
    sorted_slots = slots[order]
    first_in_group = np.ones(count, dtype=bool)
    first_in_group[1:] = sorted_slots[1:] != sorted_slots[:-1]
    previous = np.empty(count, dtype=np.int64)
    previous[1:] = entry_numbers[order][:-1]
    old_values = slot_table[sorted_slots].astype(np.int64)
    old_values[(old_values <= 0) | (old_values > entry_numbers[order])] = 0
    previous[first_in_group] = old_values[first_in_group]
    prev_index = np.empty(count, dtype=np.int64)
    prev_index[order] = previous
    last_in_group = np.ones(count, dtype=bool)
    last_in_group[:-1] = sorted_slots[1:] != sorted_slots[:-1]
    new_chains = int(np.count_nonzero(prev_index == 0))
    return prev_index, sorted_slots[last_in_group], entry_numbers[order][last_in_group], new_chains


def _time_diffs(store_timestamps: np.ndarray, begin_timestamp: int, fresh: bool) -> np.ndarray:
    """timeDiff (seconds) of each key against the header's begin time as it was before its put: the
    first put of a fresh file uses the begin time it inherited, the later ones the first key's."""
    begins = np.full(len(store_timestamps), int(store_timestamps[0]) if fresh else begin_timestamp,
                     dtype=np.int64)
    begins[0] = begin_timestamp
    with np.errstate(over="ignore"):
        diffs = store_timestamps - begins            # wraps as Java's long subtraction does
    time_diff = diffs // 1000
    time_diff += (diffs < 0) & (diffs % 1000 != 0)   # Java truncates toward zero (no negation: MIN)
    time_diff = np.clip(time_diff, 0, _INT32_MAX)
    time_diff[begins <= 0] = 0
    return time_diff
