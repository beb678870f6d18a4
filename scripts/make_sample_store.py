"""Generate the checked-in sample store (sample_store/) with our own engine, deterministically.

    python3 scripts/make_sample_store.py [--out sample_store]

A fixed clock (MessageStore.open(..., clock_ms=...)) spreads store times over about six hours from
2023-11-14 22:13:20 UTC; TZ is forced to UTC so index file names do not depend on the machine. Small
segments make the commit log roll (BLANK fillers), small index files fill up and form real chains,
and a few keys are chosen to collide (Java's "Aa".hashCode() == "BB".hashCode()). Three consumer
groups commit offsets with different lag. The store is shut down cleanly.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time

os.environ["TZ"] = "UTC"
time.tzset()
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from store import Message, MessageStore, StoreConfig  # noqa: E402

START_MS = 1_700_000_000_000
PROPERTIES = {
    "mappedFileSizeCommitLog": "262144",
    "mappedFileSizeConsumeQueue": "6000",
    "maxHashSlotNum": "128",
    "maxIndexNum": "512",
    "flushDiskType": "ASYNC_FLUSH",
    "storeFormat": "4.9",
}
# topic -> relative weight of each queue (uneven on purpose)
TOPICS = {
    "Orders": (6, 4, 3, 1),
    "Payments": (3, 1),
    "Audit": (2,),
    "Notifications": (5, 1, 0.3),
}
MESSAGES = 2400


class SettableClock:
    """The store's clock: returns whatever the generator last set (thread-safe enough: one int)."""

    def __init__(self, now_ms: int):
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def _choose(rng: random.Random) -> tuple[str, int]:
    pairs = [(t, q, w) for t, weights in TOPICS.items() for q, w in enumerate(weights)]
    topic, queue_id, _ = rng.choices(pairs, weights=[w for _, _, w in pairs])[0]
    return topic, queue_id


def _body(rng: random.Random, number: int, topic: str) -> bytes:
    if number % 29 == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(40, 200)))   # binary
    if number == 77:
        return b"<script>alert('not rendered as HTML')</script> **not markdown either**"
    if number % 401 == 0:
        return (f"big payload {number} " * 400).encode()                           # ~8 KB
    payload = {"id": number, "topic": topic, "amount": round(rng.uniform(1, 500), 2),
               "customer": f"cust-{rng.randrange(300)}", "note": "café ✓" if number % 11 == 0 else "",
               "items": [rng.randrange(1000) for _ in range(rng.randrange(1, 20))]}
    return json.dumps(payload, ensure_ascii=False).encode("utf-8")


def build(out: str) -> None:
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    with open(os.path.join(out, "store.properties"), "w", encoding="utf-8") as handle:
        handle.write("# Config of the sample store (scripts/make_sample_store.py)\n")
        handle.write("".join(f"{k}={v}\n" for k, v in PROPERTIES.items()))
    config = StoreConfig.from_properties(os.path.join(out, "store.properties"),
                                         store_path_root_dir=os.path.abspath(out))
    rng = random.Random(20231114)
    clock = SettableClock(START_MS)
    # Services are not started: dispatch runs synchronously after each put (below), so index files
    # are named by the clock of the message that filled the previous one, on every run.
    store = MessageStore.open(config, clock_ms=clock, start_services=False)
    try:
        now = START_MS
        for number in range(MESSAGES):
            now += rng.randrange(2000, 16000)
            clock.now_ms = now
            topic, queue_id = _choose(rng)
            keys = [f"{topic.lower()}-{number}"]
            if number % 7 == 0:
                keys.append(f"cust-{rng.randrange(300)}")
            if number in (100, 600, 1100):
                keys.append("collide-Aa")          # same Java hash as collide-BB
            if number in (350, 900):
                keys.append("collide-BB")
            props = {"UNIQ_KEY": f"0A0000010001{number:020X}",
                     "source": f"producer-{number % 3}"}
            result = store.put_message(Message(
                topic, _body(rng, number, topic), queue_id=queue_id,
                tags=rng.choice(("created", "paid", "shipped", "cancelled")) if topic != "Audit"
                else None,
                keys=keys, properties=props, born_timestamp=now - rng.randrange(1, 50),
                born_host=f"10.0.0.{number % 5 + 1}:{50000 + number % 5}"))
            assert result.ok, result
            _wait_dispatched(store)
        _commit_offsets(store)
    finally:
        store.close()


def _wait_dispatched(store) -> None:
    store.dispatch_pending()
    assert store.dispatch_behind_bytes() == 0, "dispatch did not catch up"


def _commit_offsets(store) -> None:
    """billing-service is caught up, analytics is half way, audit-archiver lags far behind."""
    for topic, weights in TOPICS.items():
        for queue_id in range(len(weights)):
            max_offset = store.get_max_offset_in_queue(topic, queue_id)
            if topic in ("Orders", "Payments"):
                store.commit_consumer_offset("billing-service", topic, queue_id, max_offset)
            store.commit_consumer_offset("analytics", topic, queue_id, max_offset // 2)
            if topic in ("Audit", "Notifications"):
                store.commit_consumer_offset("audit-archiver", topic, queue_id, max_offset // 10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(REPO_ROOT, "sample_store"))
    build(parser.parse_args().out)


if __name__ == "__main__":
    main()
