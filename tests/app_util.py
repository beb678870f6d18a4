"""What the dashboard's AppTest suites share: the app's entry point, the store registry's cleanup, and the
store picker's steps (path, mode, properties, Open) and a page visit, each checked for exceptions.

A test module takes the fixtures by importing them (`from tests.app_util import registry_cleanup`):
pytest registers fixtures found in a module's namespace, autouse ones included.
"""

from __future__ import annotations

import os

import pytest
from streamlit.testing.v1 import AppTest

from tests.fixtures_util import REPO_ROOT

MAIN = os.path.join(REPO_ROOT, "app", "main.py")


@pytest.fixture(scope="module", autouse=True)
def registry_cleanup():
    """Close every store the module's scripts opened, and forget the cached registry."""
    yield
    from app.ui.state import get_registry
    get_registry().close_all()
    get_registry.clear()


@pytest.fixture
def close_fixture_stores():
    """After the test, close the fixture copies it opened (the registry holds a bounded number of
    stores); the sample store stays open."""
    yield
    from app.ui.state import get_registry
    registry = get_registry()
    for handle in registry.handles():
        if handle.source_root != registry.sample_root:
            registry.close(handle.key)


def ok(at: AppTest, where: str = "") -> None:
    assert not at.exception, (where, [e.value for e in at.exception])


def button(at: AppTest, label: str):
    return [b for b in at.button if b.label == label][0]


def start(timeout_s: float = 60) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=timeout_s)
    at.run()
    ok(at, "start")
    return at


def open_store(at: AppTest, path: str, mode: str = "read-only", properties: str = "") -> AppTest:
    """The store picker: path, mode, properties file, Open."""
    at.text_input(key="picker_path").input(path)
    at.radio(key="picker_mode").set_value(mode)
    at.text_input(key="picker_props").input(properties)
    button(at, "Open").click()
    at.run()
    ok(at, "open")
    return at


def visit(at: AppTest, page: str) -> AppTest:
    """Switch to pages/<page>.py and run it."""
    at.switch_page(f"../pages/{page}.py")
    at.run()
    ok(at, page)
    return at
