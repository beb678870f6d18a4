"""store.codec.msgid: host fields and offset message ids (spec §3.1, vectors §14.8)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.codec.msgid import (MessageIdError, create_message_id, decode_host, decode_message_id,
                               encode_host, host_to_string)
from store.errors import CorruptDataError


@pytest.mark.parametrize("host, phy_offset, expected", [
    ("10.0.0.1:54321", 0, "0A0000010000D4310000000000000000"),
    ("127.0.0.1:10911", 0, "7F00000100002A9F0000000000000000"),
    ("10.0.0.1:54321", 4096, "0A0000010000D4310000000000001000"),
    ("[0:0:0:0:0:0:0:1]:10911", 0x1234, "0000000000000000000000000000000100002A9F0000000000001234"),
    ("[::1]:10911", 0x1234, "0000000000000000000000000000000100002A9F0000000000001234"),
])
def test_spec_message_ids(host, phy_offset, expected):
    assert create_message_id(host, phy_offset) == expected
    decoded_host, decoded_offset = decode_message_id(expected)
    assert decoded_offset == phy_offset
    assert encode_host(decoded_host) == encode_host(host)
    assert decode_message_id(expected.lower()) == (decoded_host, phy_offset)


@pytest.mark.parametrize("host, field_hex, text", [
    ("127.0.0.1:10911", "7f00000100002a9f", "127.0.0.1:10911"),
    ("10.0.0.1:54321", "0a0000010000d431", "10.0.0.1:54321"),
    ("[2001:db8::10]:10911", "20010db8000000000000000000000010" "00002a9f",
     "[2001:db8:0:0:0:0:0:10]:10911"),
    ("[::1]:0", "00000000000000000000000000000001" "00000000", "[0:0:0:0:0:0:0:1]:0"),
    ("[::ffff:1.2.3.4]:1", "00000000000000000000ffff01020304" "00000001",
     "[0:0:0:0:0:ffff:102:304]:1"),
    ("1.2.3.4:-1", "01020304ffffffff", "1.2.3.4:-1"),        # the port is a Java int on disk
])
def test_host_fields(host, field_hex, text):
    field = bytes.fromhex(field_hex)
    assert encode_host(host) == field
    assert host_to_string(field) == text
    assert decode_host(b"xx" + field, 2, len(field) == 20) == text


@pytest.mark.parametrize("host", [
    "localhost:10911", "1.2.3:4", "1.2.3.4", "1.2.3.4:", "::1:10911", "[::1]", "[zz::1]:1",
    "1.2.3.4:99999999999", "1.2.3.4:abc", "256.0.0.1:1", "1.2.3.4:+1", "", ":1", "[1.2.3.4]:1",
])
def test_bad_hosts(host):
    with pytest.raises(ValueError):
        encode_host(host)


def test_host_not_a_string():
    with pytest.raises(ValueError):
        encode_host(12345)


@pytest.mark.parametrize("buf, position, v6", [(b"\x00" * 7, 0, False), (b"\x00" * 20, 1, True),
                                               (b"\x00" * 8, -1, False)])
def test_decode_host_torn(buf, position, v6):
    with pytest.raises(CorruptDataError):
        decode_host(buf, position, v6)


@pytest.mark.parametrize("msg_id", ["", "0A", "0A0000010000D431000000000000000", "G" * 32,
                                    "0A0000010000D4310000000000000000" + "00", " " * 56, "x" * 56])
def test_bad_message_ids(msg_id):
    with pytest.raises(MessageIdError) as info:
        decode_message_id(msg_id)
    assert isinstance(info.value, CorruptDataError) and isinstance(info.value, ValueError)


IPV4 = st.builds(lambda a, p: f"{ipaddress.IPv4Address(a)}:{p}",
                 st.integers(0, 2**32 - 1), st.integers(0, 65535))
IPV6 = st.builds(lambda a, p: f"[{ipaddress.IPv6Address(a).exploded}]:{p}",
                 st.integers(0, 2**128 - 1), st.integers(0, 65535))
HOSTS = st.one_of(IPV4, IPV6)


@given(HOSTS)
def test_host_round_trip(host):
    field = encode_host(host)
    assert len(field) == (20 if host.startswith("[") else 8)
    text = host_to_string(field)
    assert encode_host(text) == field
    assert "::" not in text


@given(HOSTS, st.integers(-2**63, 2**63 - 1))
def test_message_id_round_trip(host, phy_offset):
    msg_id = create_message_id(host, phy_offset)
    assert len(msg_id) == (56 if host.startswith("[") else 32)
    assert msg_id == msg_id.upper()
    decoded_host, decoded_offset = decode_message_id(msg_id)
    assert decoded_offset == phy_offset
    assert encode_host(decoded_host) == encode_host(host)


@given(st.text(max_size=60))
def test_decode_message_id_only_raises_message_id_error(text):
    try:
        decode_message_id(text)
    except MessageIdError:
        pass
