"""The guided tour: a deterministic, replayable lesson on one message's life, and on what the store
does around it (a file rolling, a crash and recovery).

Every step is computed from scratch on a fresh store in the app's scratch directory, with a fixed clock
and services not started, so dispatch and flush happen exactly when the tour says so. Going back, or
replaying a step, runs the earlier steps again on a new store: the same bytes every time. Each step
carries the pictures that show what it explains: the pointers moving, the record's bytes, the
consume-queue unit pointing into the log, the hash slot and its chain, the files rolling, recovery
cutting a torn tail, a delayed message waiting in SCHEDULE_TOPIC_XXXX until the (tour's) clock reaches
its delivery time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field

import pandas as pd

from app import index_figures, segment_figures, tour_figures
from app.commitlog_data import segment_map
from app.hexview import annotate_record, check_record
from app.index_data import walk_key
from app.overview_data import format_ms
from store.api import Message
from store.codec.index_codec import build_key, key_hash_and_slot
from store.config import StoreConfig
from store.message_store import MessageStore

TOUR_CLOCK_MS = 1_700_000_000_000
TOUR_TOPIC = "TourTopic"
TOUR_KEY = "order-42"
TOUR_SEGMENT_BYTES = 65536
TOUR_SLOTS = 64
MAX_ROLL_PUTS = 2000            # a 64 KiB segment fills after about 350 of the tour's records
MAX_COLLIDING_KEY_TRIES = 10_000
TITLES = (
    "An empty store",
    "Produce one message",
    "Its bytes in the commit log",
    "Dispatch builds the consume-queue unit and the index entries",
    "Pull it",
    "Commit the consumer offset and find it by key",
    "The commit log rolls to a new file",
    "A crash tears the last record; recovery cuts it",
    "A delayed message waits, then appears in its topic",
)
DELAY_LEVEL = 2                 # messageDelayLevel's second level: 5 s
DELAY_TOPIC = "TourReminders"   # a topic of its own: empty until the delivery
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


@dataclass
class TourPage:
    step: int
    title: str
    text: str
    facts: dict = field(default_factory=dict)
    table: pd.DataFrame | None = None
    figures: list = field(default_factory=list)     # plotly figures, drawn in order
    fingerprint: str = ""      # sha256 of the log's bytes at the end of the step: equal on replay


def _config(root: str) -> StoreConfig:
    return StoreConfig.from_dict({}, store_path_root_dir=root,
                                 mapped_file_size_commit_log=TOUR_SEGMENT_BYTES,
                                 mapped_file_size_consume_queue=2000, max_hash_slot_num=TOUR_SLOTS,
                                 max_index_num=1024, store_format="4.9")


class _Clock:
    """The tour's clock: fixed, moved only by the scheduled-delivery step (replays stay identical)."""

    def __init__(self):
        self.now_ms = TOUR_CLOCK_MS

    def __call__(self) -> int:
        return self.now_ms


def _open(root: str, clock: _Clock) -> MessageStore:
    return MessageStore.open(_config(root), clock_ms=clock, start_services=False)


class _Scratch:
    """The tour's store and the directory it lives in; the current store is closed at the end."""

    def __init__(self, root: str):
        self.root = root
        self.clock = _Clock()
        self.store = _open(root, self.clock)

    def reopen_after_crash(self) -> None:
        self.store = _open(self.root, self.clock)


def run_tour(root: str, step: int) -> TourPage:
    """Replay the tour from nothing up to `step` in `root` (deleted and recreated) and describe it."""
    step = max(0, min(step, len(TITLES) - 1))
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    scratch = _Scratch(root)
    try:
        page = _describe(scratch, step)
        page.fingerprint = _fingerprint(scratch.store)
        return page
    finally:
        if not scratch.store.closed:
            scratch.store.close()


def _fingerprint(store) -> str:
    """sha256 of the commit log's bytes from its first offset up to the write pointer."""
    pointers = store.pointers()
    digest = hashlib.sha256()
    position = pointers["min_phy_offset"]
    for segment in store.inspect.segments():
        end = min(segment.file_end_offset, pointers["wrote"])
        if end > position:
            digest.update(store.inspect.read(position, end - position) or b"")
            position = end
    return digest.hexdigest()


def _pointer_figure(store) -> object:
    return segment_figures.pointer_zoom_figure(segment_map(store), store.pointers())


