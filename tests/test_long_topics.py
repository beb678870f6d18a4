"""Topics over 127 characters: a 5.x-format store takes them as v2 records, as RocketMQ 5.3.3's store
does (`CommitLog.asyncPutMessage` with `autoMessageVersionOnTopicLen`, on by default); a 4.9 store
refuses them as 4.9.7's `DefaultMessageStore.checkMessage` does (MESSAGE_ILLEGAL)."""

from __future__ import annotations

import struct

import pytest

from store import Message, MessageStore, PutMessageStatus
from tests.engine_util import small_config

MAGIC_V2 = 0xDAA320AB   # MessageDecoder.MESSAGE_MAGIC_CODE_V2


@pytest.mark.parametrize("length", [128, 200, 255])
def test_a_5x_store_takes_a_long_topic_as_a_v2_record(tmp_path, length):
    topic = "T" * length
    config = small_config(str(tmp_path / "store"), store_format="5.x")
    with MessageStore.open(config) as store:
        put = store.put_message(Message(topic, b"long", queue_id=0, keys=["k-long"]))
        assert put.status is PutMessageStatus.PUT_OK
        wrote = put.wrote_offset
        raw = store.inspect.record_bytes(wrote)
        assert struct.unpack_from(">I", raw, 4)[0] == MAGIC_V2
        body_at = 88                            # IPv4 hosts: BODYLENGTH at 84, the body at 88
        assert struct.unpack_from(">h", raw, body_at + len(b"long"))[0] == length   # 2-byte TOPIC LENGTH
    with MessageStore.open(config) as store:          # recovered and re-read from disk
        got = store.get_message("g", topic, 0, 0, 8)
        assert [m.body for m in got.messages] == [b"long"]
        assert got.messages[0].topic == topic
        assert [m.commit_log_offset for m in store.query_message(topic, "k-long").messages] == [wrote]
        assert [f for f in store.check() if f.severity == "error"] == []


def test_a_5x_store_refuses_what_the_file_system_cannot_name(tmp_path):
    config = small_config(str(tmp_path / "store"), store_format="5.x")
    with MessageStore.open(config) as store:
        put = store.put_message(Message("T" * 256, b"x", queue_id=0))
        assert put.status is PutMessageStatus.MESSAGE_ILLEGAL


def test_a_49_store_refuses_a_topic_over_127(tmp_path):
    config = small_config(str(tmp_path / "store"), store_format="4.9")
    with MessageStore.open(config) as store:
        put = store.put_message(Message("T" * 128, b"x", queue_id=0))
        assert put.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert store.pointers()["max_phy_offset"] == 0
