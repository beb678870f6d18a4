"""store.codec.message: record encode/decode, patching, BLANK and the validity check (spec §2, §14)."""

from __future__ import annotations

import mmap
import struct
import time
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.codec import message as m
from store.codec import record_check as rc
from store.codec.javahash import tags_code
from store.codec.properties import encode_properties
from store.errors import CorruptDataError

UNIQ = "7F00000130391B6D358647B760000000"
EXAMPLE_PROPS = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": UNIQ, "WAIT": "true"}
BORN_MS, STORE_MS = 1700000000000, 1700000000123


def hexbytes(text: str) -> bytes:
    return bytes.fromhex("".join(line.split(":", 1)[-1] for line in text.strip().splitlines())
                         .replace(" ", ""))


VECTOR_A = hexbytes("""
0000: 000000b1 daa320a7 3610a686 00000001 00000000 00000000 00000000 00000000
0020: 00000000 00000000 0000018b cfe56800 7f000001 00002a9f 0000018b cfe5687b
0040: 0a000001 0000d431 00000000 00000000 00000000 00000005 68656c6c 6f09546f
0060: 70696354 65737400 484b4559 53016b31 206b3202 554e4951 5f4b4559 01374630
0080: 30303030 31333033 39314236 44333538 36343742 37363030 30303030 30025741
00a0: 49540174 72756502 54414753 01546167 41
""")
VECTOR_B = hexbytes("""
0000: 000000b2 daa320a7 3610a686 00000001 00000000 00000000 00000000 00000000
0020: 00000000 00000000 0000018b cfe56800 7f000001 00002a9f 0000018b cfe5687b
0040: 0a000001 0000d431 00000000 00000000 00000000 00000005 68656c6c 6f09546f
0060: 70696354 65737400 49554e49 515f4b45 59013746 30303030 30313330 33393142
0080: 36443335 38363437 42373630 30303030 30300254 41475301 54616741 024b4559
00a0: 53016b31 206b3202 57414954 01747275 6502
""")


def encode(**overrides) -> bytearray:
    fields = dict(topic="TopicTest", queue_id=1, body=b"hello",
                  properties_raw=encode_properties(EXAMPLE_PROPS), born_timestamp=BORN_MS,
                  born_host="127.0.0.1:10911", store_timestamp=STORE_MS, store_host="10.0.0.1:54321")
    fields.update(overrides)
    return m.encode_message(**fields)


def vector_d() -> bytearray:
    return encode(topic="%RETRY%" + "g" * 121, queue_id=0, queue_offset=7, phy_offset=4096,
                  reconsume_times=1, body=b"x", properties_raw=b"a\x01b\x02", version=2)


def test_constants():
    assert struct.pack(">i", m.MESSAGE_MAGIC_V1).hex() == "daa320a7"
    assert struct.pack(">i", m.MESSAGE_MAGIC_V2).hex() == "daa320ab"
    assert struct.pack(">i", m.BLANK_MAGIC).hex() == "cbd43194"
    assert (m.QUEUE_OFFSET_POSITION, m.PHY_OFFSET_POSITION, m.SYSFLAG_POSITION,
            m.BORN_TIMESTAMP_POSITION, m.END_FILE_MIN_BLANK_LENGTH) == (20, 28, 36, 40, 8)
    assert m.store_timestamp_position(0) == 56 and m.store_timestamp_position(0x10) == 68
    assert m.store_timestamp_position(0x20) == 56
    assert (m.born_host_size(0), m.born_host_size(m.SYSFLAG_BORNHOST_V6)) == (8, 20)


