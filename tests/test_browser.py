"""The dashboard in a real browser: `streamlit run app/main.py` on a free localhost port, Playwright
driving Debian's chromium headless. Visits every page (every link of the sidebar) on the sample store
and on a store of 1,000+ small segments; measures the Overview's height on that store; walks every
Tour step; draws an index walk; runs the load generator and waits for the Overview's rates chart;
long-polls on Pull and releases the poll with a put from a second tab; runs the recovery lab and a
pipeline job (waiting for its result); produces a message and finds it by key. After every page load
and every click, no Streamlit exception element may be on the page. Saves screenshots (viewport only,
each < 150 KB), taken only once the page is fully drawn (no skeletons, every chart and dataframe
rendered): into a temporary directory, or into docs/screenshots/ with RMQ_UPDATE_SCREENSHOTS=1 (a
test run does not rewrite tracked files)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

from tests.fixtures_util import REPO_ROOT

pytestmark = pytest.mark.browser
CHROMIUM = shutil.which("chromium")       # the same lookup as .ci/run's `command -v chromium`
SHOTS = os.path.join(REPO_ROOT, "docs", "screenshots") \
    if os.environ.get("RMQ_UPDATE_SCREENSHOTS") == "1" else \
    os.path.join(tempfile.gettempdir(), "rmq-inspector-screenshots")
PAGES = [("overview", "Overview"), ("commitlog", "CommitLog"), ("consumequeue", "ConsumeQueue"),
         ("index_files", "Index"), ("produce", "Produce"), ("pull", "Pull"), ("query", "Query"),
         ("recovery_lab", "Recovery lab"), ("health", "Health"), ("tour", "Tour"),
         ("pipeline", "Pipeline")]
MAX_SHOT_BYTES = 150 * 1024
PIPELINE_TIMEOUT_MS = 600_000     # Spark in local mode on two busy cores: minutes, not seconds
BIG_STORE_MESSAGES = 2100         # about 1,050 segments of 4 KiB (two 1.8 KB records each)
BIG_SEGMENT_BYTES = 4096
OVERVIEW_MAX_HEIGHT_PX = 1500
RATES_CHART = '.st-key-overview_rates [data-testid="stPlotlyChart"]'
RATES_PATH_JS = """() => {
    const chart = document.querySelector('%s');
    const line = chart && chart.querySelector('.scatterlayer .trace path.js-line');
    return line ? line.getAttribute('d') : null;
}""" % RATES_CHART
RATES_DRAWN_JS = """() => {
    const chart = document.querySelector('%s');
    const line = chart && chart.querySelector('.scatterlayer .trace path.js-line');
    return line !== null && (line.getAttribute('d') || '').split('L').length >= 4;
}""" % RATES_CHART
# Streamlit scrolls inside its main section, not the body (document.body.scrollHeight is 0 there),
# so the page's height is the largest of the three.
PAGE_HEIGHT_JS = """() => Math.max(document.body.scrollHeight, document.documentElement.scrollHeight,
    (document.querySelector('[data-testid="stMain"]') || {scrollHeight: 0}).scrollHeight)"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def big_store(tmp_path_factory) -> tuple[str, str]:
    """(root, store.properties) of a store with 1,000+ segments of 4 KiB, written by the engine."""
    from store import Message, MessageStore, StoreConfig
    root = str(tmp_path_factory.mktemp("big") / "bigstore")
    settings = {"mappedFileSizeCommitLog": BIG_SEGMENT_BYTES, "mappedFileSizeConsumeQueue": 6000,
                "maxHashSlotNum": 512, "maxIndexNum": 4096}
    config = StoreConfig.from_dict({}, store_path_root_dir=root,
                                   mapped_file_size_commit_log=BIG_SEGMENT_BYTES,
                                   mapped_file_size_consume_queue=6000, max_hash_slot_num=512,
                                   max_index_num=4096)
    with MessageStore.open(config) as store:
        for number in range(BIG_STORE_MESSAGES):
            store.put_message(Message(f"Big{number % 3}", b"x" * 1700, queue_id=number % 4,
                                      tags="t", keys=[f"k{number}"]))
        store.dispatch_pending()
        assert len(store.inspect.segments()) >= 1000
    properties = os.path.join(os.path.dirname(root), "store.properties")
    with open(properties, "w", encoding="utf-8") as handle:
        handle.writelines(f"{name}={value}\n" for name, value in settings.items())
    return root, properties