def _describe(scratch: _Scratch, step: int) -> TourPage:
    store = scratch.store
    title = TITLES[step]
    if step == 0:
        return TourPage(0, title, "A new store has one empty commit-log segment and nothing else. "
                        "Every pointer is at 0: wrote (bytes appended), committed (handed to the "
                        "file), flushed (forced to disk), reput (read back by dispatch).",
                        store.pointers(), figures=[_pointer_figure(store)])
    result = store.put_message(Message(TOUR_TOPIC, b'{"order": 42, "amount": "9.99"}', queue_id=0,
                                       tags="created", keys=[TOUR_KEY],
                                       properties={"source": "tour"}))
    if step == 1:
        return TourPage(1, title, "The put appends one record under the put lock: the write pointer "
                        f"moves by {result.wrote_bytes} bytes. Dispatch and flush have not run yet, "
                        "so the reput and flushed pointers lag behind wrote by exactly that record, "
                        "and the consume queue is still empty.",
                        {"status": result.status.value, "physical offset": result.wrote_offset,
                         "bytes": result.wrote_bytes, "queue offset": result.queue_offset,
                         "msgId": result.msg_id, "store time": format_ms(result.store_timestamp),
                         **{f"pointer {k}": v for k, v in store.pointers().items()},
                         "dispatch backlog bytes": store.dispatch_behind_bytes()},
                        figures=[_pointer_figure(store)])
    raw = store.inspect.record_bytes(result.wrote_offset)
    if step == 2:
        check = check_record(raw, result.wrote_offset)
        fields = annotate_record(raw)
        return TourPage(2, title, "Every field of the record, at the positions the spec gives "
                        "(§2.1): each coloured run of bytes is one field (hover a byte for its "
                        "value). The body CRC is recomputed and the msgId is decoded back.",
                        {"CRC stored": check.stored_crc, "CRC computed": check.computed_crc,
                         "msgId": check.msg_id, "msgId host": check.msg_id_host,
                         "msgId offset": check.msg_id_phy_offset},
                        pd.DataFrame([f.__dict__ for f in fields]),
                        [tour_figures.record_bytes_figure(raw, fields, result.wrote_offset)])
    store.dispatch_pending()
    unit = store.inspect.queue_unit(TOUR_TOPIC, 0, 0)
    queue_figure = tour_figures.queue_to_log_figure(
        [(0, unit.phy_offset, unit.size, unit.tags_code)], store.pointers()["wrote"],
        f"consume queue {TOUR_TOPIC}/0")
    if step == 3:
        key_hash, slot = key_hash_and_slot(build_key(TOUR_TOPIC, TOUR_KEY), TOUR_SLOTS)
        entries = store.inspect.index_entries()
        table = pd.DataFrame({"entry": range(len(entries)), "key_hash": entries["key_hash"],
                              "phy_offset": entries["phy_offset"], "time_diff_s": entries["time_diff_s"],
                              "prev_index": entries["prev_index"]}).iloc[1:]
        return TourPage(3, title, "The reput service read the record back and handed it to the "
                        "dispatchers: the consume queue got a 20-byte unit (physical offset, size, "
                        "tagsCode) that points at the record, and the index got one entry per key "
                        "(here the one key; a UNIQ_KEY property would add another). The reput pointer caught up with wrote.",
                        {"CQ unit phy_offset": unit.phy_offset, "CQ unit size": unit.size,
                         "CQ unit tagsCode": unit.tags_code, f"index key {TOUR_TOPIC}#{TOUR_KEY} hash":
                         key_hash, "slot": slot, "reput pointer": store.pointers()["reput"]}, table,
                        [queue_figure, _pointer_figure(store)])
    got = store.get_message("tour-group", TOUR_TOPIC, 0, 0, 8)
    if step == 4:
        return TourPage(4, title, "A pull reads unit 0 of the queue, then the record it points to: "
                        "the arrow below is the whole read path.",
                        {"status": got.status.value, "explanation": got.explanation,
                         "next_begin_offset": got.next_begin_offset,
                         "body": got.messages[0].body.decode() if got.messages else "-"},
                        figures=[queue_figure])
    store.commit_consumer_offset("tour-group", TOUR_TOPIC, 0, got.next_begin_offset)
    if step == 5:
        return _find_by_key(store)
    if step == 6:
        return _roll(store)
    crashed = _crash_and_recover(scratch)
    if step == 7:
        return crashed
    return _scheduled_delivery(scratch)


