"""Repair what `rmqstore check` finds (`rmqstore recover`): the writable recovery plus the fixes
RocketMQ itself never makes, each printed as a step.

RocketMQ on restart (tag rocketmq-all-4.9.7): `DefaultMessageStore.load` refuses a commit-log segment
whose length is not `mappedFileSizeCommitLog` (`MappedFileQueue.load`); `ConsumeQueue.recover` keeps
a queue's units up to the first invalid one and `truncateDirtyLogicFiles` cuts those past the log end,
but a unit that points at the wrong record stays; `IndexService.load` keeps index files as they are
and never rebuilds a missing `index/` (dispatch resumes from the consume queues). So:

| damage `check` reports                    | what `repair_store` does                                   |
|-------------------------------------------|------------------------------------------------------------|
| a segment shorter than the segment size   | only with `pad_truncated`: the file grows to the segment   |
|                                           | size; a record the cut tore becomes a BLANK filler (the    |
|                                           | last data segment: zeros, where recovery ends the log)     |
| errors in a file consume queue, or units  | the queue directory moves to the backup and the writable   |
| missing before its first one (`--rebuild- | open rebuilds it from the log's first record (RocketMQ's   |
| cq T/q` asks for a queue by name)         | restart re-dispatches only from its recovery start)        |
| a missing index, or errors in index files | index/ is rebuilt from the whole commit log                |

Nothing is deleted: every file changed or replaced is first copied to `<root>/repair-backup-<ms>/`.
No record the log holds whole is touched, so no message is lost. A store with none of these findings
goes through the plain writable recovery only (it changes nothing on a cleanly shut down store).
"""

from __future__ import annotations

import os
import shutil
import struct
import time
from dataclasses import dataclass, field

from store.check.log_view import body_crc_matches
from store.check.findings import Finding
from store.codec import record_check
from store.codec.message import BLANK_MAGIC, field_layout
from store.errors import CorruptDataError, StoreError
from store.mappedfile.mapped_file import parse_file_name
from store.meta.lockfile import probe_lock
from store.tools.check_directory import check_config, config_mismatch, short_segments
from store.tools.rebuild_index import rebuild_index

__all__ = ["RepairReport", "repair_store"]

_BLANK_HEADER = struct.Struct(">ii")


@dataclass
class RepairReport:
    steps: list[str] = field(default_factory=list)
    backup_dir: str | None = None
    padded_segments: list[str] = field(default_factory=list)
    rebuilt_queues: list[str] = field(default_factory=list)
    index_rebuilt: dict | None = None
    recovery: dict | None = None
    pointers: dict | None = None


