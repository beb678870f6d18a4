"""Column-wise record data for the cross-check: the commit-log walk in `kernel.scan` batches.

The walk (`store.check.commitlog.walk_commit_log`) reads runs of plain records with `kernel.scan`
(C, BODYCRC checked) and keeps, for every record it accepts, the columns the consume-queue and index
checks compare units and entries with (`RecordColumns`). A record that could give a finding, or that
the kernel does not judge the way `record_check.check_message` does, is left to the walk's
record-by-record path, which adds it with `add_request`:

- where the kernel stops (a BLANK, an invalid or torn record, a BODYCRC mismatch, the end);
- a SCHEDULE_TOPIC_XXXX record (its DELAY decides validity and tagsCode);
- a PHYSICALOFFSET field that is not the record's offset;
- a record whose last 20 bytes look like a `__CRC32#` trailer (checked in Python).

So every finding still comes from the record-by-record code; the kernel only skips clean records.
"""

from __future__ import annotations

import numpy as np

from store import kernel
from store.codec import message as msgcodec
from store.codec import prop_crc
from store.codec.javahash import index_key_hash
from store.codec.javahash import tags_code as compute_tags_code
from store.check.scan_ahead import ScanAhead
from store.kernel.scan_groups import queue_groups, span_groups

SCAN_ROWS = 65536                  # rows per kernel.scan call of the walk (~13 MiB of rows)
_C = kernel.COL
(_POS, _SIZE, _QUEUE_ID, _QUEUE_OFFSET, _PHY, _SYS_FLAG, _STORE_TS, _TOPIC_POS, _TOPIC_LEN,
 _TAGS_POS, _TAGS_LEN) = (_C[name] for name in (
     "pos", "size", "queue_id", "queue_offset", "phy_offset", "sys_flag", "store_ts", "topic_pos",
     "topic_len", "tags_pos", "tags_len"))
_SCHEDULE = msgcodec.SCHEDULE_TOPIC.encode()
_TRAILER = np.frombuffer(prop_crc._NAME, dtype=np.uint8)
_TRAILER_SPAN = prop_crc.CRC32_RESERVED_LENGTH - prop_crc.DIGITS_OFFSET_FROM_END
_TRAILER_HASH = prop_crc._NAME.index(b"#")    # a rare byte, looked at before the whole name
_HASH_MASK = 0xFFFFFFFF
_NO_BEGIN = 1 << 62                # LogScan.queue_starts' "no unit yet"
_NAME_MEMO_MAX = 10_000
_WIDE_TAGS = 256


