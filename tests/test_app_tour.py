"""The Tour (app/tour.py, pages/tour.py): every step runs, shows what it explains, and replays to the
same bytes. The AppTest walks every step through the page's buttons (the step-4 crash on big-endian
index columns was only visible there: Streamlit converts the tables to Arrow)."""

from __future__ import annotations

import os

import pytest

from app.tour import TITLES, TOUR_KEY, TOUR_TOPIC, run_tour
from tests.fixtures_util import REPO_ROOT

MAIN = os.path.join(REPO_ROOT, "app", "main.py")


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("tour") / "store")
    return [run_tour(root, step) for step in range(len(TITLES))]


def test_every_step_has_a_picture_and_its_title(pages):
    assert [p.title for p in pages] == list(TITLES)
    assert all(p.figures for p in pages), [p.step for p in pages if not p.figures]


def test_replay_gives_the_same_bytes(pages, tmp_path):
    for step in (1, 5, 7):
        again = run_tour(str(tmp_path / "again"), step)
        assert again.fingerprint == pages[step].fingerprint and again.facts == pages[step].facts
    assert pages[0].fingerprint != pages[1].fingerprint


def test_the_pointer_moves_and_dispatch_catches_up(pages):
    put = pages[1].facts
    assert put["pointer wrote"] == put["bytes"] > 0 and put["pointer reput"] == 0
    lag_labels = [a.text for a in pages[1].figures[0].layout.annotations]
    assert f"<b>{put['bytes']:,} bytes behind wrote</b>" in lag_labels      # reput (and flushed) lag
    assert pages[3].facts["reput pointer"] == put["bytes"]


def test_the_record_bytes_and_the_unit_pointing_into_the_log(pages):
    grid = pages[2].figures[0].data[0]
    cells = [text for row in grid.text for text in row if text]
    assert len(cells) == pages[1].facts["bytes"]                           # every byte drawn
    assert pages[2].facts["CRC stored"] == pages[2].facts["CRC computed"]
    unit = pages[3].facts
    assert (unit["CQ unit phy_offset"], unit["CQ unit size"]) == (0, pages[1].facts["bytes"])
    arrows = [a for a in pages[3].figures[0].layout.annotations if a.showarrow]
    assert len(arrows) == 1 and arrows[0].x == unit["CQ unit phy_offset"]
    assert pages[4].facts["status"] == "FOUND" and "9.99" in pages[4].facts["body"]


def test_the_slot_chain_has_the_match_and_another_key(pages):
    page = pages[5]
    verdicts = list(page.table["verdict"])
    assert verdicts == ["other key in the same slot", "match"]             # newest first
    assert set(page.table["slot"]) == {page.facts["slot"]}
    assert page.facts["query hits"] == 1 and page.facts["found at"] == 0
    assert f"{TOUR_TOPIC}#{TOUR_KEY}" in page.figures[0].layout.title.text


def test_a_file_rolls_and_recovery_cuts_the_torn_tail(pages):
    roll = pages[6].facts
    assert roll["segments"] == 2 and roll["BLANK filler bytes"] > 0
    assert roll["new file"] == f"{65536:020d}"
    crash = pages[7].facts
    assert crash["recovery mode"] == "abnormal"
    assert crash["cut bytes"] > 0 and crash["valid end"] + crash["cut bytes"] == \
        crash["wrote before the crash"]
    assert crash["queue TourTopic/0 max offset after"] == 1   # the torn record's unit was dropped
    texts = [a.text for a in pages[7].figures[0].layout.annotations]
    assert any(f"{crash['cut bytes']:,} bytes" in t for t in texts)


def test_apptest_walks_every_step_forward_back_and_replays():
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    at.switch_page("../pages/tour.py")
    at.run()

    def check(step: int) -> None:
        assert not at.exception, (step, [e.value for e in at.exception])
        assert [h.value for h in at.header] == [f"{step + 1}. {TITLES[step]}"]
        assert len(at.get("plotly_chart")) >= 1, step
        assert at.dataframe, step

    def click(label: str) -> None:
        [b for b in at.button if b.label == label][0].click()
        at.run()

    check(0)
    for step in range(1, len(TITLES)):
        click("Next")
        check(step)
    assert [b for b in at.button if b.label == "Next"][0].disabled
    fingerprint = at.caption[0].value
    click("Replay")
    check(len(TITLES) - 1)
    assert at.caption[0].value.split("step: ")[1] == fingerprint.split("step: ")[1]
    click("Back")
    check(len(TITLES) - 2)
    click(f"4. {TITLES[3]}")
    check(3)
    index_table = [f.value for f in at.dataframe if "key_hash" in f.value.columns]
    assert index_table and index_table[0]["key_hash"].dtype.isnative


def test_the_scheduled_step_parks_then_delivers(tmp_path):
    """Step 9: the delayed message sits in SCHEDULE_TOPIC_XXXX (its unit's tagsCode = the delivery
    time), nothing is delivered at the put's time, and it reaches its topic when the clock gets there."""
    from app.tour import DELAY_TOPIC
    page = run_tour(str(tmp_path / "tour"), len(TITLES) - 1)
    facts = page.facts
    assert facts["parked in"] == "SCHEDULE_TOPIC_XXXX/1"
    assert facts[f"messages in {DELAY_TOPIC}/0 before"] == 0
    assert facts["delivered at the put's time"] == 0
    assert facts["delivered when the clock got there"] == 1
    assert facts[f"messages in {DELAY_TOPIC}/0 after"] == 1
    assert facts["delivered copy's offset"] > facts["parked record offset"]
    assert (facts["level's delivered offset"], facts["pending"]) == (1, 0)
    assert facts["put time"].endswith("UTC")
    assert len(page.figures) == 2