def repair_store(config, *, pad_truncated: bool = False, rebuild_index_always: bool = False,
                 max_findings: int = 100_000, rebuild_queues=()) -> RepairReport:
    """Repair the store at `config` (see the module docstring) and open it writable once.
    `rebuild_queues`: (topic, queue_id) pairs rebuilt from the whole log whatever check says
    (`--rebuild-cq`); queues check finds incomplete are rebuilt too."""
    from store.message_store import MessageStore
    root = config.store_path_root_dir
    holder = probe_lock(root)
    if holder is not None:
        raise StoreError(f"process {holder} holds the store lock ({root}/lock); stop it first")
    if rebuild_queues and config.store_type != "default":
        raise StoreError(f"--rebuild-cq rebuilds file consume queues (storeType=default), not "
                         f"{config.store_type}'s")
    report = RepairReport()
    backup = _Backup(root, report)
    short = short_segments(config)
    mismatch = config_mismatch(config, short) if short else None
    if mismatch:
        raise StoreError(mismatch)
    if short and not pad_truncated:
        path, size = short[0]
        raise StoreError(f"{path} is {size} bytes, not the segment size "
                         f"{config.mapped_file_size_commit_log} (mappedFileSizeCommitLog): the store "
                         f"cannot open; rerun with --pad-truncated to pad it (a record the cut "
                         f"tore is lost, every complete record is kept)")
    lost = [span for path, size in short
            for span in [_pad_segment(config, path, size, backup, report)] if span]
    findings = check_config(config, max_findings=max_findings, open_store=False)
    holding = _queues_into(config, lost) if lost else {}
    for (topic, queue_id), queue_offsets in sorted(holding.items()):
        report.steps.append(
            f"consume queue {topic}/{queue_id} keeps its units {queue_offsets[:5]}"
            f"{' ...' if len(queue_offsets) > 5 else ''} for records the truncation destroyed: "
            f"pulls skip them, and rebuilding the queue would renumber every later message "
            f"(a RocketMQ queue has no holes); check keeps reporting them")
    damaged_queues = [q for q in _damaged_queues(config, findings) if q not in holding]
    damaged_queues += [q for q in sorted(set(rebuild_queues)) if q not in damaged_queues]
    for topic, queue_id in damaged_queues:
        queue_dir = os.path.join(config.consume_queue_dir, topic, str(queue_id))
        report.rebuilt_queues.append(f"{topic}/{queue_id}")
        if os.path.isdir(queue_dir):
            backup.move(queue_dir)
            why = "asked to rebuild (--rebuild-cq)" if (topic, queue_id) in set(rebuild_queues) \
                else "has errors or misses units"
            report.steps.append(f"consume queue {topic}/{queue_id} {why}: moved aside, "
                                f"rebuilt from the commit log by the writable open")
        else:
            report.steps.append(f"consume queue {topic}/{queue_id} is missing: rebuilt from the "
                                f"commit log by the writable open")
    index_damaged = any(f.component == "index" and f.severity == "error" for f in findings)
    rebuild = rebuild_index_always or index_damaged
    if rebuild and os.path.isdir(config.index_dir):
        backup.move(config.index_dir)
    # RocketMQ's restart re-dispatches only from its recovery start (store.recovery.loader):
    # the queues moved aside are rebuilt from the log's first record because the open is told to.
    # Services stay off: a repair must not deliver due delay-level or timer messages, nor clean up
    # expired files; dispatch (the queue rebuild) runs here, in this thread, until it is done.
    with MessageStore.open(config, read_only=False, rebuild_queues=damaged_queues,
                           start_services=False) as store:
        while store.dispatch_pending():
            pass
        report.recovery = store.recovery_report
        report.pointers = store.pointers()
    rebuilt = [f"{t}/{q}" for t, q in report.recovery.rebuilt_queues
               if f"{t}/{q}" not in report.rebuilt_queues]
    if rebuilt:
        report.steps.append(f"consume queues missing or short ({', '.join(rebuilt[:10])}"
                            f"{' ...' if len(rebuilt) > 10 else ''}): rebuilt from the commit log "
                            f"by the writable open")
    if rebuild:
        report.index_rebuilt = rebuild_index(config)
        why = "asked" if rebuild_index_always else "index errors or no index files"
        report.steps.append(f"index/ rebuilt from the commit log ({why}): "
                            f"{report.index_rebuilt['records']} records in "
                            f"{report.index_rebuilt['indexFiles']} files")
    return report


def _damaged_queues(config, findings: list[Finding]) -> list[tuple[str, int]]:
    """File consume queues that have error findings (RocksDB queues are not repaired here)."""
    if config.store_type != "default":
        return []
    base = os.path.realpath(config.consume_queue_dir)
    queues = set()
    for finding in findings:
        # Units missing before a queue's first one (`--rebuild-cq` findings) count whatever their
        # severity: after a crash they are warnings, and no restart brings them back.
        rebuild = finding.repair is not None and "--rebuild-cq" in finding.repair
        if finding.component != "consumequeue" or not finding.path or \
                (finding.severity != "error" and not rebuild):
            continue
        relative = os.path.relpath(os.path.realpath(finding.path), base).split(os.sep)
        if len(relative) >= 2 and relative[0] not in ("..", ".") and \
                relative[1].lstrip("-").isdigit():
            queues.add((relative[0], int(relative[1])))
    return sorted(queues)


