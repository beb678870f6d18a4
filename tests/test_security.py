"""Security: topic names from disk cannot escape consumequeue/, no pickle/eval/exec, read-only writes
nothing."""

from __future__ import annotations

import os
import re

import pytest

from store import Message, MessageStore
from store.codec import message as msgcodec
from tests.engine_util import STORE_TYPES, small_config
from tests.fixtures_util import REPO_ROOT, tree_fingerprint


def _append_crafted_record(config, topic: str) -> None:
    """Append a record with `topic` after the last one, bypassing the put path, and mark a crash."""
    with MessageStore.open(config) as store:
        store.put_message(Message("Good", b"before"))
        end = store.commit_log.max_offset()
    record = msgcodec.encode_message(topic="X" * len(topic.encode()), queue_id=0, body=b"evil",
                                     properties_raw=b"", born_timestamp=1, born_host="1.2.3.4:5",
                                     store_timestamp=2, store_host="1.2.3.4:5")
    raw_topic = topic.encode()
    start = record.index(b"X" * len(raw_topic))
    record[start:start + len(raw_topic)] = raw_topic      # body CRC does not cover the topic
    msgcodec.patch_message(record, 0, queue_offset=1, phy_offset=end, store_timestamp=2)
    segment = os.path.join(config.commit_log_dir, f"{end - end % 65536:020d}")
    with open(segment, "r+b") as handle:
        handle.seek(end % 65536)
        handle.write(record)
    open(os.path.join(config.store_path_root_dir, "abort"), "w").close()


@pytest.mark.parametrize("store_type", STORE_TYPES)
@pytest.mark.parametrize("topic", ["../x", "../../escape", "/tmp/abs", "a/b", "nul\x00x", ".", ".."])
def test_crafted_topic_in_commit_log_creates_nothing_outside(tmp_path, store_type, topic):
    config = small_config(tmp_path / "s", store_type)
    _append_crafted_record(config, topic)
    before = set(os.listdir(tmp_path))
    with MessageStore.open(config) as store:       # abnormal recovery re-dispatches the record
        assert store.get_message("g", "Good", 0, 0).messages[0].body == b"before"
        assert store.put_message(Message("Good", b"after")).ok
    assert set(os.listdir(tmp_path)) == before
    assert not os.path.exists("/tmp/abs")
    root = config.store_path_root_dir
    assert sorted(os.listdir(root)) == sorted(
        n for n in os.listdir(root) if n in ("commitlog", "consumequeue", "index", "config",
                                             "checkpoint", "lock", "abort", "abort.bak"))
    if store_type == "default":
        assert sorted(os.listdir(config.consume_queue_dir)) == ["Good"]


def test_no_pickle_eval_exec_in_product_code():
    pattern = re.compile(r"\b(pickle|marshal|shelve)\b|(?<![\w.])(eval|exec)\s*\(|__import__\(")
    offenders = []
    for top in ("store", "app", "pages"):
        for dirpath, _, filenames in os.walk(os.path.join(REPO_ROOT, top)):
            for name in filenames:
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as handle:
                        for number, line in enumerate(handle, 1):
                            if pattern.search(line.split("#", 1)[0]):
                                offenders.append(f"{path}:{number}: {line.strip()}")
    assert offenders == []


@pytest.mark.parametrize("store_type", STORE_TYPES)
def test_read_only_session_writes_nothing(tmp_path, store_type):
    config = small_config(tmp_path / "s", store_type)
    with MessageStore.open(config) as store:
        results = [store.put_message(Message("T", b"m%d" % i, keys=[f"k{i}"], tags="a"))
                   for i in range(300)]
        store.commit_consumer_offset("g", "T", 0, 5)
    open(os.path.join(config.store_path_root_dir, "abort"), "w").close()  # as after a crash
    before = tree_fingerprint(config.store_path_root_dir)
    with MessageStore.open(config, read_only=True) as store:
        store.refresh()
        store.get_message("g", "T", 0, 0, 32, tag_expression="a")
        store.get_message("g", "T", 0, 290, 32, long_poll_ms=50)
        store.query_message("T", "k7")
        store.look_message_by_offset(results[3].wrote_offset)
        store.view_message(results[4].msg_id)
        store.pointers()
        store.queues()
        store.queue_summaries()
        store.get_offset_in_queue_by_time("T", 0, 0)
        store.get_earliest_message_time()
        store.query_consumer_offset("g", "T", 0)
        store.check()
        store.refresh()
        assert not store.put_message(Message("T", b"x")).ok
    assert tree_fingerprint(config.store_path_root_dir) == before