def _scheduled_delivery(scratch: _Scratch) -> TourPage:
    """RocketMQ 4.9's delay levels (ScheduleMessageService): the put parks the message in
    SCHEDULE_TOPIC_XXXX queue level-1 with the delivery time as its tagsCode; when the clock reaches
    it, the service writes the message again to its real topic (REAL_TOPIC / REAL_QID)."""
    store, clock = scratch.store, scratch.clock
    put = store.put_message(Message(DELAY_TOPIC, b'{"order": 44, "remind": true}', queue_id=0,
                                    tags="reminder", keys=["order-44"],
                                    properties={"DELAY": str(DELAY_LEVEL)}))
    store.dispatch_pending()
    level = store.inspect.delay_levels()[DELAY_LEVEL - 1]
    parked = store.inspect.queue_unit(SCHEDULE_TOPIC, level.queue_id, 0)
    waiting = {f"messages in {DELAY_TOPIC}/0 before": store.get_max_offset_in_queue(DELAY_TOPIC, 0),
               "delivered at the put's time": store.deliver_delayed()}
    clock.now_ms = parked.tags_code             # the clock reaches the delivery time
    delivered = store.deliver_delayed()
    store.dispatch_pending()
    unit = store.inspect.queue_unit(DELAY_TOPIC, 0, 0)
    after = store.inspect.delay_levels()[DELAY_LEVEL - 1]
    facts = {"put status": put.status.value, "parked in": f"{SCHEDULE_TOPIC}/{level.queue_id}",
             "parked record offset": put.wrote_offset, "delay": f"{level.delay_ms // 1000} s",
             "put time": format_ms(TOUR_CLOCK_MS), "delivery time (the unit's tagsCode)":
             format_ms(parked.tags_code), **waiting, "delivered when the clock got there": delivered,
             f"messages in {DELAY_TOPIC}/0 after": store.get_max_offset_in_queue(DELAY_TOPIC, 0),
             "delivered copy's offset": unit.phy_offset,
             "level's delivered offset": after.delivered_offset, "pending": after.pending}
    figures = [tour_figures.queue_to_log_figure(
                   [(0, parked.phy_offset, parked.size, parked.tags_code)],
                   store.pointers()["wrote"], f"{SCHEDULE_TOPIC}/{level.queue_id} (level {DELAY_LEVEL})"),
               tour_figures.queue_to_log_figure(
                   [(0, unit.phy_offset, unit.size, unit.tags_code)], store.pointers()["wrote"],
                   f"consume queue {DELAY_TOPIC}/0")]
    return TourPage(8, TITLES[8], f"A message with delay level {DELAY_LEVEL} "
                    f"({level.delay_ms // 1000} s) is not put to its topic: the store rewrites it to "
                    f"{SCHEDULE_TOPIC}, queue {level.queue_id} (level − 1), and the unit's tagsCode "
                    "holds its delivery time instead of a tag hash. Until the clock reaches that time "
                    f"the delivery pass leaves it there and {DELAY_TOPIC}/0 stays empty. Then "
                    "ScheduleMessageService writes the message again, to its real topic and queue "
                    "(REAL_TOPIC, REAL_QID), and moves the level's offset on "
                    "(config/delayOffset.json). Both records stay in the log: the upper picture is the "
                    "parked unit, the lower one the delivered copy.", facts, figures=figures)


def _colliding_key(slot: int) -> str:
    """The first `order-N` key (N > 42) of the tour topic that hashes to `slot` (bounded search)."""
    for number in range(43, 43 + MAX_COLLIDING_KEY_TRIES):
        key = f"order-{number}"
        if key_hash_and_slot(build_key(TOUR_TOPIC, key), TOUR_SLOTS)[1] == slot:
            return key
    raise AssertionError(f"no key of {MAX_COLLIDING_KEY_TRIES} lands in slot {slot}")


def _find_by_key(store) -> TourPage:
    slot = key_hash_and_slot(build_key(TOUR_TOPIC, TOUR_KEY), TOUR_SLOTS)[1]
    other = _colliding_key(slot)
    store.put_message(Message(TOUR_TOPIC, b'{"order": "other"}', queue_id=0, tags="created",
                              keys=[other]))
    store.dispatch_pending()
    found = store.query_message(TOUR_TOPIC, TOUR_KEY)
    walk = walk_key(store, TOUR_TOPIC, TOUR_KEY)
    return TourPage(5, TITLES[5], f"The group's offset is committed (persisted to consumerOffset.json "
                    f"at shutdown). A second message with key {other!r} lands in the same hash slot "
                    f"{slot}: the slot now holds the newest entry, whose prevIndex links back to the "
                    f"older one. The lookup walks the chain and keeps only the records that really "
                    f"carry {TOUR_KEY!r}.",
                    {"committed offset": store.query_consumer_offset("tour-group", TOUR_TOPIC, 0),
                     "slot": slot, "hops walked": len(walk.steps), "query hits": len(found.messages),
                     "found at": found.messages[0].commit_log_offset if found.messages else "-"},
                    walk.steps, [index_figures.chain_walk_figure(walk)])


