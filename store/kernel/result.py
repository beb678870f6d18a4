"""`found_result` (C: c/result.c): a pull's GetMessageResult built without its dataclass __init__
frame (store/commitlog/read_fast.py's short path builds one per pull).

`found_result_py` is its pure-Python twin: the same refusals (TypeError with the same message for a
class that is not a slots class of GetMessageResult's eight fields, in order) and the same object
(allocated without `__new__`/`__init__`, the eight slots set through their descriptors: the six
arguments, then waited_ms 0 and skipped ()). tests/test_kernel_result.py compares the two, and the
fuzz driver's `found_result` target (tests/kernel_fuzz/result_target.py) runs the sanitized C.

    found_result(cls, status, next_begin_offset, min_offset, max_offset, messages,
                 suggest_pulling_from_slave) -> cls instance
"""

from __future__ import annotations

import types

from store.kernel import COMPILED, _native

RESULT_FIELDS = ("status", "next_begin_offset", "min_offset", "max_offset", "messages",
                 "suggest_pulling_from_slave", "waited_ms", "skipped")
_ERROR = "found_result: cls must be a slots class with GetMessageResult's fields"


def found_result_py(cls, *args):
    """The twin of the C `found_result` (see the module's docstring)."""
    if len(args) != 6:
        raise TypeError(f"found_result expected 7 arguments, got {len(args) + 1}")
    if not isinstance(cls, type):
        raise TypeError(_ERROR)
    slots = cls.__dict__.get("__slots__")
    if type(slots) is not tuple or len(slots) != len(RESULT_FIELDS) or any(
            not isinstance(name, str) or name != field
            or not isinstance(cls.__dict__.get(name), types.MemberDescriptorType)
            for name, field in zip(slots, RESULT_FIELDS)):
        raise TypeError(_ERROR)
    result = object.__new__(cls)
    for name, value in zip(RESULT_FIELDS, (*args, 0, ())):
        cls.__dict__[name].__set__(result, value)
    return result


found_result = _native.found_result if COMPILED else found_result_py
