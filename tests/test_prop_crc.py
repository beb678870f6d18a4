"""[5.x] The property CRC (`enabledAppendPropCRC`, `forceVerifyPropCRC`; store.codec.prop_crc).

Against the real 5.3.3 prop-crc fixture (every record's trailer), through our put path (the same rule),
recovery (a flipped byte outside the body is caught only by the property CRC), the CRC-value-0 case of
apache/rocketmq#9121, and check().
"""

from __future__ import annotations

import os
import struct
import zlib

import pytest

from store import Message, MessageStore
from store.codec import message as msgcodec
from store.codec import prop_crc, record_check
from store.codec.properties import decode_properties
from tests.engine_util import FakeClock, small_config
from tests.fixtures_util import fixture_dirs, fixture_id



def _writes_prop_crc(fixture: str) -> bool:
    with open(os.path.join(fixture, "store.properties"), encoding="utf-8") as handle:
        return any(line.strip().replace(" ", "") == "enabledAppendPropCRC=true" for line in handle)


PROP_CRC_FIXTURES = [f for f in fixture_dirs() if _writes_prop_crc(f)]


def _records(buf: bytes):
    position = 0
    while position + 8 <= len(buf):
        size, magic = struct.unpack_from(">ii", buf, position)
        if magic not in (msgcodec.MESSAGE_MAGIC_V1, msgcodec.MESSAGE_MAGIC_V2):
            return
        yield position, size
        position += size


def _segment(store_root: str) -> bytes:
    directory = os.path.join(store_root, "commitlog")
    with open(os.path.join(directory, sorted(os.listdir(directory))[0]), "rb") as handle:
        return handle.read()


# -- the codec against the real store ----------------------------------------------------------

def test_the_fixture_is_in_the_repository():
    assert any(fixture_id(f) == "rocketmq-5.3.3/prop-crc" for f in PROP_CRC_FIXTURES)


@pytest.mark.parametrize("fixture", PROP_CRC_FIXTURES, ids=fixture_id)
def test_every_real_record_carries_its_crc_least_significant_digit_first(fixture):
    buf = _segment(os.path.join(fixture, "store"))
    records = list(_records(buf))
    assert records
    for position, size in records:
        tail = buf[position + size - 20:position + size]
        assert tail[:9] == b"__CRC32#\x01" and tail[-1:] == b"\x02"
        crc = zlib.crc32(buf[position:position + size - 20]) & 0x7FFFFFFF
        assert tail[9:19] == prop_crc.crc_digits(crc) == str(crc).rjust(10, "0")[::-1].encode()
        assert prop_crc.trailer(crc) == tail
        assert prop_crc.record_crc(buf, position, size) == crc
        assert prop_crc.expected_crc(tail[9:19].decode()) == crc
        # BODYCRC still holds the body's CRC.
        decoded = msgcodec.decode_message(buf, position, check_crc=True)
        assert decoded.properties["__CRC32#"] == tail[9:19].decode()
        for mode in (prop_crc.CRC_NONE, prop_crc.CRC_BODY, prop_crc.CRC_PROPERTY):
            result = record_check.check_message(buf, position, check_crc=mode, limit=len(buf))
            assert result.kind == record_check.CHECK_RECORD and result.size == size


