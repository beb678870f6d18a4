"""Names, sizes and gaps of the commit log's segment set (spec §1.1), for the store cross-check."""

from __future__ import annotations

from store.check.log_view import CommitLogView
from store.check.findings import Sink


def check_segment_files(view: CommitLogView, sink: Sink) -> None:
    """Names, sizes and gaps of the segment set (spec §1.1)."""
    for path in view.ignored_names:
        sink.add("warning", "files", path, None, "not a 20-digit segment name: ignored by the store")
    for path in view.leftover_names:
        sink.add("info", "files", path, None, "leftover of an interrupted segment creation")
    size = view.segment_size_bytes
    sizes = {segment.size_bytes for segment in view.segments}
    # Every segment short by the same whole pages: a wrong mappedFileSizeCommitLog, not truncation.
    wrong_config = len(sizes) == 1 and next(iter(sizes)) < size and next(iter(sizes)) % 4096 == 0
    for segment in view.segments:
        if segment.file_from_offset % size:
            sink.add("error", "commitlog", segment.path, None,
                     f"start offset {segment.file_from_offset} is not a multiple of the "
                     f"segment size {size}")
        if segment.size_bytes != size:
            short = segment.size_bytes < size and not wrong_config
            sink.add("error", "commitlog", segment.path, segment.size_bytes,
                     f"segment is {segment.size_bytes} bytes, expected {size} "
                     f"(mappedFileSizeCommitLog): the store refuses to load it"
                     + ("; every segment has this size: is the config the store's own?"
                        if wrong_config else "")
                     + (f"; rmqstore recover --pad-truncated pads it to {size} bytes (a record "
                        f"cut by the truncation is lost, every complete one is kept)" if short
                        else ""),
                     on_restart="MappedFileQueue.load refuses a segment whose length is not "
                                "mappedFileSizeCommitLog: the broker does not start",
                     repair="rmqstore recover --pad-truncated --store {store}" if short else None)
    for previous, current in zip(view.segments, view.segments[1:]):
        expected = previous.file_from_offset + size
        if current.file_from_offset != expected:
            kind = "gap" if current.file_from_offset > expected else "overlap"
            sink.add("error", "commitlog", current.path, None,
                     f"{kind} in the segment set: expected a file starting at {expected}, "
                     f"found {current.file_from_offset}")
