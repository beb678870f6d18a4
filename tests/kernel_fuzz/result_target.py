"""The fuzz driver's `found_result` target (store/kernel/c/result.c) against its twin
(store/kernel/result.py's `found_result_py`), also run unsanitized by tests/test_kernel_result.py.

Input: a class (GetMessageResult; slots classes of its fields, some renamed, reordered, one short or
one extra; a class without __slots__; a non-class) and six arguments of any kind, sometimes the
wrong count. Every execution compares the two outcomes (the result's type and fields, or the
exception raised).
"""

from __future__ import annotations

from store.api import GetMessageResult, GetMessageStatus
from store.kernel.result import RESULT_FIELDS, found_result_py
from tests.kernel_fuzz.edges import INT64_EDGES


def _slots_class(fields):
    return type("R", (), {"__slots__": tuple(fields)})


def random_class(rng):
    kind = rng.randrange(8)
    fields = list(RESULT_FIELDS)
    if kind == 0:
        return GetMessageResult
    if kind == 1:
        return _slots_class(fields)
    if kind == 2:
        fields[rng.randrange(len(fields))] = "other"
        return _slots_class(fields)
    if kind == 3:
        i, j = rng.sample(range(len(fields)), 2)
        fields[i], fields[j] = fields[j], fields[i]
        return _slots_class(fields)
    if kind == 4:
        return _slots_class(fields[:-1] if rng.random() < 0.5 else fields + ["extra"])
    if kind == 5:
        return type("D", (), {})
    if kind == 6:
        return _slots_class(fields) if rng.random() < 0.5 else type(
            "S", (_slots_class(fields),), {"__slots__": ()})
    return rng.choice([None, 1, "GetMessageResult", int, tuple])


def random_value(rng):
    return rng.choice([0, 1, -1, None, True, False, (), [], "x", GetMessageStatus.FOUND,
                       rng.choice(INT64_EDGES), 2**70, [object()], b"\x00"])


def _comparable(result):
    if result[0] != "ok":
        return result
    value = result[1]
    return ("ok", type(value).__name__, tuple(
        repr(getattr(value, name, "<unset>")) for name in RESULT_FIELDS))


def found_result(fuzzer, outcome, disagreement) -> None:
    """One execution: the sanitized found_result against its twin (always compared)."""
    rng = fuzzer.rng
    cls = random_class(rng)
    args = [random_value(rng) for _ in range(6 if rng.random() < 0.9 else rng.randrange(9))]
    fuzzer.last_input = {"target": "found_result", "cls": repr(cls), "args": repr(args)[:2000]}
    got = _comparable(outcome(fuzzer.native.found_result, cls, *args))
    twin = _comparable(outcome(found_result_py, cls, *args))
    fuzzer.executions["found_result"] += 1
    fuzzer.compared["found_result"] += 1
    if got != twin:
        raise disagreement(f"found_result: C {got} != twin {twin}")