@pytest.fixture(scope="module")
def server():
    if CHROMIUM is None:
        pytest.skip("chromium is not installed")
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app/main.py", "--server.port", str(port),
         "--server.headless", "true"], cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=1)
            break
        except OSError:
            time.sleep(0.3)
    else:
        process.terminate()
        pytest.fail("streamlit did not start")
    yield url
    process.terminate()
    process.wait(timeout=20)


@pytest.fixture(scope="module")
def page(server):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        yield context.new_page()
        browser.close()


RENDERED_JS = """() => {
    if (document.querySelector('[data-testid="stSkeleton"]')) return false;
    // Only what is shown: a chart or table in a closed tab or expander is drawn when opened.
    const shown = el => el.checkVisibility ? el.checkVisibility() : el.offsetParent !== null;
    const charts = [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].filter(shown);
    const frames = [...document.querySelectorAll('[data-testid="stDataFrame"]')].filter(shown);
    return charts.every(c => c.querySelector('.main-svg')) &&
           frames.every(f => f.querySelector('canvas'));
}"""


def _wait_idle(page, timeout_s: float = 60) -> None:
    """The script run is over and everything is drawn: no skeletons, every plotly chart and every
    dataframe rendered, and still so a second later (elements arrive in several deltas)."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=30_000)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=30_000)
    deadline = time.monotonic() + timeout_s
    stable = 0
    while stable < 4 and time.monotonic() < deadline:   # bounded by the deadline
        stable = stable + 1 if page.evaluate(RENDERED_JS) else 0
        page.wait_for_timeout(300)
    assert stable >= 4, "the page did not finish rendering"


def _no_exception(page, where: str) -> None:
    """No Streamlit exception element (a traceback box) anywhere on the page."""
    exceptions = page.locator('[data-testid="stException"]')
    assert exceptions.count() == 0, (where, exceptions.first.inner_text()[:500])


def _goto(page, server, url_path: str, title: str) -> None:
    page.goto(f"{server}/{'' if url_path == 'overview' else url_path}")
    page.get_by_role("heading", name=title).first.wait_for(timeout=30_000)
    _wait_idle(page)
    _no_exception(page, url_path)


def _click(page, locator, where: str) -> None:
    """Click, wait until the rerun is drawn, and check for exceptions."""
    locator.click()
    _wait_idle(page)
    _no_exception(page, where)


def _expand_nav(page) -> None:
    """Streamlit shows the first ten pages and a "View N more" button: open the rest."""
    more = page.locator('[data-testid="stSidebarNav"]').get_by_text(re.compile(r"^View \d+ more$"))
    if more.count():
        more.first.click()
        page.wait_for_timeout(300)


def _nav_links(page) -> list[tuple[str, str]]:
    """(label, href) of every page in the sidebar navigation (the icon's ligature text dropped)."""
    _expand_nav(page)
    links = page.locator('[data-testid="stSidebarNav"] a')
    return [(links.nth(i).inner_text().strip().splitlines()[-1].strip(),
             links.nth(i).get_attribute("href")) for i in range(links.count())]


def _visit_by_nav(page, label: str) -> None:
    """Go to a page through the sidebar link (the session, and its chosen store, stay)."""
    _expand_nav(page)
    page.locator('[data-testid="stSidebarNav"] a').filter(
        has=page.get_by_text(label, exact=True)).first.click()
    page.locator("h1").filter(has_text=label).first.wait_for(timeout=60_000)
    _wait_idle(page, timeout_s=90)
    _no_exception(page, label)


def _picked(root: str):
    """The sidebar's caption of the current store: its root directory."""
    return re.compile("^" + re.escape(root) + "$")


def _open_store(page, root: str, properties: str) -> None:
    """Open a store read-only through the sidebar picker."""
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text("Open another store").click()
    sidebar.get_by_role("textbox", name="Store directory").fill(root)
    sidebar.get_by_text("read-only", exact=True).click()
    sidebar.get_by_role("textbox", name="store.properties (optional)").fill(properties)
    sidebar.get_by_test_id("stBaseButton-secondaryFormSubmit").click()
    sidebar.get_by_text(_picked(root)).first.wait_for(timeout=60_000)
    _wait_idle(page, timeout_s=90)
    _no_exception(page, "open " + root)


def _shot(page, name: str, element=None) -> None:
    """Save <SHOTS>/<name>.png: the viewport (or one element), so each file stays small."""
    os.makedirs(SHOTS, exist_ok=True)
    path = os.path.join(SHOTS, f"{name}.png")
    (element or page).screenshot(path=path)
    assert os.path.getsize(path) < MAX_SHOT_BYTES, (name, os.path.getsize(path))


def _form(page, index: int = 0):
    return page.locator('[data-testid="stMain"] [data-testid="stForm"]').nth(index)


def _fill_number(form, label: str, value: int) -> None:
    field = form.get_by_label(label, exact=True)
    field.fill(str(value))
    field.press("Tab")   # number inputs commit their value on blur


def test_every_page_renders(server, page):
    """Every sidebar link on the sample store (a page added to the navigation is visited too)."""
    os.makedirs(SHOTS, exist_ok=True)
    for file_name, title in PAGES:
        _goto(page, server, file_name, title)
        if file_name in ("commitlog", "index_files", "consumequeue", "health"):
            _shot(page, file_name)
    known = {title for _, title in PAGES}
    for label, href in _nav_links(page):
        if label not in known:
            page.goto(href)
            page.locator("h1").first.wait_for(timeout=30_000)
            _wait_idle(page)
            _no_exception(page, label)


def test_every_page_on_a_store_of_1000_segments(server, page, big_store):
    """The picker opens a 1,000+ segment store; every page renders on it, and the Overview stays
    under OVERVIEW_MAX_HEIGHT_PX however many segments there are."""
    root, properties = big_store
    page.goto(server)
    page.get_by_role("heading", name="Overview").first.wait_for(timeout=30_000)
    _open_store(page, root, properties)
    page.get_by_text(re.compile(r"Whole commit log: 1,\d{3} segment file")).first.wait_for(
        timeout=60_000)
    height = page.evaluate(PAGE_HEIGHT_JS)
    assert height < OVERVIEW_MAX_HEIGHT_PX, height
    segments = int(page.locator('[data-testid="stMetric"]').filter(has_text="segments")
                   .locator('[data-testid="stMetricValue"]').inner_text().replace(",", ""))
    assert segments >= 1000
    page.set_viewport_size({"width": 1280, "height": OVERVIEW_MAX_HEIGHT_PX})
    try:
        _wait_idle(page)
        _shot(page, "overview_1000_segments", page.locator('[data-testid="stMain"]'))
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})
    for label, _href in _nav_links(page):
        if label == "Overview":
            continue          # measured above; visiting a page writes nothing (a read-only store)
        _visit_by_nav(page, label)
        assert page.locator('[data-testid="stSidebar"]').get_by_text(_picked(root)).count() >= 1, \
            label                                                      # still the big store
        if label == "CommitLog":
            _shot(page, "commitlog_1000_segments")