def _roll(store) -> TourPage:
    puts = 0
    while len(store.inspect.segments()) < 2 and puts < MAX_ROLL_PUTS:
        store.put_message(Message(TOUR_TOPIC, b"filler message %04d" % puts + b"." * 120,
                                  queue_id=1, tags="fill", keys=[f"fill-{puts}"]))
        puts += 1
    store.dispatch_pending()
    segments = segment_map(store)
    first = segments[0]
    return TourPage(6, TITLES[6], f"{puts} more puts fill the first 64 KiB segment. A record never "
                    f"spans two files: when the next one does not fit, the rest of the file gets a "
                    f"BLANK filler ({first.filler_bytes} bytes here) and the log rolls to a new file "
                    f"named by its first physical offset.",
                    {"puts": puts, "segments": len(segments), "first file": first.name,
                     "BLANK filler bytes": first.filler_bytes, "new file": segments[-1].name,
                     "wrote": store.pointers()["wrote"]},
                    figures=[segment_figures.log_strip_figure(segments, store.pointers()),
                             segment_figures.recent_segments_figure(segments)])


def _queues_end(store) -> int:
    """The end of the furthest record any consume queue points to (-1 when none)."""
    return max((store.inspect.queue_max_phy_end(t, q) for t, q in store.queues()), default=-1)


def _crash_and_recover(scratch: _Scratch) -> TourPage:
    store = scratch.store
    _roll(store)
    last = store.put_message(Message(TOUR_TOPIC, b'{"order": 43, "amount": "1.00"}', queue_id=0,
                                     tags="created", keys=["order-43"]))
    store.dispatch_pending()
    segments_before = segment_map(store)
    wrote = store.pointers()["wrote"]
    cq_end = _queues_end(store)
    config = store.config
    store.crash()
    # The tour's store runs without services, so it never wrote the `abort` file a running broker
    # keeps (RocketMQ's DefaultMessageStore.createTempFile: an empty file in the store root). Put it
    # there as the dead broker would have left it, so the next open takes the crash path.
    with open(os.path.join(config.store_path_root_dir, "abort"), "wb"):
        pass
    # The power cut tore the last record: its second half never reached the disk.
    file_from = last.wrote_offset - last.wrote_offset % config.mapped_file_size_commit_log
    torn = last.wrote_bytes - last.wrote_bytes // 2
    with open(os.path.join(config.commit_log_dir, f"{file_from:020d}"), "r+b") as handle:
        handle.seek(last.wrote_offset - file_from + last.wrote_bytes // 2)
        handle.write(bytes(torn))
    scratch.reopen_after_crash()
    store = scratch.store
    report = store.recovery_report
    after = store.pointers()
    before_pointers = {"file end (max wrote)": wrote, "valid end (scan)": wrote,
                       "consume queues end": cq_end}
    after_pointers = {"file end (max wrote)": after["wrote"], "valid end (scan)": report.process_offset,
                      "consume queues end": _queues_end(store),
                      "reput": after["reput"]}
    steps = pd.DataFrame([{"step": s.what, "detail": s.detail} for s in report.steps])
    return TourPage(7, TITLES[7], f"The process dies (the abort file stays) and the second half of "
                    f"the last record ({torn} of {last.wrote_bytes} bytes) is zeros on disk. The next "
                    f"open finds the abort file and runs {report.mode} recovery: it checks the records "
                    f"of the last files, stops at the torn one (its CRC or size no longer match), "
                    f"cuts the log there and drops the consume-queue unit that pointed past the cut.",
                    {"recovery mode": report.mode, "records checked": report.records_checked,
                     "valid end": report.process_offset, "wrote before the crash": wrote,
                     "cut bytes": wrote - report.process_offset, "stop reason": report.stop_reason,
                     "queue TourTopic/0 max offset after": store.get_max_offset_in_queue(TOUR_TOPIC, 0)},
                    steps, [segment_figures.recovery_segments_figure(
                        segments_before, segment_map(store), before_pointers, after_pointers)])