@pytest.mark.parametrize("style, vector", [("4.9", VECTOR_A), ("5.x", VECTOR_B)])
def test_vectors_a_and_b(style, vector):
    record = encode(properties_raw=encode_properties(EXAMPLE_PROPS, style=style))
    assert bytes(record) == vector
    decoded = m.decode_message(vector, check_crc=True)
    assert (decoded.store_size, decoded.body_crc, decoded.queue_id, decoded.topic, decoded.body) == \
        (len(vector), 907060870, 1, "TopicTest", b"hello")
    assert (decoded.born_host, decoded.store_host) == ("127.0.0.1:10911", "10.0.0.1:54321")
    assert (decoded.born_timestamp, decoded.store_timestamp) == (BORN_MS, STORE_MS)
    assert decoded.properties == EXAMPLE_PROPS
    assert decoded.msg_id == "0A0000010000D4310000000000000000"
    assert (decoded.tags, decoded.keys, decoded.key_list, decoded.uniq_key) == \
        ("TagA", "k1 k2", ["k1", "k2"], UNIQ)
    assert (decoded.version, decoded.transaction_type) == (1, m.TRANSACTION_NOT_TYPE)
    result = rc.check_message(vector, 0, check_crc=True)
    assert (result.kind, result.size) == (rc.CHECK_RECORD, len(vector))
    assert result.request == m.DispatchRequest(
        topic="TopicTest", queue_id=1, commit_log_offset=0, msg_size=len(vector), tags_code=2598919,
        store_timestamp=STORE_MS, consume_queue_offset=0, keys="k1 k2", uniq_key=UNIQ, sys_flag=0,
        prepared_transaction_offset=0, properties=EXAMPLE_PROPS)


