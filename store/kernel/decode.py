"""`decode_records`: a pull's records decoded into MessageRecords in one call (C: c/decode.c).

The caller (store.codec.message.decode_messages) passes the record class and its own Python
functions, because the kernel imports nothing of the store: `decode_one` decodes (or refuses) one
record, `decode_properties` parses PROPERTIES, `host_to_string` renders a host field. The C version
decodes a well-formed record itself and hands every other case to those functions, so both give
`[decode_one(r) for r in records]`; `_decode_records_py` is exactly that, with the C's own checks of
its arguments (tests/test_kernel_decode.py compares them; tests/kernel_fuzz fuzzes the C).
"""

from __future__ import annotations

from store.kernel import COMPILED, _native

# MessageRecord's fields, in the order of its slots: the C writes the slots directly.
FIELDS = ("store_size", "magic", "body_crc", "queue_id", "flag", "queue_offset",
          "commit_log_offset", "sys_flag", "born_timestamp", "born_host", "store_timestamp",
          "store_host", "reconsume_times", "prepared_transaction_offset", "body", "topic",
          "properties", "properties_raw")
_LAYOUT_ERROR = "decode_records: cls must be a slots class with MessageRecord's fields"
_MEMBER_DESCRIPTOR = type(type("_Probe", (), {"__slots__": ("x",)}).__dict__["x"])


def _decode_records_py(records, cls, decode_one, decode_properties, host_to_string) -> list:
    if not isinstance(records, list):
        raise TypeError("decode_records takes a list of records")
    slots = cls.__dict__.get("__slots__") if isinstance(cls, type) else None
    if type(slots) is not tuple or slots != FIELDS or \
            not all(type(cls.__dict__.get(name)) is _MEMBER_DESCRIPTOR for name in FIELDS):
        raise TypeError(_LAYOUT_ERROR)
    return [decode_one(raw) for raw in records]


decode_records = _native.decode_records if COMPILED else _decode_records_py
