"""Which consume-queue units match a walked record exactly, found during the commit-log walk.

For every record of a window of the walk (store.check.columns) whose PHYSICALOFFSET is its offset,
the unit at the record's (topic, queueId, QUEUEOFFSET) is read and compared: the record's offset,
size and tagsCode (or an ext address, §4.6). The queue offsets whose unit matches are kept per
queue as runs `[low, high)`: one run per queue on a healthy store, whatever its size. The
consume-queue check (store.check.fast_units.clean_units) asks `matched(key, queue_offsets)`: a
unit matches exactly when the record at its offset has its size, queue, queue offset and tagsCode,
which is what this finds from the record's side (a record has one offset, so the record a unit
points at is the one found here, if any).

A queue whose files are not laid out regularly (a file of another size, a start offset that is not
a multiple of the file size) is not read here: all its units go through the record-by-record code.
"""

from __future__ import annotations

import os

import numpy as np

from store.check.fast_units import EXT_ADDRESS_MAX
from store.codec.cq_unit import CQ_UNIT_DTYPE, CQ_UNIT_SIZE
from store.mappedfile.mapped_file import parse_file_name


class _FileQueue:
    """One queue's CQ files; `units(queue_offsets)` reads the units asked for with pread (no
    mapping: nothing of the files stays resident in this process)."""

    def __init__(self, files: dict[int, str], file_size: int):
        self.files, self.file_size = files, file_size
        self.per_file = file_size // CQ_UNIT_SIZE

    def _read(self, path: str, first: int, count: int) -> np.ndarray:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            data = os.pread(descriptor, count * CQ_UNIT_SIZE, first * CQ_UNIT_SIZE)
        finally:
            os.close(descriptor)
        return np.frombuffer(data, dtype=CQ_UNIT_DTYPE, count=len(data) // CQ_UNIT_SIZE)

    def units(self, queue_offsets: np.ndarray):
        """(mask of the offsets a file holds, phy, size, tags of those units)."""
        first, count = int(queue_offsets[0]), len(queue_offsets)
        number = first // self.per_file if first >= 0 else -1
        if int(queue_offsets[-1]) - first == count - 1 and \
                (first + count - 1) // self.per_file == number and \
                (count == 1 or bool((np.diff(queue_offsets) == 1).all())):  # a healthy window
            path = self.files.get(number * self.file_size) if number >= 0 else None
            units = self._read(path, first - number * self.per_file, count) if path else None
            if units is not None and len(units) == count:
                return (np.ones(count, dtype=bool), units["phy_offset"], units["size"],
                        units["tags_code"])
        files = queue_offsets // self.per_file
        held = np.zeros(len(queue_offsets), dtype=bool)
        phy, size, tags = (np.zeros(len(queue_offsets), dtype=np.int64) for _ in range(3))
        lowest, highest = int(files.min()), int(files.max())
        for number in [lowest] if lowest == highest else np.unique(files).tolist():
            path = self.files.get(number * self.file_size) if number >= 0 else None
            if path is None:
                continue
            which = np.flatnonzero(files == number) if lowest != highest else \
                np.arange(len(files))
            inside = queue_offsets[which] - number * self.per_file
            low, high = int(inside.min()), int(inside.max()) + 1
            if high - low <= max(4 * len(which), 4096):
                units, at = self._read(path, low, high - low), inside - low
            else:                                  # far apart (damage): one unit at a time
                units = np.concatenate([self._read(path, int(i), 1) for i in inside])
                at = np.arange(len(inside))
            which, at = which[at < len(units)], at[at < len(units)]
            picked = units[at]
            held[which] = True
            phy[which], size[which], tags[which] = (picked["phy_offset"], picked["size"],
                                                    picked["tags_code"])
        return held, phy, size, tags

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


def open_file_queue(root_dir: str, file_size: int):
    """`source(topic, queue_id)` for `UnitMatcher`: the queue's files when regularly laid out."""
    directory = os.path.join(root_dir, "consumequeue")

    def source(topic: str, queue_id: int):
        queue_dir = os.path.join(directory, topic, str(queue_id))
        if file_size <= 0 or file_size % CQ_UNIT_SIZE:
            return None
        try:
            names = os.listdir(queue_dir)
        except OSError:
            return None
        files = {}
        for name in names:
            start = parse_file_name(name)
            path = os.path.join(queue_dir, name)
            if start is None:
                continue
            try:
                if os.path.getsize(path) != file_size or start % file_size or \
                        not os.path.isfile(path):
                    return None
            except OSError:
                return None
            files[start] = path
        return _FileQueue(files, file_size) if files else None
    return source


class UnitMatcher:
    """Runs of queue offsets, per queue, whose unit matches the walked record of that offset."""

    def __init__(self, source):
        self.source = source                 # (topic, queue_id) -> _FileQueue-like or None
        self.queues: dict = {}
        self.runs: dict = {}                 # (topic, queue_id) -> list of [low, high]
        self._arrays: dict = {}

    def take(self, columns, starts: np.ndarray) -> None:
        exact = np.flatnonzero(columns.exact)
        if not len(exact):
            return
        queue = columns.queue[exact]
        order = np.argsort(queue, kind="stable")
        exact, queue = exact[order], queue[order]
        offsets = columns.queue_offset[exact]
        held = np.zeros(len(exact), dtype=bool)
        phy, size, tags = (np.zeros(len(exact), dtype=np.int64) for _ in range(3))
        bounds = np.flatnonzero(np.diff(queue)) + 1
        for first, stop in zip([0, *bounds.tolist()], [*bounds.tolist(), len(queue)]):
            key = columns.queue_keys[int(queue[first])]
            reader = self.queues.get(key, self)
            if reader is self:
                reader = self.queues[key] = self.source(*key)
            if reader is not None:
                held[first:stop], phy[first:stop], size[first:stop], tags[first:stop] = \
                    reader.units(offsets[first:stop])
        match = held & (phy == starts[exact]) & (size == columns.size[exact]) & \
            ((tags == columns.tags_code[exact]) | (tags <= EXT_ADDRESS_MAX))
        self._add_all(columns.queue_keys, queue[match], offsets[match])
        for reader in self.queues.values():
            if reader is not None:
                reader.release()

    def _add_all(self, keys: list, queue: np.ndarray, offsets: np.ndarray) -> None:
        """Add the matched (queue number, queue offset) pairs, grouped by queue, as runs."""
        if not len(offsets):
            return
        later = (queue[1:] > queue[:-1]) | ((queue[1:] == queue[:-1]) & (offsets[1:] > offsets[:-1]))
        if not later.all():
            pairs = np.unique(np.stack([queue.astype(np.int64), offsets]), axis=1)
            queue, offsets = pairs[0], pairs[1]
        breaks = np.flatnonzero((np.diff(offsets) != 1) | (np.diff(queue) != 0)) + 1
        starts = np.concatenate(([0], breaks))
        ends = np.concatenate((breaks - 1, [len(offsets) - 1]))
        for number, low, high in zip(queue[starts].tolist(), offsets[starts].tolist(),
                                     (offsets[ends] + 1).tolist()):
            runs = self.runs.setdefault(keys[number], [])
            if runs and runs[-1][0] <= low <= runs[-1][1]:
                runs[-1][1] = max(runs[-1][1], high)
            else:
                runs.append([low, high])

    def finish(self, scan) -> None:
        for reader in self.queues.values():
            if reader is not None:
                reader.close()
        self.queues = {}
        scan.unit_matches = self

    def matched(self, key, queue_offsets: np.ndarray) -> np.ndarray:
        """Mask of `queue_offsets` of queue `key` whose unit matched its record."""
        arrays = self._arrays.get(key)
        if arrays is None:
            runs = sorted(self.runs.get(key, []))
            lows = np.array([low for low, _ in runs], dtype=np.int64)
            highs = np.maximum.accumulate(np.array([high for _, high in runs], dtype=np.int64)) \
                if runs else np.zeros(0, dtype=np.int64)
            arrays = self._arrays[key] = (lows, highs)
            if len(self._arrays) > 64:
                self._arrays.pop(next(iter(self._arrays)))
        lows, highs = arrays
        at = np.searchsorted(lows, queue_offsets, side="right") - 1
        return (at >= 0) & (queue_offsets < highs[np.maximum(at, 0)]) if len(lows) else \
            np.zeros(len(queue_offsets), dtype=bool)


class _ApiQueue:
    """One queue read through the ConsumeQueueStore protocol (RocksDB): consecutive units from an
    offset, cut at the first missing key, as the consume-queue check reads them."""

    def __init__(self, queues, topic: str, queue_id: int):
        self.queues, self.topic, self.queue_id = queues, topic, queue_id

    def units(self, queue_offsets: np.ndarray):
        held = np.zeros(len(queue_offsets), dtype=bool)
        phy, size, tags = (np.zeros(len(queue_offsets), dtype=np.int64) for _ in range(3))
        position = max(int(queue_offsets.min()),
                       self.queues.get_min_offset(self.topic, self.queue_id))
        high = int(queue_offsets.max()) + 1
        while position < high:
            got = self.queues.get_units(self.topic, self.queue_id, position,
                                        min(high - position, 1 << 16))
            if got is None or not len(got):
                break
            got = np.asarray(got)
            which = np.flatnonzero((queue_offsets >= position) &
                                   (queue_offsets < position + len(got)))
            picked = got[queue_offsets[which] - position]
            held[which] = True
            phy[which], size[which], tags[which] = (picked["phy_offset"], picked["size"],
                                                    picked["tags_code"])
            position += len(got)
        return held, phy, size, tags

    def release(self) -> None:
        pass

    def close(self) -> None:
        pass


def api_queue_source(consume_queues, is_batch_topic=None):
    """`source(topic, queue_id)` for `UnitMatcher` over a ConsumeQueueStore; [5.x] batch topics
    (whose keys have gaps by design) are left to the record-by-record code."""
    def source(topic: str, queue_id: int):
        if is_batch_topic is not None and is_batch_topic(topic):
            return None
        return _ApiQueue(consume_queues, topic, queue_id)
    return source