def test_index_walk_is_drawn(server, page):
    _goto(page, server, "index_files", "Index")
    form = _form(page)
    form.get_by_label("Topic").click()
    page.keyboard.type("Orders")          # the selectbox filters its options as one types
    page.keyboard.press("Enter")
    assert form.get_by_label("Topic").input_value() == "Orders"
    form.get_by_label("Key (KEYS token or UNIQ_KEY)").fill("orders-1")
    _click(page, form.get_by_role("button", name="Walk the index"), "walk")
    walk = page.locator('.st-key-ix_walk [data-testid="stPlotlyChart"]')
    walk.wait_for(timeout=30_000)
    assert "Index walk of 'Orders#orders-1'" in walk.inner_text()
    assert "1 match(es)" in walk.inner_text()
    walk.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    _shot(page, "index_walk", walk)


def test_tour_steps(server, page):
    """Every step, forward; each one drawn with no exception; then Back and Replay."""
    from app.tour import TITLES
    _goto(page, server, "tour", "Tour")
    _shot(page, "tour-1")
    for step in range(2, len(TITLES) + 1):
        _click(page, page.get_by_role("button", name="Next"), f"tour step {step}")
        page.get_by_text(f"Step {step} of {len(TITLES)}").first.wait_for(timeout=30_000)
        page.get_by_role("heading", name=f"{step}. {TITLES[step - 1]}").wait_for(timeout=30_000)
        assert page.locator('[data-testid="stPlotlyChart"]').count() >= 1, step
        _shot(page, f"tour-{step}")
    assert page.get_by_role("button", name="Next").is_disabled()
    _click(page, page.get_by_role("button", name="Replay"), "tour replay")
    page.get_by_role("heading", name=f"{len(TITLES)}. {TITLES[-1]}").wait_for(timeout=30_000)
    _click(page, page.get_by_role("button", name="Back"), "tour back")
    page.get_by_text(f"Step {len(TITLES) - 1} of").first.wait_for(timeout=30_000)