def test_vector_d_v2_record():
    record = vector_d()
    assert len(record) == 225
    expected = {0: "000000e1daa320ab", 8: "0cdc1683", 20: "0000000000000007", 28: "0000000000001000",
                72: "00000001", 84: "0000000178", 89: "0080", 91: "2552455452592567", 219: "0004",
                221: "61016202"}
    for offset, fragment in expected.items():
        assert record[offset:offset + len(fragment) // 2].hex() == fragment
    decoded = m.decode_message(record, check_crc=True)
    assert (decoded.magic, decoded.version, len(decoded.topic)) == (m.MESSAGE_MAGIC_V2, 2, 128)
    assert decoded.msg_id == "0A0000010000D4310000000000001000"
    assert decoded.properties == {"a": "b"} and decoded.reconsume_times == 1
    result = rc.check_message(record, 0, check_crc=True)
    assert result.kind == rc.CHECK_RECORD and result.request.consume_queue_offset == 7


def test_blank_record_of_the_1024_byte_example():
    assert m.encode_blank(1024 - 177) == bytes.fromhex("0000034fcbd43194")
    segment = bytearray(1024)
    segment[:177] = VECTOR_A
    segment[177:185] = m.encode_blank(1024 - 177)
    first = rc.check_message(segment, 0, check_crc=True)
    assert (first.kind, first.size) == (rc.CHECK_RECORD, 177)
    assert rc.check_message(segment, 177, check_crc=True) == rc.CheckResult(rc.CHECK_BLANK, 0, None)
    with pytest.raises(CorruptDataError, match="BLANK"):
        m.decode_message(segment, 177)
    for size in (7, 0, -1, 2**31):
        with pytest.raises(ValueError):
            m.encode_blank(size)


@pytest.mark.parametrize("cut", range(0, len(VECTOR_A)))
def test_torn_record_is_invalid(cut):
    torn = VECTOR_A[:cut]
    assert rc.check_message(torn, 0, check_crc=True) == rc.CheckResult(rc.CHECK_INVALID, -1, None)
    assert rc.check_message(VECTOR_A, 0, check_crc=False, limit=cut).size == -1
    with pytest.raises(CorruptDataError):
        m.decode_message(torn, check_crc=True)


def with_int(record: bytes, position: int, value: int, fmt: str = ">i") -> bytearray:
    changed = bytearray(record)
    struct.pack_into(fmt, changed, position, value)
    return changed


def test_bad_crc():
    record = bytearray(VECTOR_A)
    record[88] ^= 0x01                                   # first body byte
    assert rc.check_message(record, 0, check_crc=True) == rc.CheckResult(rc.CHECK_INVALID, -1, None)
    assert rc.check_message(record, 0, check_crc=False).kind == rc.CHECK_RECORD
    with pytest.raises(CorruptDataError, match="BODYCRC"):
        m.decode_message(record, check_crc=True)
    assert m.decode_message(record).body == b"iello"


def test_empty_body_crc_is_not_checked():
    record = with_int(encode(body=b""), 8, 12345)         # RocketMQ only checks bodies of 1+ bytes
    assert rc.check_message(record, 0, check_crc=True).kind == rc.CHECK_RECORD
    assert m.decode_message(record, check_crc=True).body == b""


@pytest.mark.parametrize("delta", [1, 5, -1, -80])
def test_length_mismatch(delta):
    total = len(VECTOR_A) + delta
    buf = with_int(VECTOR_A, 0, total) + bytes(16)
    result = rc.check_message(buf, 0, check_crc=True)
    assert result == rc.CheckResult(rc.CHECK_INVALID, total, None)
    with pytest.raises(CorruptDataError, match="TOTALSIZE"):
        m.decode_message(buf)


@pytest.mark.parametrize("total", [0, -5])
def test_non_positive_total_size_is_torn(total):
    assert rc.check_message(with_int(VECTOR_A, 0, total), 0, check_crc=False).size == -1


@pytest.mark.parametrize("buf", [bytes(8), bytes(200), bytes.fromhex("000000b112345678") + bytes(200),
                                 with_int(VECTOR_A, 4, m.MESSAGE_MAGIC_V1 + 1)])
def test_zeros_and_unknown_magic_are_invalid(buf):
    assert rc.check_message(buf, 0, check_crc=True) == rc.CheckResult(rc.CHECK_INVALID, -1, None)
    with pytest.raises(CorruptDataError, match="magic"):
        m.decode_message(buf)


def test_blank_header_only_needs_8_bytes():
    blank = m.encode_blank(4096)
    assert rc.check_message(blank, 0, check_crc=True).kind == rc.CHECK_BLANK
    assert rc.check_message(blank[:7], 0, check_crc=True).size == -1


def test_negative_topic_length_is_invalid():
    record = bytearray(VECTOR_A)
    record[93] = 0xF7                                    # -9
    assert rc.check_message(record, 0, check_crc=True).size == -1
    with pytest.raises(CorruptDataError, match="TOPIC LENGTH"):
        m.decode_message(record)


def test_negative_body_and_properties_lengths_mean_empty():
    record = encode(body=b"", properties_raw=b"")
    record = with_int(record, 84, -7)
    struct.pack_into(">h", record, len(record) - 2, -3)
    assert rc.check_message(record, 0, check_crc=True).kind == rc.CHECK_RECORD
    decoded = m.decode_message(record, check_crc=True)
    assert (decoded.body, decoded.properties_raw, decoded.properties) == (b"", b"", {})


@pytest.mark.parametrize("length, version, ok", [(127, 1, True), (128, 1, False), (128, 2, True),
                                                 (1, 2, True), (0, 1, True), (300, 2, True)])
def test_topic_lengths(length, version, ok):
    topic = "%RETRY%" + "g" * (length - 7) if length > 7 else "t" * length
    if not ok:
        with pytest.raises(ValueError, match="topic"):
            encode(topic=topic, version=version)
        return
    record = encode(topic=topic, version=version)
    topic_length_position = 88 + 5
    width = 1 if version == 1 else 2
    assert int.from_bytes(record[topic_length_position:topic_length_position + width], "big") == length
    decoded = m.decode_message(record, check_crc=True)
    assert (decoded.topic, decoded.version) == (topic, version)


@pytest.mark.parametrize("size, ok", [(0, True), (32767, True), (32768, False)])
def test_properties_length_limit(size, ok):
    raw = b"a\x01" + b"v" * (size - 2) if size else b""
    if ok:
        record = encode(properties_raw=raw)
        assert m.decode_message(record).properties_raw == raw
    else:
        with pytest.raises(ValueError, match="32767"):
            encode(properties_raw=raw)


@pytest.mark.parametrize("field, value", [
    ("queue_id", 2**31), ("flag", -2**31 - 1), ("queue_offset", 2**63), ("phy_offset", -2**63 - 1),
    ("sys_flag", 2**31), ("born_timestamp", 2**63), ("store_timestamp", "now"),
    ("reconsume_times", 2**32), ("prepared_transaction_offset", 2**64),
])
def test_out_of_range_fields(field, value):
    with pytest.raises(ValueError, match=field):
        encode(**{field: value})


@pytest.mark.parametrize("overrides", [{"version": 3}, {"born_host": "localhost:1"},
                                       {"store_host": "1.2.3.4"}, {"topic": 5}])
def test_other_bad_arguments(overrides):
    with pytest.raises(ValueError):
        encode(**overrides)


@pytest.mark.parametrize("born, store, sys_flag, expected_flag, size", [
    ("127.0.0.1:1", "10.0.0.1:2", 0, 0, 177),
    ("[2001:db8::10]:10911", "10.0.0.1:2", 0, 0x10, 189),
    ("127.0.0.1:1", "[::1]:10911", 0x8, 0x28, 189),
    ("[::1]:1", "[::2]:2", 0, 0x30, 201),
    ("127.0.0.1:1", "10.0.0.1:2", 0x31, 0x01, 177),      # stale v6 bits are cleared
])
def test_ipv6_hosts(born, store, sys_flag, expected_flag, size):
    record = encode(born_host=born, store_host=store, sys_flag=sys_flag)
    assert len(record) == size
    decoded = m.decode_message(record, check_crc=True)
    assert decoded.sys_flag == expected_flag
    assert decoded.born_host == m.decode_message(encode(born_host=decoded.born_host)).born_host
    assert m.compute_record_size(5, 9, 72, born_v6=bool(expected_flag & 0x10),
                                 store_v6=bool(expected_flag & 0x20)) == size
    assert rc.check_message(record, 0, check_crc=True).request.store_timestamp == STORE_MS


def test_ipv6_host_strings():
    decoded = m.decode_message(encode(born_host="[2001:db8::10]:10911", store_host="[::1]:10911"))
    assert decoded.born_host == "[2001:db8:0:0:0:0:0:10]:10911"
    assert decoded.store_host == "[0:0:0:0:0:0:0:1]:10911"
    assert decoded.msg_id == "0000000000000000000000000000000100002A9F0000000000000000"


@pytest.mark.parametrize("born", ["127.0.0.1:1", "[::1]:1"])
def test_patch_message(born):
    record = bytearray(64) + encode(born_host=born)
    m.patch_message(record, 64, queue_offset=42, phy_offset=123456789, store_timestamp=STORE_MS + 9)
    decoded = m.decode_message(record, 64, check_crc=True)
    assert (decoded.queue_offset, decoded.commit_log_offset, decoded.store_timestamp) == \
        (42, 123456789, STORE_MS + 9)
    assert decoded.born_host == m.decode_message(encode(born_host=born)).born_host


@pytest.mark.parametrize("level, expected", [("3", STORE_MS + 10_000), ("18", STORE_MS + 7_200_000),
                                             ("99", STORE_MS + 7_200_000), ("+1", STORE_MS + 1000),
                                             ("0", tags_code("TagA")), ("-2", tags_code("TagA"))])
def test_schedule_topic_tags_code(level, expected):
    props = {"TAGS": "TagA", "DELAY": level, "REAL_TOPIC": "T", "REAL_QID": "0"}
    record = encode(topic=m.SCHEDULE_TOPIC, properties_raw=encode_properties(props))
    assert rc.check_message(record, 0, check_crc=True).request.tags_code == expected


def test_schedule_topic_custom_levels_and_bad_delay():
    record = encode(topic=m.SCHEDULE_TOPIC, properties_raw=encode_properties({"DELAY": "2"}))
    result = rc.check_message(record, 0, check_crc=False, delay_levels_ms=(10, 20))
    assert result.request.tags_code == STORE_MS + 20
    assert rc.check_message(record, 0, check_crc=False, delay_levels_ms=()).request.tags_code == 0
    for bad in ("abc", "1.5", " 1", "2147483648", ""):
        record = encode(topic=m.SCHEDULE_TOPIC, properties_raw=b"DELAY\x01" + bad.encode())
        expected_kind = rc.CHECK_RECORD if bad == "" else rc.CHECK_INVALID   # "" is not a property
        assert rc.check_message(record, 0, check_crc=False).kind == expected_kind


def test_no_keys_no_tags():
    record = encode(properties_raw=b"")
    request = rc.check_message(record, 0, check_crc=True).request
    assert (request.keys, request.uniq_key, request.tags_code, request.properties) == ("", None, 0, {})
    decoded = m.decode_message(record)
    assert (decoded.tags, decoded.keys, decoded.key_list, decoded.uniq_key) == (None, None, [], None)
    assert m.decode_message(encode(properties_raw=b"KEYS\x01 a  b ")).key_list == ["a", "b"]


@pytest.mark.parametrize("sys_flag, kind", [(0, 0), (0x4, 0x4), (0x8, 0x8), (0xC, 0xC), (0x3F, 0xC)])
def test_transaction_type(sys_flag, kind):
    assert m.decode_message(encode(sys_flag=sys_flag)).transaction_type == kind


def test_buffer_types_and_positions(tmp_path):
    data = bytes(100) + VECTOR_A + m.encode_blank(200) + bytes(192)
    path = tmp_path / "segment"
    path.write_bytes(data)
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        for buf in (data, bytearray(data), memoryview(data), mapped):
            assert m.decode_message(buf, 100, check_crc=True).body == b"hello"
            assert rc.check_message(buf, 100, check_crc=True, limit=277).size == 177
            assert rc.check_message(buf, 100, check_crc=True, limit=276).size == -1
            assert rc.check_message(buf, 277, check_crc=True, limit=285).kind == rc.CHECK_BLANK
    with pytest.raises(CorruptDataError):
        m.decode_message(data, -1)
    assert rc.check_message(data, -1, check_crc=True).size == -1


# -- property-based --------------------------------------------------------------------------------

LEGAL_TOPIC = "%|abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
IPV4 = st.builds(lambda a, b, p: f"{a}.{b}.0.1:{p}", st.integers(0, 255), st.integers(0, 255),
                 st.integers(0, 65535))
IPV6 = st.builds(lambda a, p: f"[{a:x}::{a % 7:x}]:{p}", st.integers(0, 0xFFFF), st.integers(0, 65535))
HOSTS = st.one_of(IPV4, IPV6)
INT32 = st.integers(-2**31, 2**31 - 1)
INT64 = st.integers(-2**63, 2**63 - 1)
NAME = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
               min_size=1, max_size=8)
