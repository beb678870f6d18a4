"""The dashboard in a real browser on the newer store structures (`streamlit run`, Playwright driving
Debian's chromium): copies of the `dledger-clean` and `prop-crc` fixtures opened read-only, every
sidebar page visited with a check for Streamlit exception elements; the CommitLog page's DLedger entry
view and a record failing its `__CRC32#` (a copy with one flipped FLAG byte) shown with the CRC field
marked. Screenshots (`dledger_commitlog.png`, `prop_crc_record.png`) go to a temporary directory, or to
docs/screenshots/ with RMQ_UPDATE_SCREENSHOTS=1 (the convention of tests/test_browser_stores.py)."""

from __future__ import annotations

import os

import pytest

from tests.fixtures_util import copy_store, fixture_dirs, fixture_id, load_dump
from tests.test_browser_stores import SHOTS, _idle, _nav, _open, page, server  # noqa: F401

pytestmark = pytest.mark.browser
PAGES = ("Overview", "CommitLog", "ConsumeQueue", "Index", "Produce", "Pull", "Scheduled", "Query",
         "Browse", "Topics", "Consumer groups", "Recovery lab", "Health", "Tour", "Pipeline")
MAX_SHOT_BYTES = 150_000


def _fixture(name: str) -> str:
    found = [f for f in fixture_dirs() if fixture_id(f) == name]
    if not found:
        pytest.skip(f"no fixture {name}")
    return found[0]


def _no_exception(page, where: str) -> None:
    exceptions = page.locator('[data-testid="stException"]')
    assert exceptions.count() == 0, (where, exceptions.first.inner_text()[:500])


def _visit_every_page(page) -> None:
    for label in PAGES:
        _nav(page, label)
        _no_exception(page, label)


def _shot_at(page, heading: str, name: str) -> str:
    """Scroll `heading` to the top of the main section, screenshot the viewport's main section (the
    sidebar left out), keep it under MAX_SHOT_BYTES."""
    target = page.get_by_role("heading", name=heading).first
    target.wait_for(timeout=30_000)
    target.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(600)
    os.makedirs(SHOTS, exist_ok=True)
    path = os.path.join(SHOTS, f"{name}.png")
    box = page.locator('[data-testid="stMain"]').bounding_box()     # the page, not the sidebar
    page.screenshot(path=path, clip={"x": box["x"], "y": 0, "width": box["width"],
                                     "height": page.viewport_size["height"]})
    assert os.path.getsize(path) < MAX_SHOT_BYTES, (path, os.path.getsize(path))
    return path


def test_dledger_store_every_page_and_the_entry_view(server, page, tmp_path):  # noqa: F811
    fixture = _fixture("rocketmq-5.3.3/dledger-clean")
    root = copy_store(fixture, tmp_path / "dledger")
    page.goto(server)
    _idle(page)
    _open(page, root, os.path.join(fixture, "store.properties"))
    _visit_every_page(page)
    _nav(page, "CommitLog")
    main = page.locator('[data-testid="stMain"]')
    assert main.get_by_text("A DLedger log (enableDLegerCommitLog)", exact=False).count() == 1
    first = load_dump(fixture)["dledgerAfterStart"]["entries"][0]
    main.get_by_role("heading", name="DLedger entry header").wait_for(timeout=30_000)
    path = _shot_at(page, "DLedger entry header", "dledger_commitlog")
    _no_exception(page, "CommitLog entry view")
    # the header table and the byte view are drawn (canvas dataframes: the text is not in the DOM)
    assert main.locator('[data-testid="stDataFrame"]').count() >= 6
    assert first["commitLogOffset"] == first["pos"] + 48
    assert os.path.exists(path)


def test_prop_crc_store_every_page_and_a_record_failing_its_crc(server, page, tmp_path):  # noqa: F811
    fixture = _fixture("rocketmq-5.3.3/prop-crc")
    properties = os.path.join(fixture, "store.properties")
    intact = copy_store(fixture, tmp_path / "intact")
    page.goto(server)
    _idle(page)
    _open(page, intact, properties)
    _visit_every_page(page)
    _nav(page, "CommitLog")
    page.get_by_role("heading", name="Property CRC (__CRC32#)").wait_for(timeout=30_000)
    assert page.get_by_test_id("stMetricValue").filter(has_text="OK").count() >= 2   # BODYCRC, CRC32
    # A copy whose second record has one flipped FLAG byte: recovery ends the log there.
    records = sorted(load_dump(fixture)["commitLogRecords"], key=lambda r: r["commitLogOffset"])
    offset = records[1]["commitLogOffset"]
    damaged = copy_store(fixture, tmp_path / "damaged")
    with open(os.path.join(damaged, "commitlog", f"{0:020d}"), "r+b") as handle:
        handle.seek(offset + 16)
        byte = handle.read(1)
        handle.seek(offset + 16)
        handle.write(bytes([byte[0] ^ 0x05]))
    _open(page, damaged, properties)
    _nav(page, "CommitLog")
    _shot_at(page, "The record where the log ends", "prop_crc_record")
    code = page.locator('[data-testid="stCode"]').filter(has_text="CRC field: bytes").first
    text = code.inner_text()
    assert text.startswith(f"{offset:016x}") and "^^" in text
    _no_exception(page, "CommitLog CRC view")
