"""`pull_window` (C: c/pull_window.c): an unfiltered pull from a mapped file consume queue's segments
through the commit log's segments, then `pull_unfiltered`, in one call.

`pull_window_twin` below is its pure-Python twin, step by step what the C does (the arithmetic of
`MappedFileQueue.end_and_file` and `FileConsumeQueue.pull_window_untouched`); it ends in
`pull_unfiltered`, which has no twin (store/commitlog/read_path.py's path is its twin), so without the
compiled kernel the twin answers None, as `pull_unfiltered` is None then. Both answer None whenever
anything is unusual; the caller then runs the full path from the start.
tests/test_kernel_pull_window.py compares the C with the twin and with the full path.

    pull_window(cq_files, cq_file_size, min_logic_offset, trusted_from, queue_offset, queue_id,
                topic_bytes, cl_files, cl_file_size, max_msg_nums, mem_bytes, mem_count,
                disk_bytes, disk_count, in_memory_bytes, form, decoders)
        -> (min_offset, max_offset, taken, last_phy, records, commit_log_max, checked) | None
"""

from __future__ import annotations

from store.kernel import COMPILED, _native
from store.kernel.pull import pull_unfiltered

CQ_UNIT = 20
MAX_WINDOW = 64
_INT64_MAX = (1 << 63) - 1


def _int64(value) -> bool:
    return isinstance(value, int) and -(1 << 63) <= value <= _INT64_MAX


def _read_position(mapped):
    position = mapped.committed_position if mapped.write_buffer is not None \
        else mapped.wrote_position
    return position if _int64(position) else None


def _locate(files, file_size: int, offset: int):
    """(end, segment, readable, base) as `end_and_file` finds them by index, or None."""
    if type(files) is not list or not files or file_size <= 0:
        return None
    last = files[-1]
    position = _read_position(last)
    last_from = getattr(last, "file_from_offset", None)
    if position is None or position <= 0 or not _int64(last_from) or \
            last_from > _INT64_MAX - position:
        return None
    first_from = files[0].file_from_offset
    if not _int64(first_from):
        return None
    delta = offset - first_from
    if delta < 0 or delta // file_size >= len(files):
        return None
    candidate = files[delta // file_size]
    start, size = candidate.file_from_offset, candidate.file_size_bytes
    if not _int64(start) or not _int64(size) or not start <= offset < start + size:
        return None
    readable = position if candidate is last else _read_position(candidate)
    if readable is None or candidate.destroyed:
        return None
    return last_from + position, candidate, readable, start


def pull_window_twin(cq_files, cq_file_size, min_logic_offset, trusted_from, queue_offset,
                     queue_id, topic_bytes, cl_files, cl_file_size, max_msg_nums, mem_bytes,
                     mem_count, disk_bytes, disk_count, in_memory_bytes, form, decoders, *,
                     unfiltered=pull_unfiltered):
    """The C's steps in Python (see the module's docstring); `unfiltered`: the pull_unfiltered
    it ends in (the fuzz driver passes its sanitized build's)."""
    if unfiltered is None:
        return None
    if not all(_int64(v) for v in (cq_file_size, min_logic_offset, trusted_from, queue_offset,
                                   cl_file_size, max_msg_nums)) or not isinstance(form, int):
        return None
    if not 0 < max_msg_nums < MAX_WINDOW or queue_offset < 0 or \
            queue_offset > _INT64_MAX // CQ_UNIT or min_logic_offset < 0:
        return None
    cq_offset = queue_offset * CQ_UNIT
    found = _locate(cq_files, cq_file_size, cq_offset)
    if found is None:
        return None
    cq_end, segment, cq_read, cq_base = found
    min_offset, max_offset = min_logic_offset // CQ_UNIT, cq_end // CQ_UNIT
    if not min_offset <= queue_offset < max_offset or cq_offset < min_logic_offset:
        return None
    position = cq_offset - cq_base
    readable_units = (cq_read - position) // CQ_UNIT
    if readable_units <= 0:
        return None
    count = min(max_offset - queue_offset, max_msg_nums + 1, readable_units)
    with memoryview(segment._map) as view:
        if count * CQ_UNIT > len(view) - position:
            return None
        data = bytes(view[position:position + count * CQ_UNIT])
    found = _locate(cl_files, cl_file_size, int.from_bytes(data[:8], "big", signed=True))
    if found is None:
        return None
    commit_log_max, cl_segment, cl_read, cl_base = found
    checked = queue_offset < trusted_from
    got = unfiltered(
        data, max_msg_nums, mem_bytes, mem_count, disk_bytes, disk_count, None, commit_log_max,
        in_memory_bytes, cl_segment._map, cl_base, cl_read, form,
        queue_id if checked else None, queue_offset,
        topic_bytes if checked and form != 2 else None, decoders)
    if got is None:
        return None
    return min_offset, max_offset, got[0], got[1], got[2], commit_log_max, checked


pull_window = _native.pull_window if COMPILED else pull_window_twin
