"""The dashboard following a live store: `python -m store.cli produce` writes a RocketMQ-format store
in another process while the app's registry holds it open read-only.

Small segments (a store.properties in the store root: 16 KiB commit-log files, 300-unit consume-queue
files, 256-entry index files) make the writer roll files several times a second, so the watchdog
observer sees segments created and `refresh()` sees the pointers move. The writer is bounded (count and
rate) and killed at the end whatever happens; the whole module takes about 15 s (plus imports).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("watchdog")

from app import overview_data  # noqa: E402
from app.commitlog_data import segment_map  # noqa: E402
from app.paths import resolve_store_dir  # noqa: E402
from app.registry import StoreRegistry  # noqa: E402
from app.store_config import resolve_config  # noqa: E402
from store.api import Message  # noqa: E402
from store.message_store import MessageStore  # noqa: E402
from tests.fixtures_util import REPO_ROOT  # noqa: E402

TOPIC = "LiveTopic"
QUEUE_ID = 1
SEED_MESSAGES = 5
WRITER_COUNT = 1800
WRITER_RATE_PER_S = 150           # about 12 s of writing
WRITER_BODY_BYTES = 200
SEGMENT_SIZE_BYTES = 16 * 1024    # a roll about every 45 messages
DEADLINE_S = 30
PROPERTIES = f"""\
mappedFileSizeCommitLog={SEGMENT_SIZE_BYTES}
mappedFileSizeConsumeQueue=6000
maxHashSlotNum=64
maxIndexNum=256
flushDiskType=ASYNC_FLUSH
"""


class LiveStore:
    """A seeded store directory, the writer process, and a registry holding it read-only."""

    def __init__(self, root: str, scratch: str):
        self.root = root
        self.started_s = time.monotonic()
        self.writer = subprocess.Popen(
            [sys.executable, "-m", "store.cli", "produce", TOPIC, "--store", root,
             "--queue", str(QUEUE_ID), "--count", str(WRITER_COUNT),
             "--rate", str(WRITER_RATE_PER_S), "--size", str(WRITER_BODY_BYTES), "--tags", "live"],
            cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.registry = StoreRegistry(scratch_root=scratch)
        self.handle = self.registry.open(resolve_store_dir(root), "read-only")

    @property
    def writing(self) -> bool:
        return self.writer.poll() is None

    def observe(self) -> dict:
        """What the Overview's live panel computes on one refresh."""
        self.handle.refresh()
        self.handle.sample(min_interval_s=0.0)
        store = self.handle.store
        return {**overview_data.totals(store), **store.pointers(),
                "segment_map": len(segment_map(store, self.handle.segment_cache)),
                "writing": self.writing}

    def wait_for_writer(self) -> int:
        remaining_s = DEADLINE_S - (time.monotonic() - self.started_s)
        return self.writer.wait(timeout=max(1.0, remaining_s))

    def close(self) -> None:
        if self.writing:
            self.writer.kill()
        self.writer.wait(timeout=10)
        self.writer.stderr.close()
        self.registry.close_all()


@pytest.fixture
def live(tmp_path_factory):
    # One writer per test: a shared one could finish before a later test looks, and that test
    # could then only skip ("could not check"), which CI must never mean.
    base = tmp_path_factory.mktemp("live")
    root = str(base / "store")
    os.makedirs(root)
    with open(os.path.join(root, "store.properties"), "w", encoding="utf-8") as handle:
        handle.write(PROPERTIES)
    # Seed it (clean shutdown) so the read-only open finds a store before the writer starts.
    with MessageStore.open(resolve_config(root).config) as store:
        for number in range(SEED_MESSAGES):
            assert store.put_message(Message("SeedTopic", f"seed {number}".encode())).ok
    live_store = LiveStore(root, str(base / "scratch"))
    yield live_store
    live_store.close()


def test_pointers_and_messages_move_while_the_writer_runs(live):
    first = live.observe()
    assert first["writing"], "the writer finished before the first observation"
    observations = [first]
    deadline_s = time.monotonic() + 4
    while time.monotonic() < deadline_s and live.writing:   # bounded: at most 4 s
        time.sleep(0.3)
        observations.append(live.observe())
    while_writing = [o for o in observations if o["writing"]]
    offsets = [o["max_phy_offset"] for o in while_writing]
    assert offsets == sorted(offsets), "max_phy_offset went backwards"
    assert len(set(offsets)) >= 4, offsets
    wrote = [o["wrote"] for o in while_writing]
    assert wrote == sorted(wrote) and wrote[-1] > wrote[0]
    messages = [o["messages"] for o in while_writing]
    assert messages == sorted(messages) and messages[-1] > messages[0] >= SEED_MESSAGES
    assert while_writing[-1]["segments"] > first["segments"]       # the commit log rolled
    assert while_writing[-1]["segment_map"] == while_writing[-1]["segments"]
    rates = overview_data.rates(live.handle.samples)
    assert (rates["put_messages_per_s"] > 0).any() and (rates["put_kib_per_s"] > 0).any()


def test_overview_page_follows_the_writer(live):
    """The Overview page under AppTest, opened read-only on the live store through the picker."""
    pytest.importorskip("streamlit")
    from tests.test_app_pages import open_store, start_app, visit
    assert live.writing, "the writer finished within seconds of starting (about 12 s of writing)"
    at = start_app()
    open_store(at, live.root, "read-only")
    try:
        visit(at, "overview")

        def observed() -> tuple[int, int]:
            messages = next(m.value for m in at.metric if m.label == "messages")
            pointers = next(f.value for f in at.dataframe if "max_phy_offset" in f.value.columns)
            return int(messages.replace(",", "")), int(pointers["max_phy_offset"].iloc[0])

        before = observed()
        time.sleep(1.0)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        after = observed()
        assert after[0] > before[0] and after[1] > before[1], (before, after)
        assert "File events" in [t.label for t in at.tabs]
        events = next(f.value for f in at.dataframe if "event" in f.value.columns)
        assert any("commitlog" in path for path in events["path"])      # a segment rolled
    finally:
        from app.ui.state import get_registry
        get_registry().close_all()
        get_registry.clear()


def test_everything_written_arrives_and_rolls_are_file_events(live):
    assert live.wait_for_writer() == 0, live.writer.stderr.read().decode(errors="replace")[-2000:]
    final = live.observe()
    assert final["messages"] == SEED_MESSAGES + WRITER_COUNT
    assert final["segments"] >= 10
    store = live.handle.store
    assert store.get_max_offset_in_queue(TOPIC, QUEUE_ID) == WRITER_COUNT
    pulled = store.get_message("watch-test", TOPIC, QUEUE_ID, WRITER_COUNT - 1, 4)
    assert [m.queue_offset for m in pulled.messages] == [WRITER_COUNT - 1]
    assert pulled.messages[0].tags == "live"
    # Give the observer a moment to deliver the last events, then look for segment rolls.
    deadline_s = time.monotonic() + 3
    created: set[str] = set()
    while time.monotonic() < deadline_s:
        created = {path for _ms, kind, path in live.handle.watcher.recent(limit=200)
                   if kind == "created"}
        if sum(p.startswith("commitlog/") for p in created) >= 5:
            break
        time.sleep(0.2)
    commit_log_files = {p for p in created if p.startswith("commitlog/")}
    assert len(commit_log_files) >= 5, sorted(created)
    assert any(p.startswith("index/") for p in created), sorted(created)
    assert any(p.startswith(f"consumequeue/{TOPIC}/") for p in created), sorted(created)