VALUE = st.text(st.characters(blacklist_characters="\x02", blacklist_categories=("Cs",)),
                min_size=1, max_size=16)


@st.composite
def records(draw):
    version = draw(st.sampled_from([1, 2]))
    topic = draw(st.text(LEGAL_TOPIC, max_size=127 if version == 1 else 300))
    props = draw(st.dictionaries(NAME, VALUE, max_size=6))
    return dict(topic=topic, queue_id=draw(INT32), body=draw(st.binary(max_size=300)),
                properties_raw=encode_properties(props, style=draw(st.sampled_from(["4.9", "5.x"]))),
                flag=draw(INT32), sys_flag=draw(INT32), queue_offset=draw(INT64),
                phy_offset=draw(INT64), born_timestamp=draw(INT64), born_host=draw(HOSTS),
                store_timestamp=draw(INT64), store_host=draw(HOSTS), reconsume_times=draw(INT32),
                prepared_transaction_offset=draw(INT64), version=version), props


def reencode(decoded: m.MessageRecord) -> bytearray:
    return m.encode_message(
        topic=decoded.topic, queue_id=decoded.queue_id, body=decoded.body,
        properties_raw=decoded.properties_raw, flag=decoded.flag, sys_flag=decoded.sys_flag,
        queue_offset=decoded.queue_offset, phy_offset=decoded.commit_log_offset,
        born_timestamp=decoded.born_timestamp, born_host=decoded.born_host,
        store_timestamp=decoded.store_timestamp, store_host=decoded.store_host,
        reconsume_times=decoded.reconsume_times,
        prepared_transaction_offset=decoded.prepared_transaction_offset, version=decoded.version)


