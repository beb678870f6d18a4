"""UNIQ_KEY layout (spec §3.2) and the §14.8 vector."""

from datetime import timezone

import pytest

from store.codec.uniq_key import (UniqKeyGenerator, decode_uniq_key, encode_uniq_key,
                                  local_ip_bytes, month_start_ms, nearly_time_from_key, time_field)

VECTOR = "7F00000130391B6D358647B760000000"
NOW_MS = 1_700_000_000_000          # 2023-11-14T22:13:20Z


def test_vector_from_fields():
    assert time_field(NOW_MS, timezone.utc) == 1_203_200_000
    assert encode_uniq_key("127.0.0.1", 12345, 0x1B6D3586, 1_203_200_000, 0) == VECTOR


def test_generator_reproduces_vector():
    generator = UniqKeyGenerator(ip="127.0.0.1", pid=12345, class_loader_hash=0x1B6D3586,
                                 clock_ms=lambda: NOW_MS, tz=timezone.utc)
    assert generator.next_key() == VECTOR
    assert generator.next_key() == VECTOR[:-4] + "0001"


def test_decode_round_trip():
    fields = decode_uniq_key(VECTOR)
    assert (fields.ip, fields.pid, fields.class_loader_hash, fields.time_since_month_ms,
            fields.counter) == ("127.0.0.1", 12345, 0x1B6D3586, 1_203_200_000, 0)


@pytest.mark.parametrize("pid, counter", [(70000, 65536 + 7), (0xFFFF, 0xFFFF)])
def test_pid_and_counter_keep_low_16_bits(pid, counter):
    key = encode_uniq_key("10.0.0.1", pid, -5, 0, counter)
    fields = decode_uniq_key(key)
    assert fields.pid & 0xFFFF == pid & 0xFFFF and fields.counter & 0xFFFF == counter & 0xFFFF
    assert fields.class_loader_hash == -5


def test_ipv6_key_has_56_characters():
    key = encode_uniq_key("::1", 1, 2, 3, 4)
    assert len(key) == 56 and decode_uniq_key(key).ip == "::1"


def test_nearly_time_and_month_start():
    assert month_start_ms(NOW_MS, timezone.utc) == 1_698_796_800_000
    assert nearly_time_from_key(VECTOR, NOW_MS + 5000, timezone.utc) == NOW_MS
    # Read at the start of the next month, the key belongs to the previous one.
    assert nearly_time_from_key(VECTOR, 1_701_388_800_000 + 1000, timezone.utc) == NOW_MS


def test_bad_keys_raise_value_error():
    with pytest.raises(ValueError):
        decode_uniq_key("ABC")
    with pytest.raises(ValueError):
        decode_uniq_key("Z" * 32)


def test_local_ip_is_4_or_16_bytes():
    assert len(local_ip_bytes()) in (4, 16)
