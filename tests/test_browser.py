"""The dashboard in a real browser: `streamlit run app/main.py` on a free localhost port, Playwright
driving Debian's chromium headless. Visits every page, produces a message, finds it by key, and
saves small screenshots to docs/screenshots/."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.fixtures_util import REPO_ROOT

pytestmark = pytest.mark.browser
CHROMIUM = "/usr/bin/chromium"
SHOTS = os.path.join(REPO_ROOT, "docs", "screenshots")
PAGES = [("overview", "Overview"), ("commitlog", "CommitLog"), ("consumequeue", "ConsumeQueue"),
         ("index_files", "Index"), ("produce", "Produce"), ("pull", "Pull"), ("query", "Query"),
         ("recovery_lab", "Recovery lab"), ("health", "Health"), ("tour", "Tour"),
         ("pipeline", "Pipeline")]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    if not os.path.exists(CHROMIUM):
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


def _wait_idle(page) -> None:
    page.wait_for_selector('[data-testid="stApp"]', timeout=30_000)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=30_000)
    page.wait_for_timeout(600)


def _goto(page, server, url_path: str, title: str) -> None:
    page.goto(f"{server}/{'' if url_path == 'overview' else url_path}")
    page.get_by_role("heading", name=title).first.wait_for(timeout=30_000)
    _wait_idle(page)
    assert page.locator('[data-testid="stException"]').count() == 0, url_path


def test_every_page_renders(server, page):
    os.makedirs(SHOTS, exist_ok=True)
    for file_name, title in PAGES:
        _goto(page, server, file_name, title)
        if file_name in ("overview", "commitlog", "index_files", "consumequeue"):
            page.screenshot(path=os.path.join(SHOTS, f"{file_name}.png"))


def test_produce_and_find_by_key(server, page):
    _goto(page, server, "produce", "Produce")
    form = page.locator('[data-testid="stMain"] [data-testid="stForm"]').first
    form.get_by_label("Topic").fill("BrowserTopic")
    form.get_by_label("Keys (space-separated)").fill("browser-key-1")
    form.get_by_label("Body text").fill("hello from chromium")
    form.get_by_role("button", name="Send").click()
    page.get_by_text("PUT_OK").first.wait_for(timeout=30_000)
    page.screenshot(path=os.path.join(SHOTS, "produce.png"))

    page.get_by_role("link", name="Query").click()
    page.get_by_role("heading", name="Query").first.wait_for(timeout=30_000)
    _wait_idle(page)
    form = page.locator('[data-testid="stMain"] [data-testid="stForm"]').first
    form.get_by_label("Topic").fill("BrowserTopic")
    form.get_by_label("Key", exact=True).fill("browser-key-1")
    form.get_by_role("button", name="Search").click()
    page.get_by_text("1 message(s)").first.wait_for(timeout=30_000)
    _wait_idle(page)
    page.screenshot(path=os.path.join(SHOTS, "query.png"))
    assert page.get_by_text("hello from chromium").count() >= 1