@given(records())
def test_encode_decode_round_trip(drawn):
    fields, props = drawn
    record = m.encode_message(**fields)
    assert len(record) == m.compute_record_size(
        len(fields["body"]), len(fields["topic"]), len(fields["properties_raw"]),
        born_v6=fields["born_host"].startswith("["), store_v6=fields["store_host"].startswith("["),
        version=fields["version"])
    decoded = m.decode_message(bytes(record), check_crc=True)
    assert (decoded.topic, decoded.body, decoded.properties, decoded.properties_raw) == \
        (fields["topic"], fields["body"], props, fields["properties_raw"])
    for name in ("queue_id", "flag", "queue_offset", "born_timestamp", "store_timestamp",
                 "reconsume_times", "prepared_transaction_offset", "version"):
        assert getattr(decoded, name) == fields[name], name
    assert decoded.commit_log_offset == fields["phy_offset"]
    assert decoded.sys_flag & ~0x30 == fields["sys_flag"] & ~0x30
    assert decoded.body_crc == zlib.crc32(fields["body"]) & 0x7FFFFFFF
    assert bytes(reencode(decoded)) == bytes(record)
    result = rc.check_message(record, 0, check_crc=True)
    assert (result.kind, result.size) == (rc.CHECK_RECORD, len(record))
    request = result.request
    assert (request.topic, request.queue_id, request.commit_log_offset, request.consume_queue_offset,
            request.store_timestamp, request.sys_flag, request.properties) == \
        (decoded.topic, decoded.queue_id, decoded.commit_log_offset, decoded.queue_offset,
         decoded.store_timestamp, decoded.sys_flag, props)
    if decoded.topic != m.SCHEDULE_TOPIC:
        assert request.tags_code == tags_code(props.get("TAGS"))
    assert (request.keys, request.uniq_key) == (props.get("KEYS", ""), props.get("UNIQ_KEY"))