def test_crc_digits_and_the_java_parse():
    assert prop_crc.crc_digits(1109801700) == b"0071089011"        # spec §14.7 vector C
    assert prop_crc.crc_digits(0) == b"0000000000"
    assert prop_crc.crc_digits(2**31 - 1) == b"7463847412"
    with pytest.raises(ValueError):
        prop_crc.crc_digits(2**31)
    assert prop_crc.expected_crc("0000000000") == 0
    assert prop_crc.expected_crc("7463847412") == 2**31 - 1
    assert prop_crc.expected_crc("12") == 21
    assert prop_crc.expected_crc("8463847412") == -(2**31)         # 2^31 wraps: no usable CRC
    assert prop_crc.expected_crc("9999999999") == 9999999999 % 2**32   # Java int arithmetic
    assert prop_crc.expected_crc("a") == ord("a") - 48              # Java: c - '0', not a digit check
    assert prop_crc.expected_crc("\U0001F600") == \
        ((0xDE00 - 48) * 10 + 0xD83D - 48)                          # UTF-16 units, right to left
    assert prop_crc.crc_mode(False, True) == prop_crc.CRC_NONE
    assert prop_crc.crc_mode(True, False) == prop_crc.CRC_BODY
    assert prop_crc.crc_mode(True, True) == prop_crc.CRC_PROPERTY


# -- our put path ------------------------------------------------------------------------------

def _config(root, **overrides):
    values = dict(store_format="5.x", enabled_append_prop_crc=True, force_verify_prop_crc=True)
    values.update(overrides)
    return small_config(root, **values)


def _put_some(config, count=10, clock=None, **message_fields):
    clock = clock or FakeClock(start_ms=1_795_668_845_836, step_ms=3)
    with MessageStore.open(config, clock_ms=clock) as store:
        results = [store.put_message(Message("CrcA", f"body {i}".encode() * (i + 1), queue_id=i % 2,
                                             tags="t", keys=[f"k{i}"], **message_fields))
                   for i in range(count)]
    assert all(r.ok for r in results)
    return results


def test_puts_seal_every_record_and_batches_too(tmp_path):
    config = _config(tmp_path / "s")
    results = _put_some(config, 6, properties={"__CRC32#": "forged", "u": "v"})
    with MessageStore.open(config, clock_ms=FakeClock(start_ms=1_795_668_900_000)) as store:
        batch = store.put_messages([Message("CrcB", b"x" * n, queue_id=1) for n in (1, 2, 3)])
        empty = store.put_message(Message("CrcB", b"", queue_id=0))      # no properties at all
    assert batch.ok and empty.ok
    buf = _segment(config.store_path_root_dir)
    records = list(_records(buf))
    assert [p for p, _ in records][:6] == [r.wrote_offset for r in results]
    assert len(records) == 6 + 3 + 1
    for position, size in records:
        raw = msgcodec.decode_message(buf, position).properties_raw
        assert raw.endswith(prop_crc.trailer(prop_crc.record_crc(buf, position, size)))
        assert raw.count(b"__CRC32#") == 1        # the caller's __CRC32# was dropped (deleteProperty)
    last_position, last_size = records[-1]
    assert msgcodec.decode_message(buf, last_position).properties_raw[:9] == b"__CRC32#\x01"
    assert last_size == msgcodec.compute_record_size(0, 4, 20)


def test_without_the_setting_no_trailer_is_written(tmp_path):
    config = _config(tmp_path / "s", enabled_append_prop_crc=False, force_verify_prop_crc=False)
    _put_some(config, 3)
    buf = _segment(config.store_path_root_dir)
    assert b"__CRC32#" not in buf


def test_properties_over_32767_bytes_with_the_trailer_are_refused(tmp_path):
    config = _config(tmp_path / "s")
    with MessageStore.open(config) as store:
        # 32,767 bytes of properties without the trailer; 20 more with it.
        fits_without = {"p": "v" * (32767 - len("p\x01\x02TAGS\x01t\x02"))}
        result = store.put_message(Message("CrcA", b"b", tags="t", properties=fits_without))
    assert result.status.value == "PROPERTIES_SIZE_EXCEEDED", result


# -- recovery ------------------------------------------------------------------------------------

def _flip(config, phy_offset: int, delta: int = 1) -> None:
    path = os.path.join(config.store_path_root_dir, "commitlog", f"{0:020d}")
    with open(path, "r+b") as handle:
        handle.seek(phy_offset)
        byte = handle.read(1)[0]
        handle.seek(phy_offset)
        handle.write(bytes([byte ^ delta]))