class RecordColumns:
    """Per accepted record of the current window (a few segments), in log order: size, queue key
    number, queue offset, tagsCode, store time, whether its keys are known (`key_pairs`: `(record
    number << 32) | keyHash`, sorted) and whether its PHYSICALOFFSET field is its offset (`exact`).
    The walk hands each window to the matchers (store.check.stream_units, stream_index) and
    `reset`s it: memory does not grow with the log."""

    def __init__(self, scan_rows: int | None = None):
        self.queue_numbers: dict[tuple[str, int], int] = {}
        self.queue_keys: list[tuple[str, int]] = []
        self._parts: dict[str, list] = {name: [] for name in _FIELDS}
        self._pairs: list[np.ndarray] = []
        self._tags_memo: dict[bytes, int] = {}
        self._ends = np.zeros(0, dtype=np.int64)      # per queue number: max queue offset + 1
        self._begins = np.zeros(0, dtype=np.int64)    # and min queue offset (_NO_BEGIN: none)
        self.count = 0
        self.out = kernel.scan_buffer(scan_rows or SCAN_ROWS)
        self.ahead = None             # a ScanAhead of the walk's segments (scan_ahead)
        self.size = self.queue = self.queue_offset = self.tags_code = self.store_ts = None
        self.keys_known = self.exact = self.key_pairs = None

    # ---------------------------------------------------------------------------- building
    def queue_number(self, key: tuple[str, int]) -> int:
        number = self.queue_numbers.get(key)
        if number is None:
            number = self.queue_numbers[key] = len(self.queue_keys)
            self.queue_keys.append(key)
        return number

    def add_request(self, request, phy_offset: int) -> None:
        """One record at `phy_offset` accepted by `check_message` (the record-by-record path)."""
        keys = [request.uniq_key] if request.uniq_key is not None else []
        keys += [key for key in (request.keys or "").split(" ") if key]
        hashes = [index_key_hash(request.topic + "#" + key) for key in keys]
        self._append(np.array([request.msg_size]), np.array([self.queue_number(
            (request.topic, request.queue_id))]), np.array([request.consume_queue_offset]),
            np.array([request.tags_code]), np.array([request.store_timestamp]),
            np.array([True]), np.array([request.commit_log_offset == phy_offset]))
        if hashes:
            self._pairs.append((np.int64(self.count - 1) << 32) |
                               np.array(hashes, dtype=np.int64))

    def _append(self, size, queue, queue_offset, tags_code, store_ts, keys_known, exact) -> None:
        for name, values in zip(_FIELDS, (size, queue, queue_offset, tags_code, store_ts,
                                          keys_known, exact)):
            self._parts[name].append(values.astype(_FIELDS[name]))   # a copy: rows are reused
        self.count += len(size)

    def finish(self) -> None:
        for name, dtype in _FIELDS.items():
            parts = self._parts[name]
            setattr(self, name, np.concatenate(parts) if parts else np.zeros(0, dtype=dtype))
        self._parts = {}
        self.key_pairs = np.sort(np.concatenate(self._pairs), kind="stable") if self._pairs else \
            np.zeros(0, dtype=np.int64)
        self._pairs = []

    def reset(self) -> None:
        """Forget the records (the next window starts at record 0); queue numbers, the tagsCode
        memo and the scan buffer stay."""
        self._parts = {name: [] for name in _FIELDS}
        self._pairs = []
        self.count = 0
        self.size = self.queue = self.queue_offset = self.tags_code = self.store_ts = None
        self.keys_known = self.exact = self.key_pairs = None

    # ---------------------------------------------------------------------------- scan ahead
    def scan_ahead(self, plan: list) -> None:
        """Scan the segments of `plan` ((buffer, size) in walk order) on a second thread, ahead
        of the walk (store.check.scan_ahead); `close` stops it."""
        if kernel.COMPILED and plan:  # the twins hold the GIL: a second thread would only wait
            self.ahead = ScanAhead(plan, len(self.out), _scan_columns)

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
            self.ahead = None

    def _scan(self, buf, position: int, size: int):
        """kernel.scan's (count, stop, kind) and the rows, with `_take`'s C parts when they were
        computed ahead (else None)."""
        if self.ahead is not None:
            taken = self.ahead.take(buf, position, size)
            if taken is not None:
                return taken
        count, stop, kind, _ = kernel.scan(buf, position, size, 1, self.out)
        return count, stop, kind, self.out[:count], None

    # ---------------------------------------------------------------------------- the walk
    def walk_rows(self, buf, base: int, position: int, size: int, scan, starts,
                  max_records: int | None) -> int:
        """Accept kernel rows from `position` until a record the record-by-record path must see;
        return where that path takes over (or where `max_records` capped the walk)."""
        while position < size:
            count, stop, kind, rows, parts = self._scan(buf, position, size)
            cut = _first_slow_row(buf, base, rows)
            if max_records is not None:
                cut = min(cut, max_records - scan.records)
            if cut:
                self._take(buf, base, rows[:cut], scan, starts, parts if cut == count else None)
                position = int(rows[cut - 1, _POS] + rows[cut - 1, _SIZE])
                if max_records is not None and scan.records >= max_records:
                    scan.capped = True
                    return position
            if cut < count or kind != kernel.STOP_FULL:
                return position if cut < count else stop
        return position

    def _take(self, buf, base: int, rows: np.ndarray, scan, starts, parts=None) -> None:
        """Accept `rows`; `parts`: `_scan_columns`' C parts for exactly these rows, or None."""
        starts.frombytes((rows[:, _POS] + base).tobytes())
        scan.records += len(rows)
        scan.last_store_timestamp = max(scan.last_store_timestamp, int(rows[:, _STORE_TS].max()))
        if parts is None:
            parts = _c_parts(buf, rows)
        (keys, inverse), hashed, tags = parts
        known = self.queue_numbers.get
        numbers = [known(key) for key in keys]
        if None in numbers:
            numbers = [self.queue_number(key) for key in keys]
        numbers = np.array(numbers, dtype=np.int32)[inverse]
        queued = (rows[:, _SYS_FLAG] & 0x04) == 0       # NOT_TYPE (0) or COMMIT (8)
        if queued.any():
            self._note_spans(numbers[queued], rows[queued, _QUEUE_OFFSET])
        keys_known = (rows[:, _SYS_FLAG] & 0x0C) != 0x0C
        if hashed is None:            # a key or topic that is not ASCII: entries go the slow way
            keys_known[:] = False
        else:
            hashes, record_numbers = hashed
            self._pairs.append(((record_numbers + self.count) << 32) | (hashes & _HASH_MASK))
        self._append(rows[:, _SIZE], numbers,
                     rows[:, _QUEUE_OFFSET], self._tags_codes(len(rows), tags),
                     rows[:, _STORE_TS], keys_known, np.ones(len(rows), dtype=np.bool_))

    def _note_spans(self, numbers: np.ndarray, offsets: np.ndarray) -> None:
        """What `LogScan.note_queued` does for each row, kept per queue number until
        `fold_spans` (one dict update per queue, not per batch)."""
        if len(self._ends) < len(self.queue_keys):
            grown = max(len(self.queue_keys), 2 * len(self._ends), 64) - len(self._ends)
            self._ends = np.concatenate((self._ends, np.zeros(grown, dtype=np.int64)))
            self._begins = np.concatenate((self._begins, np.full(grown, _NO_BEGIN, np.int64)))
        np.maximum.at(self._ends, numbers, offsets + 1)
        np.minimum.at(self._begins, numbers, offsets)

    def fold_spans(self, scan) -> None:
        """Add the queue spans of the rows taken so far to `scan.queue_ends` / `queue_starts`."""
        ends, begins = scan.queue_ends, scan.queue_starts
        touched = np.flatnonzero(self._begins != _NO_BEGIN)
        for number, end, begin in zip(touched.tolist(), self._ends[touched].tolist(),
                                      self._begins[touched].tolist()):
            key = self.queue_keys[number]
            ends[key] = max(ends.get(key, 0), end)
            begins[key] = min(begins.get(key, _NO_BEGIN), begin)
        self._ends[:] = 0
        self._begins[:] = _NO_BEGIN

    def _tags_codes(self, count: int, tags) -> np.ndarray:
        codes = np.zeros(count, dtype=np.int64)
        if tags is None:
            return codes
        tagged, names, inverse = tags
        memo = self._tags_memo
        values = []
        for name in names:
            code = memo.get(name)
            if code is None:
                code = compute_tags_code(name.decode("utf-8", "replace"))
                if len(memo) < _NAME_MEMO_MAX:
                    memo[name] = code
            values.append(code)
        codes[tagged] = np.array(values, dtype=np.int64)[inverse]
        return codes


