"""[5.x] Batch consume queues in the store cross-check (`batchconsumequeue/<topic>/<queueId>/`,
`BatchConsumeQueue`, rocketmq-all-5.3.3; layout in `store.codec.batch_cq_unit`).

Read straight from the files, like the file consume queues. Per queue: file names and sizes
(`mapperFileSizeBatchConsumeQueue`), the units recovery keeps (up to the first invalid one; written
units after it are reported: recovery hides them), each unit against its record (a record start of
that size, of the queue's topic and queue id, INNER_BASE = msgBaseOffset and INNER_NUM = batchSize
when the record carries them, as `CommitLog.setBatchSizeIfNeeded` reads them), and consecutive
units covering consecutive message offsets (base + batch size = the next base).
"""

from __future__ import annotations

import os

import numpy as np

from store.check.commitlog import LogScan
from store.check.log_view import CommitLogView
from store.check.findings import Sink
from store.codec import record_check
from store.codec.batch_cq_unit import BATCH_CQ_UNIT_DTYPE, BATCH_CQ_UNIT_SIZE, valid_prefix_units
from store.mappedfile.mapped_file import parse_file_name

PROPERTY_INNER_NUM = "INNER_NUM"       # MessageConst
PROPERTY_INNER_BASE = "INNER_BASE"     # MessageConst
_ON_RESTART = "BatchConsumeQueue.recover keeps units up to the first invalid one (phy >= 0, size " \
              "> 0, msgBaseOffset >= 0, batchSize > 0) and serves whatever they point at"


def check_batch_queues(root_dir: str, file_size_bytes: int, view: CommitLogView, scan: LogScan,
                       sink: Sink, *, max_units: int | None) -> None:
    """Check every batch queue under `<root_dir>/batchconsumequeue` (nothing if absent)."""
    directory = os.path.join(root_dir, "batchconsumequeue")
    if not os.path.isdir(directory):
        return
    budget = [max_units if max_units is not None else 1 << 62]
    for topic in sorted(os.listdir(directory)):
        topic_dir = os.path.join(directory, topic)
        for name in sorted(os.listdir(topic_dir)) if os.path.isdir(topic_dir) else []:
            queue_dir = os.path.join(topic_dir, name)
            if not name.lstrip("-").isdigit() or not os.path.isdir(queue_dir) or sink.full:
                continue
            _check_queue(topic, int(name), queue_dir, file_size_bytes, view, scan, sink, budget)
            sink.summarize()


def _check_queue(topic, queue_id, queue_dir, file_size, view, scan, sink, budget) -> None:
    label = f"batch queue {topic}/{queue_id}"
    previous_end = None
    stopped = False
    for name in sorted(os.listdir(queue_dir)):
        path = os.path.join(queue_dir, name)
        if parse_file_name(name) is None or not os.path.isfile(path):
            sink.add("warning", "files", path, None, "not a 20-digit batch-CQ file name: ignored")
            continue
        with open(path, "rb") as handle:
            data = handle.read()
        if len(data) != file_size:
            sink.add("error", "consumequeue", path, len(data),
                     f"batch CQ file is {len(data)} bytes, expected {file_size} "
                     f"(mapperFileSizeBatchConsumeQueue)", on_restart=_ON_RESTART)
        count = len(data) // BATCH_CQ_UNIT_SIZE
        kept = valid_prefix_units(data, count)
        units = np.frombuffer(data, dtype=BATCH_CQ_UNIT_DTYPE, count=count)
        if stopped and kept:
            sink.add("error", "consumequeue", path, 0,
                     f"{label}: units after the queue's end (an earlier file ends early): "
                     f"recovery drops them", on_restart=_ON_RESTART)
        if kept < count and data[kept * BATCH_CQ_UNIT_SIZE:].strip(b"\0"):
            sink.add("error", "consumequeue", path, kept * BATCH_CQ_UNIT_SIZE,
                     f"{label}: unit {kept} of this file is invalid but written bytes follow: "
                     f"recovery ends the queue there and hides them", on_restart=_ON_RESTART)
        stopped = stopped or kept < count
        for index in range(kept):
            if budget[0] <= 0 or sink.full:
                return
            budget[0] -= 1
            unit = units[index]
            where = index * BATCH_CQ_UNIT_SIZE
            base, batch = int(unit["msg_base_offset"]), int(unit["batch_size"])
            if previous_end is not None and base != previous_end:
                sink.add_limited(f"{label} offset gaps", "error", "consumequeue", path, where,
                                 f"{label} unit at {where}: msgBaseOffset {base}, but the unit "
                                 f"before ends at message offset {previous_end}",
                                 on_restart=_ON_RESTART)
            previous_end = base + batch
            _check_target(label, topic, queue_id, path, where, unit, view, scan, sink)


def _check_target(label, topic, queue_id, path, where, unit, view, scan, sink) -> None:
    phy, size = int(unit["phy_offset"]), int(unit["size"])
    if phy < scan.min_offset:
        return                                # expired log data
    problems = []
    result = view.check_at(phy)
    if scan.is_record_start(phy) is False or result.kind != record_check.CHECK_RECORD:
        problems.append(f"phy {phy} is not the start of a record")
    else:
        request = result.request
        properties = request.properties or {}
        if result.size != size:
            problems.append(f"size {size} but the record is {result.size} bytes")
        if (request.topic, request.queue_id) != (topic, queue_id):
            problems.append(f"the record belongs to {request.topic}/{request.queue_id}")
        if PROPERTY_INNER_BASE in properties and \
                properties[PROPERTY_INNER_BASE] != str(int(unit["msg_base_offset"])):
            problems.append(f"msgBaseOffset {int(unit['msg_base_offset'])} but the record's "
                            f"INNER_BASE is {properties[PROPERTY_INNER_BASE]}")
        if PROPERTY_INNER_NUM in properties and \
                properties[PROPERTY_INNER_NUM] != str(int(unit["batch_size"])):
            problems.append(f"batchSize {int(unit['batch_size'])} but the record's INNER_NUM is "
                            f"{properties[PROPERTY_INNER_NUM]}")
    if problems:
        sink.add_limited(f"{label} units not matching their record", "error", "consumequeue",
                         path, where, f"{label} unit (base {int(unit['msg_base_offset'])}): " +
                         "; ".join(problems), on_restart=_ON_RESTART)