def test_overview_rates_under_load(server, page):
    """Start the load generator, then watch the Overview's rates chart fill (screenshot)."""
    _goto(page, server, "produce", "Produce")
    form = _form(page, 1)
    form.get_by_label("Topics (comma-separated)").fill("LoadA, LoadB")
    _fill_number(form, "Rate (msgs/s)", 40)
    _fill_number(form, "Messages", 2000)
    form.get_by_role("button", name="Start").click()
    page.get_by_text("(running;").first.wait_for(timeout=30_000)
    page.get_by_role("link", name="Overview").click()
    page.get_by_role("heading", name="Overview").first.wait_for(timeout=30_000)
    # The rates chart (the second plotly chart) is drawn once two samples exist; wait until the put
    # rate line has four points so the screenshot shows rates, not an empty frame. (Plotly drops
    # collinear points from a path, so only a line that moves is counted.) Each live refresh
    # remounts the charts for a moment, so the condition is checked again after the shot.
    page.set_viewport_size({"width": 1280, "height": 1200})
    try:
        for _attempt in range(10):   # bounded; a refresh lands inside about one shot in four
            page.wait_for_function(RATES_DRAWN_JS, timeout=90_000)
            _wait_idle(page)
            before = page.evaluate(RATES_PATH_JS)
            png = page.screenshot()
            # The same rates path before and after: no refresh (and no remount) during the shot.
            if before and page.evaluate(RATES_PATH_JS) == before and page.evaluate(RENDERED_JS):
                break
        else:
            pytest.fail("the Overview kept refreshing during every screenshot")
        with open(os.path.join(SHOTS, "overview.png"), "wb") as handle:
            handle.write(png)
        assert len(png) < MAX_SHOT_BYTES
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})
    _goto(page, server, "produce", "Produce")
    # On a busy machine the generator may have sent everything by now: then it must have finished
    # with no failures; while it runs, Stop must stop it.
    page.get_by_text("(running;").or_(page.get_by_text("(finished;")).first.wait_for(timeout=30_000)
    if page.get_by_role("button", name="Stop").count():
        _click(page, page.get_by_role("button", name="Stop"), "stop the load generator")
        page.get_by_text("(stopped;").first.wait_for(timeout=30_000)
    else:
        assert page.get_by_text(re.compile(r"0 failed of [\d,]+ \(finished;")).count() == 1


