"""The guided tour: a deterministic, replayable walk through one message's life.

Every step is computed from scratch on a fresh store in a scratch directory, with a fixed clock and
services not started, so dispatch happens exactly when the tour says so. Going back replays the
earlier steps on a new store: the same bytes every time.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

import pandas as pd

from app.hexview import annotate_record, check_record
from app.overview_data import format_ms
from store.api import Message
from store.codec.index_codec import build_key, key_hash_and_slot
from store.config import StoreConfig
from store.message_store import MessageStore

TOUR_CLOCK_MS = 1_700_000_000_000
TOUR_TOPIC = "TourTopic"
TOUR_KEY = "order-42"
TITLES = (
    "An empty store",
    "Produce one message",
    "Its bytes in the commit log",
    "Dispatch builds the consume-queue unit and the index entries",
    "Pull it",
    "Commit the consumer offset and find it by key",
)


@dataclass
class TourPage:
    step: int
    title: str
    text: str
    facts: dict = field(default_factory=dict)
    table: pd.DataFrame | None = None


def _config(root: str) -> StoreConfig:
    return StoreConfig.from_dict({}, store_path_root_dir=root, mapped_file_size_commit_log=65536,
                                 mapped_file_size_consume_queue=2000, max_hash_slot_num=64,
                                 max_index_num=256, store_format="4.9")


def run_tour(root: str, step: int) -> TourPage:
    """Replay the tour from nothing up to `step` in `root` (deleted and recreated) and describe it."""
    step = max(0, min(step, len(TITLES) - 1))
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    store = MessageStore.open(_config(root), clock_ms=lambda: TOUR_CLOCK_MS, start_services=False)
    try:
        return _describe(store, step)
    finally:
        store.close()


def _describe(store, step: int) -> TourPage:
    title = TITLES[step]
    if step == 0:
        return TourPage(0, title, "A new store has one empty commit-log segment and nothing else. "
                        "Every pointer is at 0.", store.pointers())
    result = store.put_message(Message(TOUR_TOPIC, b'{"order": 42, "amount": "9.99"}', queue_id=0,
                                       tags="created", keys=[TOUR_KEY],
                                       properties={"source": "tour"}))
    if step == 1:
        return TourPage(1, title, "The put appends one record under the put lock. The write pointer "
                        "moves; dispatch has not run yet, so the reput pointer lags and the consume "
                        "queue is still empty.",
                        {"status": result.status.value, "physical offset": result.wrote_offset,
                         "bytes": result.wrote_bytes, "queue offset": result.queue_offset,
                         "msgId": result.msg_id, "store time": format_ms(result.store_timestamp),
                         **{f"pointer {k}": v for k, v in store.pointers().items()},
                         "dispatch backlog bytes": store.dispatch_behind_bytes()})
    raw = store.inspect.record_bytes(result.wrote_offset)
    if step == 2:
        check = check_record(raw, result.wrote_offset)
        table = pd.DataFrame([f.__dict__ for f in annotate_record(raw)])
        return TourPage(2, title, "Every field of the record, at the positions the spec gives "
                        "(§2.1). The body CRC is recomputed and the msgId is decoded back.",
                        {"CRC stored": check.stored_crc, "CRC computed": check.computed_crc,
                         "msgId": check.msg_id, "msgId host": check.msg_id_host,
                         "msgId offset": check.msg_id_phy_offset}, table)
    store.dispatch_pending()
    if step == 3:
        unit = store.inspect.queue_unit(TOUR_TOPIC, 0, 0)
        key_hash, slot = key_hash_and_slot(build_key(TOUR_TOPIC, TOUR_KEY), store.config.max_hash_slot_num)
        entries = store.inspect.index_entries()
        table = pd.DataFrame({"entry": range(len(entries)), "key_hash": entries["key_hash"],
                              "phy_offset": entries["phy_offset"], "time_diff_s": entries["time_diff_s"],
                              "prev_index": entries["prev_index"]}).iloc[1:]
        return TourPage(3, title, "The reput service read the record back and handed it to the "
                        "dispatchers: the consume queue got a 20-byte unit (physical offset, size, "
                        "tagsCode) and the index got one entry per key (here the key and the unique "
                        "key, if any).",
                        {"CQ unit phy_offset": unit.phy_offset, "CQ unit size": unit.size,
                         "CQ unit tagsCode": unit.tags_code, f"index key {TOUR_TOPIC}#{TOUR_KEY} hash":
                         key_hash, "slot": slot, "reput pointer": store.pointers()["reput"]}, table)
    got = store.get_message("tour-group", TOUR_TOPIC, 0, 0, 8)
    if step == 4:
        return TourPage(4, title, "A pull reads unit 0 of the queue, then the record it points to.",
                        {"status": got.status.value, "explanation": got.explanation,
                         "next_begin_offset": got.next_begin_offset,
                         "body": got.messages[0].body.decode() if got.messages else "-"})
    store.commit_consumer_offset("tour-group", TOUR_TOPIC, 0, got.next_begin_offset)
    found = store.query_message(TOUR_TOPIC, TOUR_KEY)
    return TourPage(5, title, "The group's offset is committed (persisted to consumerOffset.json at "
                    "shutdown), and the index finds the message by its key.",
                    {"committed offset": store.query_consumer_offset("tour-group", TOUR_TOPIC, 0),
                     "query hits": len(found.messages),
                     "found at": found.messages[0].commit_log_offset if found.messages else "-"})