@pytest.mark.parametrize("force", [True, False])
def test_recovery_cuts_at_a_record_whose_header_was_torn_only_with_force_verify(tmp_path, force):
    config = _config(tmp_path / "s", force_verify_prop_crc=force)
    results = _put_some(config, 10)
    victim = results[6].wrote_offset
    _flip(config, victim + 16)                      # FLAG: outside the body, inside the CRC
    open(os.path.join(config.store_path_root_dir, "abort"), "w").close()
    with MessageStore.open(config, read_only=True) as store:
        end = store.pointers()["max_phy_offset"]
    expected = victim if force else results[-1].wrote_offset + results[-1].wrote_bytes
    assert end == expected


def test_force_verify_on_a_store_written_without_the_trailer_keeps_nothing(tmp_path):
    """5.3.3: a record without the property fails (checkMessageAndReturnSize logs "not found CRC")."""
    config = _config(tmp_path / "s", enabled_append_prop_crc=False, force_verify_prop_crc=False)
    _put_some(config, 3)
    open(os.path.join(config.store_path_root_dir, "abort"), "w").close()
    with MessageStore.open(config.replace(force_verify_prop_crc=True), read_only=True) as store:
        assert store.pointers()["max_phy_offset"] == 0


def _flag_for_zero_crc(record: bytearray) -> int:
    """The FLAG value that makes the record's property CRC 0 (CRC-32 is affine in those 32 bits)."""
    def crc_with(flag: int) -> int:
        struct.pack_into(">i", record, 16, flag - (1 << 32) if flag >= 1 << 31 else flag)
        return zlib.crc32(record[:len(record) - 20])
    base = crc_with(0)
    columns = [crc_with(1 << bit) ^ base for bit in range(32)]
    # Solve XOR of chosen columns == base over GF(2) (Gaussian elimination on 32 bits).
    rows = [(columns[bit], 1 << bit) for bit in range(32)]
    solution_rows = []
    for pivot in range(31, -1, -1):
        index = next((i for i, (value, _) in enumerate(rows) if value >> pivot & 1), None)
        if index is None:
            continue
        value, combo = rows.pop(index)
        rows = [(v ^ value, c ^ combo) if v >> pivot & 1 else (v, c) for v, c in rows]
        solution_rows = [(v ^ value, c ^ combo) if v >> pivot & 1 else (v, c)
                         for v, c in solution_rows]
        solution_rows.append((value, combo))
    target, flag = base, 0
    for value, combo in sorted(solution_rows, key=lambda r: -r[0].bit_length()):
        if target >> (value.bit_length() - 1) & 1:
            target ^= value
            flag ^= combo
    assert target == 0
    assert crc_with(flag) & 0x7FFFFFFF == 0
    return flag


def test_a_record_whose_crc_is_zero_survives_recovery_and_check(tmp_path):
    """apache/rocketmq#9121: before 5.3.2 a CRC of 0 (digits 0000000000) read as "no CRC" and
    recovery cut the log there; 5.3.3 (`expectedCRC >= 0`) keeps it, and so do we."""
    config = _config(tmp_path / "s")
    store_ms = 1_795_668_845_836
    message = dict(topic="CrcA", body=b"zero", tags="t", born_timestamp=1_700_000_000_000,
                   born_host="127.0.0.1:50000")
    # The record our engine writes at phy offset 0, queue offset 0, that store time, for flag 0.
    record = msgcodec.encode_message(
        topic="CrcA", queue_id=0, body=b"zero", properties_raw=b"TAGS\x01t\x02" + prop_crc.PLACEHOLDER,
        born_timestamp=1_700_000_000_000, born_host="127.0.0.1:50000", store_timestamp=store_ms,
        store_host=config.store_host)
    flag = _flag_for_zero_crc(record)
    flag = flag - (1 << 32) if flag >= 1 << 31 else flag
    with MessageStore.open(config, clock_ms=FakeClock(start_ms=store_ms)) as store:
        first = store.put_message(Message(message["topic"], message["body"], tags="t", flag=flag,
                                          born_timestamp=message["born_timestamp"],
                                          born_host=message["born_host"]))
        second = store.put_message(Message("CrcA", b"after", tags="t"))
    buf = _segment(config.store_path_root_dir)
    assert buf[first.wrote_bytes - 11:first.wrote_bytes - 1] == b"0000000000"
    assert prop_crc.record_crc(buf, 0, first.wrote_bytes) == 0
    result = record_check.check_message(buf, 0, check_crc=prop_crc.CRC_PROPERTY, limit=len(buf))
    assert result.kind == record_check.CHECK_RECORD
    open(os.path.join(config.store_path_root_dir, "abort"), "w").close()
    with MessageStore.open(config, read_only=True) as store:
        assert store.pointers()["max_phy_offset"] == second.wrote_offset + second.wrote_bytes
        assert [f for f in store.check() if f.severity == "error"] == []