def decode_or_none(buf):
    try:
        return m.decode_message(buf, 0, check_crc=True)
    except CorruptDataError:
        return None


def assert_consistent(buf):
    """Never another exception; check_message accepts exactly what decode_message accepts."""
    result = rc.check_message(buf, 0, check_crc=True)
    assert isinstance(result, rc.CheckResult)
    assert result.kind in (rc.CHECK_RECORD, rc.CHECK_BLANK, rc.CHECK_INVALID)
    assert (result.request is not None) == (result.kind == rc.CHECK_RECORD)
    if result.kind == rc.CHECK_INVALID:
        assert result.size == -1 or 0 < result.size <= len(buf)
    decoded = decode_or_none(buf)
    if decoded is not None and decoded.topic == m.SCHEDULE_TOPIC:
        return                  # only the check parses DELAY (and rejects a non-integer level)
    assert (decoded is not None) == (result.kind == rc.CHECK_RECORD)
    if decoded is not None:
        assert decoded.store_size == result.size
        decoded.msg_id, decoded.key_list  # derived properties never raise


@given(st.binary(max_size=400))
def test_fuzz_arbitrary_bytes(data):
    assert_consistent(data)


@given(st.binary(min_size=8, max_size=400), st.sampled_from([m.MESSAGE_MAGIC_V1, m.MESSAGE_MAGIC_V2]),
       st.integers(0, 500))
def test_fuzz_bytes_with_a_valid_magic(data, magic, total):
    assert_consistent(struct.pack(">ii", total, magic) + data[8:])


@given(records(), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
       st.integers(0, 10_000))
def test_fuzz_mutated_records(drawn, mutations, cut):
    fields, _ = drawn
    record = bytearray(m.encode_message(**fields))
    for position, value in mutations:
        record[position % len(record)] = value
    assert_consistent(bytes(record))
    assert_consistent(bytes(record[:cut % (len(record) + 1)]))


def test_hot_path_speed():
    """Loose bound (the target is tens of microseconds per 1 KiB record; CI machines vary)."""
    body = bytes(range(256)) * 4
    props = encode_properties(EXAMPLE_PROPS)
    rounds = 2000
    started = time.perf_counter()
    for _ in range(rounds):
        record = encode(body=body, properties_raw=props)
    encode_us = (time.perf_counter() - started) / rounds * 1e6
    started = time.perf_counter()
    for _ in range(rounds):
        rc.check_message(record, 0, check_crc=True)
    check_us = (time.perf_counter() - started) / rounds * 1e6
    assert encode_us < 200 and check_us < 300, (encode_us, check_us)
