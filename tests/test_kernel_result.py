"""store.kernel.result: the C `found_result` builds what GetMessageResult(...) builds (equal, same
explanation, defaults), refuses other classes exactly as its twin, and the fuzz target's inputs agree
with the twin (unsanitized here; tests/test_kernel_fuzz.py runs the sanitized C)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from store import kernel
from store.api import GetMessageResult, GetMessageStatus
from store.kernel.result import found_result, found_result_py
from tests.kernel_fuzz import result_target
from tests.kernel_fuzz.edges import Disagreement, outcome

needs_native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")
IMPLEMENTATIONS = [found_result_py] + ([kernel._native.found_result] if kernel.COMPILED else [])


@pytest.mark.parametrize("build", IMPLEMENTATIONS)
@pytest.mark.parametrize("suggest", [False, True])
def test_builds_what_the_dataclass_builds(build, suggest):
    messages = [b"a", b"b"]
    got = build(GetMessageResult, GetMessageStatus.FOUND, 12, 3, 40, messages, suggest)
    want = GetMessageResult(GetMessageStatus.FOUND, 12, 3, 40, messages, suggest)
    assert type(got) is GetMessageResult and got == want and repr(got) == repr(want)
    assert got.messages is messages and got.waited_ms == 0 and got.skipped == ()
    assert got.explanation == want.explanation
    got.skipped = ("x",)                 # a plain instance: its slots stay writable
    assert got != want and "Skipped" in got.explanation


@pytest.mark.parametrize("build", IMPLEMENTATIONS)
def test_refuses_other_classes_with_the_same_message(build):
    slots = type("R", (), {"__slots__": ("status", "next_begin_offset")})
    for cls in (slots, SimpleNamespace, int, None):
        with pytest.raises(TypeError, match="cls must be a slots class with GetMessageResult"):
            build(cls, 1, 2, 3, 4, [], False)
    with pytest.raises(TypeError, match="found_result expected 7 arguments, got 3"):
        build(GetMessageResult, 1, 2)


@needs_native
def test_c_agrees_with_its_twin_on_fuzz_inputs():
    fuzzer = SimpleNamespace(rng=random.Random(17), native=kernel._native, last_input=None,
                             executions={"found_result": 0}, compared={"found_result": 0})
    for _ in range(3000):
        result_target.found_result(fuzzer, outcome, Disagreement)
    assert fuzzer.compared["found_result"] == 3000


def test_the_fast_path_uses_the_kernel_when_built():
    assert found_result is (kernel._native.found_result if kernel.COMPILED else found_result_py)