# -- check() -------------------------------------------------------------------------------------

def test_check_names_the_record_whose_property_crc_fails(tmp_path):
    config = _config(tmp_path / "s")
    results = _put_some(config, 5)
    victim = results[2].wrote_offset
    _flip(config, victim + 16)
    with MessageStore.open(config, read_only=True) as store:
        findings = store.check()
    crc = [f for f in findings if "property CRC" in f.message]
    assert len(crc) == 1 and crc[0].severity == "error"
    assert crc[0].position == victim + results[2].wrote_bytes - 20
    assert f"at {victim}" in crc[0].message and "cuts" in crc[0].on_restart
    # Without forceVerifyPropCRC the same damage is a warning: recovery would not see it.
    with MessageStore.open(config.replace(force_verify_prop_crc=False), read_only=True) as store:
        findings = store.check()
    crc = [f for f in findings if "property CRC" in f.message]
    assert len(crc) == 1 and crc[0].severity == "warning"


@pytest.mark.parametrize("fixture", PROP_CRC_FIXTURES, ids=fixture_id)
def test_check_of_the_real_store_finds_no_crc_problem(fixture, tmp_path):
    from tests.fixtures_util import copy_store, store_config
    root = copy_store(fixture, str(tmp_path))
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        findings = store.check()
    assert [f for f in findings if "CRC" in f.message] == []
    assert decode_properties(b"a\x01b\x02__CRC32#\x010000000000\x02")["__CRC32#"] == "0000000000"


@pytest.mark.parametrize("text, expected", [
    ("a\x01b\x02__CRC32#\x011234\x02", "a\x01b\x02"),
    ("__CRC32#\x011234\x02a\x01b\x02", "a\x01b\x02"),
    ("a\x01b\x02__CRC32#\x011234", "a\x01b\x02"),                  # no separator: cut to the end
    ("__CRC32#\x01a\x02__CRC32#\x01b\x02c\x01d", "c\x01d"),         # every entry
    ("x__CRC32#\x011\x02", "x__CRC32#\x011\x02"),                    # not at an entry's start
    ("a\x01__CRC32#\x01\x02", "a\x01__CRC32#\x01\x02"),              # inside a value
    ("__CRC32#", "__CRC32#"),                                          # no \x01 after the name
    ("a\x01b", "a\x01b"),
])
def test_delete_property_is_message_utils_delete_property(text, expected):
    assert prop_crc.delete_property(text) == expected


def test_reserve_adds_a_separator_only_where_missing():
    assert prop_crc.reserve(b"") == prop_crc.PLACEHOLDER
    assert prop_crc.reserve(b"a\x01b") == b"a\x01b\x02" + prop_crc.PLACEHOLDER
    assert prop_crc.reserve(b"a\x01b\x02") == b"a\x01b\x02" + prop_crc.PLACEHOLDER
