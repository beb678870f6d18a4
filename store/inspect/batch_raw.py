"""[5.x] A batch consume queue's files read as they are, for `rmqstore dump batch-consume-queue`:
no open store needed (like `raw.dump_queue_units` for the file consume queues).

Units of `batchconsumequeue/<topic>/<queueId>/` (`BatchConsumeQueue`, rocketmq-all-5.3.3; layout in
`store.codec.batch_cq_unit`) in file order, up to the first all-zero unit (the queue's end as
written). A unit `BatchConsumeQueue.recover` would not keep (phy < 0, size <= 0, base < 0 or
batch <= 0) is shown with `recovered: false`: recovery ends the queue there. `verify` judges each
unit against its record as `store.check.batch` does (`valid`, `problem`).
"""

from __future__ import annotations

import os

import numpy as np

from store.check.log_view import CommitLogView
from store.codec.batch_cq_unit import BATCH_CQ_UNIT_DTYPE, BATCH_CQ_UNIT_SIZE
from store.dledger.layout import log_dirs
from store.errors import StoreError
from store.inspect.batch_view import record_problems
from store.mappedfile.mapped_file import parse_file_name

__all__ = ["dump_batch_units"]


def dump_batch_units(config, topic: str, queue_id: int, *, start_queue_offset: int = 0,
                     limit: int = 100, verify: bool = False) -> list[dict]:
    """Up to `limit` units whose messages reach `start_queue_offset` or later (base + batch >
    start), read from the files. StoreError names the directory when there is none."""
    queue_dir = os.path.join(config.batch_consume_queue_dir, topic, str(queue_id))
    if not os.path.isdir(queue_dir):
        raise StoreError(f"no batch consume queue directory {queue_dir}")
    rows: list[dict] = []
    recovered = True
    view = CommitLogView(log_dirs(config), config.mapped_file_size_commit_log) if verify else None
    try:
        for name in sorted(n for n in os.listdir(queue_dir) if parse_file_name(n) is not None):
            with open(os.path.join(queue_dir, name), "rb") as handle:
                data = handle.read()
            units = np.frombuffer(data, dtype=BATCH_CQ_UNIT_DTYPE,
                                  count=len(data) // BATCH_CQ_UNIT_SIZE)
            for index in range(len(units)):                 # bounded by the file's size
                if len(rows) >= limit:
                    return rows
                position = index * BATCH_CQ_UNIT_SIZE
                if not any(data[position:position + BATCH_CQ_UNIT_SIZE]):
                    recovered = False       # recovery ends the queue here: later files are cut
                    break
                unit = units[index]
                phy, size = int(unit["phy_offset"]), int(unit["size"])
                base, batch = int(unit["msg_base_offset"]), int(unit["batch_size"])
                recovered = recovered and phy >= 0 and size > 0 and base >= 0 and batch > 0
                if base + batch <= start_queue_offset and recovered:
                    continue
                row = {"file": name, "position": position, "msgBaseOffset": base,
                       "batchSize": batch, "phyOffset": phy, "size": size,
                       "tagsCode": int(unit["tags_code"]),
                       "storeTimestamp": int(unit["store_timestamp"]),
                       "compactedOffset": int(unit["compacted_offset"]), "recovered": recovered}
                if view is not None:
                    problems = record_problems(view.check_at(phy, check_crc=True), topic, queue_id,
                                               size, base, batch) if phy >= 0 else \
                        [f"phyOffset {phy} is negative"]
                    row["valid"] = not problems
                    row["problem"] = "; ".join(problems)
                rows.append(row)
    finally:
        if view is not None:
            view.close()
    return rows