def _queues_into(config, spans) -> dict:
    """(topic, queue_id) -> queue offsets of the file-queue units pointing into the lost `spans`
    ([phy_from, phy_to) ranges), read from the queue files (20 bytes a unit)."""
    import numpy as np

    from store.codec.cq_unit import CQ_UNIT_DTYPE, CQ_UNIT_SIZE
    found: dict = {}
    directory = config.consume_queue_dir
    if config.store_type != "default" or not os.path.isdir(directory):
        return found
    for topic in sorted(os.listdir(directory)):
        topic_dir = os.path.join(directory, topic)
        for queue in sorted(os.listdir(topic_dir)) if os.path.isdir(topic_dir) else []:
            queue_dir = os.path.join(topic_dir, queue)
            if not queue.lstrip("-").isdigit() or not os.path.isdir(queue_dir):
                continue
            for name in sorted(os.listdir(queue_dir)):
                if parse_file_name(name) is None:
                    continue
                with open(os.path.join(queue_dir, name), "rb") as handle:
                    data = handle.read()
                units = np.frombuffer(data, dtype=CQ_UNIT_DTYPE, count=len(data) // CQ_UNIT_SIZE)
                for low, high in spans:
                    hits = np.nonzero((units["phy_offset"] >= low) & (units["phy_offset"] < high)
                                      & (units["size"] > 0))[0]
                    first = int(name) // CQ_UNIT_SIZE
                    found.setdefault((topic, int(queue)), []).extend(
                        first + int(i) for i in hits) if len(hits) else None
    return {key: sorted(offsets) for key, offsets in found.items() if offsets}


def _pad_segment(config, path: str, size: int, backup: "_Backup", report: RepairReport):
    """Pad one short segment (see the module docstring); returns the [from, to) phy range whose
    records the cut destroyed, or None."""
    segment_size = config.mapped_file_size_commit_log
    backup.copy(path)
    with open(path, "r+b") as handle:
        data = handle.read()
        position, kind = _end_of_complete_records(data)
        last = _is_last_data_segment(config, path)
        handle.truncate(segment_size)              # grows the file with zeros
        kept = _keep_torn_record(data, position, segment_size) \
            if kind == record_check.CHECK_INVALID else 0
        end = position + kept
        # Bytes of a record the cut tore that cannot be kept (a BLANK's body or zeros are none).
        torn = 0 if kind == record_check.CHECK_BLANK or kept else \
            len(data[position:].rstrip(b"\0"))
        handle.seek(end)
        if last:
            handle.write(bytes(len(data[end:].rstrip(b"\0"))))
            detail = "zeros after the last complete record (recovery ends the log there)"
        else:
            # The filler's body is zeroed too: torn header bytes left there would still name a
            # queue and queue offset, and a reader trusting them would decode a BLANK.
            handle.write(_BLANK_HEADER.pack(segment_size - end, BLANK_MAGIC))
            handle.write(bytes(max(0, len(data[end + 8:].rstrip(b"\0")))))
            detail = "a BLANK filler after the last complete record (the log goes on in the next " \
                     "segment)"
        handle.flush()
        os.fsync(handle.fileno())
    report.padded_segments.append(path)
    note = ""
    if kept:
        note = (f"; the record at {position} in the file lost its last "
                f"{position + kept - len(data)} bytes (properties) and is kept with them zeroed: "
                f"its body is whole (BODYCRC matches)")
    elif torn:
        note = (f"; the records from byte {end} on are lost ({torn} bytes were left of them: "
                f"the cut reached a body)")
    report.steps.append(f"padded {path} from {size} to {segment_size} bytes with {detail}{note}")
    if torn:                                    # records from `end` to the cut are gone
        file_from = parse_file_name(os.path.basename(path))
        return file_from + end, file_from + segment_size
    return None


def _keep_torn_record(data: bytes, position: int, segment_size: int) -> int:
    """TOTALSIZE of the record at `position` if the cut took only its tail (topic and body whole,
    BODYCRC matching, room for a BLANK after it), so zero-filling the tail keeps the message;
    else 0."""
    if position + 8 > len(data):
        return 0
    total_size = _BLANK_HEADER.unpack_from(data, position)[0]
    if total_size <= 0 or position + total_size + 8 > segment_size or \
            position + total_size <= len(data):
        return 0
    record = data[position:] + bytes(position + total_size - len(data))
    result = record_check.check_message(record, 0, check_crc=False, limit=len(record))
    if result.kind != record_check.CHECK_RECORD or result.size != total_size:
        return 0
    try:
        layout = field_layout(record, 0, len(record))
    except CorruptDataError:
        return 0
    if layout.properties_position > len(data) - position:      # the cut reached the topic
        return 0
    return total_size if body_crc_matches(record, 0) else 0


def _end_of_complete_records(data: bytes) -> tuple[int, str]:
    """Position after the last whole record from the start of a segment (each segment starts with
    a record: records never span files), and what stands there (BLANK, INVALID, or RECORD at the
    end of the data)."""
    position = 0
    for _ in range(len(data)):                     # each step moves forward
        if position >= len(data):
            break
        result = record_check.check_message(data, position, check_crc=False, limit=len(data))
        if result.kind != record_check.CHECK_RECORD or result.size <= 0:
            return position, result.kind
        position += result.size
    return position, record_check.CHECK_RECORD


def _is_last_data_segment(config, path: str) -> bool:
    start = parse_file_name(os.path.basename(path))
    for directory in config.commit_log_dirs:
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            other = parse_file_name(name)
            if other is not None and other > start:
                with open(os.path.join(directory, name), "rb") as handle:
                    if any(handle.read(8)):
                        return False
    return True


class _Backup:
    """Copies (or moves) what a repair replaces into `<root>/repair-backup-<ms>/`, same layout."""

    def __init__(self, root: str, report: RepairReport):
        self.root = root
        self.report = report
        self.directory = os.path.join(root, f"repair-backup-{time.time_ns() // 1_000_000}")

    def _target(self, path: str) -> str:
        target = os.path.join(self.directory, os.path.relpath(path, self.root))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        self.report.backup_dir = self.directory
        return target

    def copy(self, path: str) -> None:
        shutil.copy2(path, self._target(path))

    def move(self, path: str) -> None:
        os.replace(path, self._target(path))
