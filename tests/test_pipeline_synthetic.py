"""The vectorised decoder against a scalar reading of the spec, on synthetic records (IPv6, v2, odd
properties), plus the spec's test vectors."""

from __future__ import annotations

import ipaddress
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.pipeline.frames import commitlog_table
from store.pipeline.properties_vec import parse_properties
from store.pipeline.synthetic import CommitLogWriter, SyntheticMessage, encode


def reference_properties(raw: bytes) -> dict[str, str]:
    """Spec §2.3 parse rule, literally."""
    result = {}
    for segment in raw.decode("utf-8", "replace").split("\x02"):
        if len(segment) >= 3:
            i = segment.find("\x01")
            if 0 < i < len(segment) - 1:
                result[segment[:i]] = segment[i + 1:]
    return result


def reference_host(raw: bytes) -> str:
    address, port = raw[:-4], struct.unpack(">i", raw[-4:])[0]
    if len(address) == 4:
        return f"{ipaddress.ip_address(address)}:{port}"
    groups = struct.unpack(">8H", address)
    return "[" + ":".join(f"{g:x}" for g in groups) + f"]:{port}"


def write_messages(tmp_path, messages, segment_size=4096):
    writer = CommitLogWriter(tmp_path, segment_size)
    return [writer.append(m) for m in messages]


def test_ipv6_hosts_v2_topic_and_message_id(tmp_path):
    long_topic = "%RETRY%" + "g" * 121
    messages = [
        SyntheticMessage(born_host="[::1]:50000", store_host="[::1]:10911", properties_raw=b"a\x01b\x02"),
        SyntheticMessage(topic=long_topic, version=2, body=b"x", born_host="[fe80::1:abcd]:1",
                         store_host="10.0.0.1:54321"),
        SyntheticMessage(store_host="[2001:db8::ff00:42:8329]:10911", properties_raw=b""),
    ]
    offsets = write_messages(tmp_path, messages)
    rows = commitlog_table(tmp_path).to_pylist()
    assert [r["phy_offset"] for r in rows] == offsets
    assert rows[0]["born_host"] == "[0:0:0:0:0:0:0:1]:50000"
    assert rows[0]["store_host"] == "[0:0:0:0:0:0:0:1]:10911"
    assert rows[0]["sys_flag"] & 0x30 == 0x30
    assert rows[0]["msg_id"] == "00000000000000000000000000000001" + "00002A9F" + f"{offsets[0]:016X}"
    assert rows[1]["topic"] == long_topic and rows[1]["magic"] == -626843477
    assert rows[1]["born_host"] == "[fe80:0:0:0:0:0:1:abcd]:1"
    assert rows[1]["msg_id"] == "0A000001" + "0000D431" + f"{offsets[1]:016X}"
    assert rows[2]["store_host"] == "[2001:db8:0:0:0:ff00:42:8329]:10911"
    assert rows[2]["properties"] == [] and rows[2]["tags"] is None


def test_spec_vector_d_message_id():
    # spec §14.7a: v2 record at 4096, store host 10.0.0.1:54321
    message = SyntheticMessage(topic="%RETRY%" + "g" * 121, version=2, body=b"x", properties_raw=b"a\x01b\x02",
                               store_host="10.0.0.1:54321", born_host="127.0.0.1:12345")
    record = encode(message, 4096)
    assert len(record) == 225 and record[:8].hex() == "000000e1daa320ab"


host_strategy = st.one_of(
    st.tuples(st.ip_addresses(v=4), st.integers(0, 65535)).map(lambda t: f"{t[0]}:{t[1]}"),
    st.tuples(st.ip_addresses(v=6), st.integers(0, 65535)).map(lambda t: f"[{t[0]}]:{t[1]}"),
)
property_text = st.lists(
    st.tuples(st.text(st.characters(codec="utf-8"), max_size=6), st.sampled_from(["\x01", ""]),
              st.text(st.characters(codec="utf-8"), max_size=6)),
    max_size=6,
).map(lambda items: "\x02".join(a + s + b for a, s, b in items).encode("utf-8"))
message_strategy = st.builds(
    SyntheticMessage,
    topic=st.sampled_from(["T", "TopicA", "%RETRY%" + "x" * 130]),
    queue_id=st.integers(0, 7),
    body=st.binary(max_size=300),
    properties_raw=st.one_of(property_text, st.binary(max_size=40).map(lambda b: b.replace(b"\x02", b"\x02\x01"))),
    flag=st.integers(-(2**31), 2**31 - 1),
    born_timestamp=st.integers(0, 2**62),
    born_host=host_strategy,
    store_host=host_strategy,
    reconsume_times=st.integers(0, 16),
    prepared_transaction_offset=st.integers(0, 2**40),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=st.lists(message_strategy, min_size=1, max_size=25))
def test_vectorised_decode_equals_scalar_reading(tmp_path_factory, messages):
    store = tmp_path_factory.mktemp("synthetic")
    for m in messages:
        m.version = 2 if len(m.topic) > 127 else 1
    offsets = write_messages(store, messages, segment_size=8192)
    rows = commitlog_table(store, split_bytes=3000).to_pylist()
    assert [r["phy_offset"] for r in rows] == offsets
    for row, message in zip(rows, messages):
        born_raw = _host_raw(message.born_host)
        store_raw = _host_raw(message.store_host)
        assert row["topic"] == message.topic
        assert row["body"] == message.body
        assert row["properties_raw"] == message.properties_raw
        assert dict(row["properties"]) == reference_properties(message.properties_raw)
        assert row["born_host"] == reference_host(born_raw)
        assert row["store_host"] == reference_host(store_raw)
        assert row["msg_id"] == (store_raw + struct.pack(">q", row["phy_offset"])).hex().upper()
        assert (row["flag"], row["born_timestamp"], row["reconsume_times"], row["prepared_transaction_offset"]) == (
            message.flag, message.born_timestamp, message.reconsume_times, message.prepared_transaction_offset)
        props = reference_properties(message.properties_raw)
        assert (row["tags"], row["keys"], row["uniq_key"]) == (props.get("TAGS"), props.get("KEYS"), props.get("UNIQ_KEY"))


def _host_raw(host: str) -> bytes:
    address, _, port = host.rpartition(":")
    return ipaddress.ip_address(address.strip("[]")).packed + struct.pack(">i", int(port))


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.one_of(property_text, st.binary(max_size=30)), max_size=8))
def test_vectorised_properties_parse_follows_the_spec_rule(texts):
    data = np.frombuffer(b"".join(texts), dtype=np.uint8)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(t) for t in texts])
    parsed = parse_properties(data, offsets).to_map().to_pylist()
    assert [dict(p) for p in parsed] == [reference_properties(t) for t in texts]


def test_segment_rolls_with_blank_fillers(tmp_path):
    messages = [SyntheticMessage(body=bytes([i % 251]) * (100 + i)) for i in range(60)]
    offsets = write_messages(tmp_path, messages, segment_size=2048)
    table = commitlog_table(tmp_path, columns=["phy_offset", "file_name", "queue_offset"])
    assert table.column("phy_offset").to_pylist() == offsets
    assert table.column("queue_offset").to_pylist() == list(range(60))
    assert len(set(table.column("file_name").to_pylist())) > 3


@pytest.mark.parametrize("size", [91, 92])
def test_smallest_records(tmp_path, size):
    message = SyntheticMessage(topic="", body=b"", properties_raw=b"" if size == 91 else b"x")
    offsets = write_messages(tmp_path, [message, message])
    rows = commitlog_table(tmp_path).to_pylist()
    assert [r["phy_offset"] for r in rows] == offsets and rows[0]["store_size"] == size