def _scan_columns(buf, position: int, size: int, out: np.ndarray):
    """The scan-ahead thread's work (`RecordColumns.scan_ahead`): kernel.scan of
    buf[position:size] into `out`, and `_c_parts` of all its rows (the walk recomputes them when it
    takes fewer)."""
    count, stop, kind, _ = kernel.scan(buf, position, size, 1, out)
    rows = out[:count]
    return count, stop, kind, _c_parts(buf, rows) if count else None


def _c_parts(buf, rows: np.ndarray):
    """What `_take` needs of `rows` that is computed in C with the GIL released: the queue groups
    (queue_groups), the index key hashes ((hash, row) pairs; None if a key or topic is not
    ASCII) and the tag groups ((tagged rows, distinct names, group of each); None: no tags)."""
    return queue_groups(buf, rows), _key_hashes(buf, rows), _tag_groups(buf, rows)


def _key_hashes(buf, rows: np.ndarray):
    found = kernel.row_key_hashes(buf, rows)
    if found is None:
        return None
    hashes = np.abs(found[0])
    hashes[hashes == 1 << 31] = 0          # index_key_hash: Math.abs(Integer.MIN_VALUE) -> 0
    return hashes, found[1]


def _tag_groups(buf, rows: np.ndarray):
    tagged = np.flatnonzero(rows[:, _TAGS_POS] >= 0)
    if not len(tagged):
        return None
    names, inverse = _span_groups(buf, rows[tagged, _TAGS_POS], rows[tagged, _TAGS_LEN])
    return tagged, names, inverse


_FIELDS = {"size": np.int32, "queue": np.int32, "queue_offset": np.int64, "tags_code": np.int64,
           "store_ts": np.int64, "keys_known": np.bool_, "exact": np.bool_}


def _first_slow_row(buf, base: int, rows: np.ndarray) -> int:
    """Index of the first row the record-by-record path must judge (see the module doc)."""
    if not len(rows):
        return 0
    slow = rows[:, _PHY] != rows[:, _POS] + base
    schedule = np.flatnonzero(rows[:, _TOPIC_LEN] == len(_SCHEDULE))
    data = np.frombuffer(buf, dtype=np.uint8)
    try:
        for index in schedule.tolist():
            position = int(rows[index, _TOPIC_POS])
            if bytes(buf[position:position + len(_SCHEDULE)]) == _SCHEDULE:
                slow[index] = True
        ends = rows[:, _POS] + rows[:, _SIZE]
        candidates = np.flatnonzero((rows[:, _SIZE] >= prop_crc.CRC32_RESERVED_LENGTH) &
                                    (data[ends - 1] == 2))
        if len(candidates):        # (every record's PROPERTIES end with 2: one byte first)
            first = ends[candidates] - prop_crc.CRC32_RESERVED_LENGTH
            named = np.flatnonzero(data[first + _TRAILER_HASH] == _TRAILER[_TRAILER_HASH])
            candidates, first = candidates[named], first[named]
            names = data[first[:, None] + np.arange(_TRAILER_SPAN)]
            slow[candidates[(names == _TRAILER).all(axis=1)]] = True
    finally:
        del data                       # no export of the map may outlive this call
    hits = np.flatnonzero(slow)
    return int(hits[0]) if len(hits) else len(rows)


def _span_groups(buf, positions: np.ndarray, lengths: np.ndarray) -> tuple[list[bytes], np.ndarray]:
    """(distinct byte strings, index into them for every span) of the spans of `buf`."""
    widest = int(lengths.max())
    if widest > _WIDE_TAGS:
        distinct: dict[bytes, int] = {}
        inverse = np.array([distinct.setdefault(bytes(buf[p:p + n]), len(distinct))
                            for p, n in zip(positions.tolist(), lengths.tolist())], dtype=np.int64)
        return list(distinct), inverse
    first, inverse = span_groups(buf, positions, lengths)
    names = [bytes(buf[p:p + n]) for p, n in zip(positions[first].tolist(), lengths[first].tolist())]
    return names, inverse
