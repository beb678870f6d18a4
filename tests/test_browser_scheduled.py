"""The Scheduled page in a real browser (the tour of tests/test_browser.py, one page more): it renders
with its live levels chart and table, and a message sent with delay level 1 is shown waiting, then
delivered to its topic by the running ScheduleMessageService of the hosted sample copy."""

from __future__ import annotations

import pytest

from tests.test_browser import _goto, _shot, _wait_idle, page, server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser


def test_scheduled_page_shows_a_delayed_message_arrive(server, page):  # noqa: F811
    _goto(page, server, "scheduled", "Scheduled")
    assert page.get_by_text("SCHEDULE_TOPIC_XXXX queues").count() >= 1
    form = page.locator('[data-testid="stMain"] [data-testid="stForm"]').first
    form.get_by_label("Topic").fill("BrowserDelay")
    form.get_by_label("Body text").fill("<i>delayed</i> from chromium")
    form.get_by_label("Delay level").click()
    page.get_by_role("option", name="1 (1s)").click()
    form.get_by_role("button", name="Send delayed").click()
    page.get_by_text("Stored in SCHEDULE_TOPIC_XXXX queue 0").first.wait_for(timeout=30_000)
    page.get_by_text("Delivered to BrowserDelay queue 0").first.wait_for(timeout=60_000)
    page.get_by_text("Live update (every 2 s)").click()     # stop the reruns: an idle page to shoot
    _wait_idle(page)
    _shot(page, "scheduled")
    assert page.locator('[data-testid="stException"]').count() == 0
