"""The dashboard in a real browser (`streamlit run`, Playwright driving Debian's chromium), for what
only a browser shows: two stores whose folders are both called `store` stay apart while moving
between pages (the selectbox sends its choice back as its shown text); Query's "Show message" box
follows a new result; a store folder and a topic written like markdown links stay plain text; the
Topics and Consumer groups pages. Screenshots go to a temporary directory, or to docs/screenshots/
with RMQ_UPDATE_SCREENSHOTS=1."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tests.fixtures_util import REPO_ROOT, copy_store, fixture_dirs, fixture_id, load_dump
from tests.test_browser import page, server  # noqa: F401 (the one dashboard server and browser)

pytestmark = pytest.mark.browser
SHOTS = os.path.join(REPO_ROOT, "docs", "screenshots") \
    if os.environ.get("RMQ_UPDATE_SCREENSHOTS") == "1" else \
    os.path.join(tempfile.gettempdir(), "rmq-inspector-screenshots")
EVIL_DIR = "**BOLD**[click](https:evil.example)"
EVIL_TOPIC = "**bold** [link](http://evil.example/x)"


def _idle(page) -> None:
    """The script run is over and the page is drawn (no skeleton, every dataframe's canvas)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=30_000)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                           timeout=30_000)
    # Dataframes in a tab that is not shown draw no canvas: only the visible ones are waited for.
    page.wait_for_function("""() => !document.querySelector('[data-testid="stSkeleton"]') &&
        [...document.querySelectorAll('[data-testid="stDataFrame"]')]
            .filter(f => f.offsetParent !== null).every(f => f.querySelector('canvas'))""",
                           timeout=30_000)
    page.wait_for_timeout(600)
    assert page.locator('[data-testid="stException"]').count() == 0, \
        page.locator('[data-testid="stException"]').first.inner_text()[:500]


def _nav(page, label: str) -> None:
    """Through the sidebar link (a URL would start a new session, with the default store)."""
    more = page.locator('[data-testid="stSidebarNav"]').get_by_text("more", exact=False)
    if more.count() and more.first.is_visible() and "View" in more.first.inner_text():
        more.first.click()     # the navigation folds its last entries away
    page.locator('[data-testid="stSidebarNav"] a').filter(has_text=label).first.click()
    page.get_by_role("heading", name=label).first.wait_for(timeout=30_000)
    _idle(page)


def _open(page, root: str, properties: str = "") -> None:
    sidebar = page.locator('[data-testid="stSidebar"]')
    expander = sidebar.get_by_text("Open another store")
    if not sidebar.get_by_role("textbox", name="Store directory").is_visible():
        expander.click()
    sidebar.get_by_role("textbox", name="Store directory").fill(root)
    sidebar.get_by_text("read-only", exact=True).click()
    sidebar.get_by_role("textbox", name="store.properties (optional)").fill(properties)
    sidebar.get_by_test_id("stBaseButton-secondaryFormSubmit").click()
    sidebar.get_by_text(os.path.realpath(root), exact=True).wait_for(timeout=60_000)
    _idle(page)


def _picker_text(page) -> str:
    return page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"] input').first.input_value()


def _shot(page, name: str) -> None:
    os.makedirs(SHOTS, exist_ok=True)
    page.screenshot(path=os.path.join(SHOTS, f"{name}.png"))


def _no_markup(page, where: str) -> None:
    links = page.locator('a[href*="evil"]')
    assert links.count() == 0, (where, links.first.evaluate("e => e.outerHTML"))
    bold = page.locator("strong, b").filter(has_text="BOLD")
    assert bold.count() == 0, (where, bold.first.evaluate("e => e.outerHTML"))
    bold = page.locator("strong, b").filter(has_text="bold")
    assert bold.count() == 0, (where, bold.first.evaluate("e => e.outerHTML"))


def _fixture(name: str) -> str:
    return [f for f in fixture_dirs() if fixture_id(f) == name][0]


def test_two_stores_named_store_stay_apart_across_pages(server, page, tmp_path):
    crash, rolled = _fixture("rocketmq-4.9.7/crash-64k"), _fixture("rocketmq-4.9.7/rolled-64k")
    crash_root = copy_store(crash, tmp_path / "crash")
    rolled_root = copy_store(rolled, tmp_path / "rolled")
    page.goto(server)
    _idle(page)
    _open(page, crash_root, os.path.join(crash, "store.properties"))
    _open(page, rolled_root, os.path.join(rolled, "store.properties"))
    total = load_dump(rolled)["totalMessages"]
    for label in ("ConsumeQueue", "Overview", "Topics", "Consumer groups", "Health", "Overview"):
        _nav(page, label)
        assert "rolled/store [read-only]" in _picker_text(page), (label, _picker_text(page))
        assert page.locator('[data-testid="stSidebar"]').get_by_text(
            os.path.realpath(rolled_root), exact=True).count() == 1, label
        if label == "Topics":
            assert page.get_by_text(f"3 topic(s), 6 queue(s), {total:,} message(s)").count() == 1
            _shot(page, "topics")
        if label == "Consumer groups":
            _shot(page, "consumer_groups")
    _nav(page, "Browse")
    main = page.locator('[data-testid="stMain"]')
    main.get_by_role("button", name="Seek").click()
    _idle(page)
    main.get_by_role("button", name="Next ▶").wait_for()
    assert "rolled/store [read-only]" in _picker_text(page)
    _shot(page, "browse")
    # the crash store is still there, under its own name, and shows its own crash diagnosis
    page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"] input').first.click()
    page.get_by_role("option", name="crash/store [read-only]").click()
    _idle(page)
    _nav(page, "Health")
    assert "crash/store [read-only]" in _picker_text(page)
    diagnosis = page.get_by_role("heading", name="Crash diagnosis: what a broker restart would do")
    diagnosis.wait_for()
    diagnosis.evaluate("e => e.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    _shot(page, "health_crash_diagnosis")
    _nav(page, "Topics")
    assert page.get_by_text("2 topic(s), 6 queue(s), 300 message(s)").count() == 1


def test_query_show_message_follows_the_new_result(server, page):
    page.goto(server)
    _idle(page)
    _nav(page, "Query")
    ids = {"orders-1": "7F00000100002A9F00000000000000FB", "orders-2": "7F00000100002A9F0000000000000268"}
    form = page.locator('[data-testid="stMain"] [data-testid="stForm"]').first
    for key in ("orders-1", "orders-2"):
        form.get_by_label("Topic", exact=True).fill("Orders")
        form.get_by_label("Key", exact=True).fill(key)
        form.get_by_role("button", name="Search").click()
        _idle(page)
        shown = page.locator('[data-testid="stSelectbox"]').filter(has_text="Show message").first
        shown.wait_for()
        text = shown.locator("input").input_value()
        assert ids[key] in text, (key, text)


def test_markdown_in_a_folder_name_or_a_topic_stays_text(server, page, tmp_path):
    root = tmp_path / EVIL_DIR / "store"
    shutil.copytree(os.path.join(REPO_ROOT, "sample_store"), root)
    page.goto(server)
    _idle(page)
    _open(page, str(root))
    for label in ("Overview", "CommitLog", "ConsumeQueue", "Index", "Query", "Browse", "Topics",
                  "Consumer groups", "Health", "Pull", "Produce", "Pipeline"):
        _nav(page, label)
        _no_markup(page, label)
    assert EVIL_DIR in page.locator('[data-testid="stSidebar"]').inner_text()
    page.goto(server)      # a new session: the hosted sample copy, where a form can be sent
    _idle(page)
    _nav(page, "Produce")
    form = page.locator('[data-testid="stMain"] [data-testid="stForm"]').first
    form.get_by_label("Topic", exact=True).fill(EVIL_TOPIC)
    form.get_by_role("button", name="Send").click()
    _idle(page)
    alert = page.locator('[data-testid="stAlert"]').first
    alert.wait_for()
    # shown literally (with an invisible WORD JOINER inside `://`, which breaks GFM's autolink)
    assert EVIL_TOPIC in alert.inner_text().replace("\u2060", "")
    _no_markup(page, "produce warning")
