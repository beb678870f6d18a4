"""[5.x] The ConsumeQueue page's batch consume queues in a real browser (`streamlit run`, Playwright
driving Debian's chromium; the server and browser of tests/test_browser.py): a store the engine
wrote with a batch topic, its queue table and units drawn, no exception, and the check button.
Screenshot: <tmp>/rmq-inspector-screenshots/consumequeue-batch.png."""

from __future__ import annotations

import pytest

from tests.test_batch_view import make_batch_store
from tests.test_browser import page, server  # noqa: F401 (the one dashboard server and browser)
from tests.test_browser_stores import _idle, _nav, _open, _shot
from tests.test_cli_batch import PROPERTIES

pytestmark = pytest.mark.browser


def test_batch_queues_drawn_on_the_consumequeue_page(server, page, tmp_path):  # noqa: F811
    config = make_batch_store(tmp_path / "s")
    (tmp_path / "store.properties").write_text(PROPERTIES)
    page.goto(server)
    _idle(page)
    _open(page, config.store_path_root_dir, str(tmp_path / "store.properties"))
    _nav(page, "ConsumeQueue")
    header = page.get_by_role("heading", name="Batch consume queues")
    header.wait_for(timeout=30_000)
    header.scroll_into_view_if_needed()
    _idle(page)
    main = page.locator('[data-testid="stMain"]')
    assert main.get_by_text("offsets here count messages", exact=False).count() == 1
    page.get_by_role("button", name="Check this batch queue").click()
    page.get_by_text("The store check finds nothing wrong").first.wait_for(timeout=60_000)
    _idle(page)
    header.scroll_into_view_if_needed()
    _shot(page, "consumequeue-batch")
    assert page.locator('[data-testid="stException"]').count() == 0