def test_long_poll_countdown_released_by_a_put(server, page):
    """Pull with a long poll (countdown visible), then produce from a second tab: the poll ends."""
    _goto(page, server, "pull", "Pull")
    form = _form(page)
    form.get_by_label("Topic").fill("BrowserPoll")
    _fill_number(form, "Queue id", 0)
    _fill_number(form, "Queue offset", 0)
    _fill_number(form, "Long poll (ms)", 30_000)
    form.get_by_role("button", name="Pull").click()
    page.get_by_text("Long polling: waiting").first.wait_for(timeout=30_000)
    page.wait_for_timeout(2_000)
    assert page.get_by_text("s left").count() >= 1
    _shot(page, "pull")
    producer = page.context.new_page()
    try:
        _goto(producer, server, "produce", "Produce")
        form = _form(producer)
        form.get_by_label("Topic").fill("BrowserPoll")
        form.get_by_label("Body text").fill("released the long poll")
        form.get_by_role("button", name="Send").click()
        producer.get_by_text("PUT_OK").first.wait_for(timeout=30_000)
    finally:
        producer.close()
    page.get_by_text("Status: FOUND").first.wait_for(timeout=15_000)   # well before the 30 s
    assert page.get_by_text("Long polling: waiting").count() == 0
    _no_exception(page, "long poll released")


def test_recovery_lab(server, page):
    _goto(page, server, "recovery_lab", "Recovery lab")
    _form(page).get_by_role("button", name="Copy, crash, damage, recover").click()
    page.get_by_role("heading", name="What recovery did, step by step").first.wait_for(
        timeout=180_000)      # a child process, two opens and a scan on two shared cores
    _wait_idle(page)
    _no_exception(page, "recovery lab run")
    page.get_by_role("heading", name="Before and after").first.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    _shot(page, "recovery_lab")


@pytest.mark.spark
def test_pipeline_stats_job(server, page):
    """Runs Spark in the server process (a minute or more on two busy cores); also marked spark.
    The test waits for the job's result (up to PIPELINE_TIMEOUT_MS) and fails without one."""
    _goto(page, server, "pipeline", "Pipeline")
    if page.get_by_text("not available in this checkout").count():
        pytest.skip("no pipeline jobs in this checkout")
    page.get_by_role("button", name="Run").click()
    page.get_by_text("stats:").first.wait_for(timeout=30_000)
    # The job must finish: its phase turns to done (or failed, which the assertions below reject).
    page.get_by_text("stats: done").or_(page.get_by_text("stats: failed")).first.wait_for(
        timeout=PIPELINE_TIMEOUT_MS)
    _wait_idle(page)
    _no_exception(page, "pipeline")
    assert page.get_by_text("stats: done").count() == 1, page.get_by_text("stats:").first.inner_text()
    assert page.locator('[data-testid="stAlert"]').count() == 0
    assert page.locator('[data-testid="stMain"] h3').count() >= 1        # a result table's heading
    assert page.locator('[data-testid="stMain"] [data-testid="stDataFrame"]').count() >= 1
    _shot(page, "pipeline")


def test_produce_and_find_by_key(server, page):
    _goto(page, server, "produce", "Produce")
    form = page.locator('[data-testid="stMain"] [data-testid="stForm"]').first
    form.get_by_label("Topic").fill("BrowserTopic")
    form.get_by_label("Keys (space-separated)").fill("browser-key-1")
    form.get_by_label("Body text").fill("hello from chromium")
    form.get_by_role("button", name="Send").click()
    page.get_by_text("PUT_OK").first.wait_for(timeout=30_000)
    _no_exception(page, "produce")
    _shot(page, "produce")

    page.get_by_role("link", name="Query").click()
    page.get_by_role("heading", name="Query").first.wait_for(timeout=30_000)
    _wait_idle(page)
    form = page.locator('[data-testid="stMain"] [data-testid="stForm"]').first
    form.get_by_label("Topic").fill("BrowserTopic")
    form.get_by_label("Key", exact=True).fill("browser-key-1")
    form.get_by_role("button", name="Search").click()
    page.get_by_text("1 message(s)").first.wait_for(timeout=30_000)
    _wait_idle(page)
    _shot(page, "query")
    assert page.get_by_text("hello from chromium").count() >= 1
    _no_exception(page, "query by key")
