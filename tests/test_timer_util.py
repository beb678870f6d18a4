"""Helpers for the timer tests (no tests here): timer fixtures, and copies with the wheel in place.

A timer fixture keeps its 38 MB wheel gzipped as `timerwheel.gz` beside `store/`; `timer_store_copy`
copies `store/` and unpacks the wheel into it, as the real broker's directory had it.
"""

from __future__ import annotations

import gzip
import os
import shutil

from tests.fixtures_util import copy_store, fixture_dirs, load_dump


def timer_fixtures() -> list[str]:
    return [f for f in fixture_dirs() if "timerBefore" in load_dump(f)]


def timer_store_copy(fixture: str, destination: str, *, with_wheel: bool = True) -> str:
    root = copy_store(fixture, str(destination))
    packed = os.path.join(fixture, "timerwheel.gz")
    if with_wheel and os.path.exists(packed):
        with gzip.open(packed, "rb") as source, open(os.path.join(root, "timerwheel"), "wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)
    return root


def fixture_file_size_timer_log(fixture: str) -> int:
    from tests.fixtures_util import store_config
    return store_config(fixture, "/nonexistent").mapped_file_size_timer_log
