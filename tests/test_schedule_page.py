"""The Scheduled page (pages/scheduled.py) under AppTest, and its helpers (app/scheduled_data.py)
without streamlit: a delayed message produced on the hosted sample copy waits, then appears in its
topic; a read-only fixture shows its levels and changes nothing; bad input is a warning."""

from __future__ import annotations

import datetime as dt
import os
import time

import pytest

from app.paths import InputError
from app.scheduled_data import (build_delayed_message, chain_rows, format_countdown, format_delay,
                                format_time, level_rows, levels_figure, pending_rows, state_counts,
                                wheel_figure, wheel_rows)
from store.inspect.scheduled import DelayLevelView, ScheduledUnit
from tests.fixtures_util import REPO_ROOT, copy_store, fixture_dirs, tree_fingerprint
from tests.app_util import registry_cleanup  # noqa: E402,F401

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

MAIN = os.path.join(REPO_ROOT, "app", "main.py")


def visit_scheduled() -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.switch_page("../pages/scheduled.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Scheduled"]
    return at


def send(at: AppTest, level_label: str, topic="DelayDemo", body="later") -> AppTest:
    at.text_input(key="sc_topic").input(topic)
    at.text_input(key="sc_body").input(body)
    at.selectbox(key="sc_level").set_value(level_label)
    [button] = [b for b in at.button if b.label == "Send delayed"]
    button.click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_delayed_message_waits_then_appears_in_its_topic():
    at = visit_scheduled()
    levels = at.dataframe[0].value
    assert list(levels["level"]) == list(range(1, 19)) and list(levels["delay"])[:3] == \
        ["1s", "5s", "10s"]
    send(at, "18 (2h)", body="waits two hours")
    deadline = time.monotonic() + 30         # until the reput thread has filed it
    while time.monotonic() < deadline:
        at.run()
        if any(getattr(s, "key", None) == "sc_pending_level" for s in at.selectbox):
            break
        time.sleep(0.1)
    assert at.selectbox(key="sc_pending_level").value == "18 (2h)"
    assert list(at.dataframe[1].value["queue offset"]) == [0]
    send(at, "1 (1s)", body="<b>not html</b>")
    assert any("SCHEDULE_TOPIC_XXXX queue 0" in s.value for s in at.success), \
        [s.value for s in at.success]
    watched = at.session_state["sc_watch"]
    assert (watched["topic"], watched["level"]) == ("DelayDemo", 1)
    deadline = time.monotonic() + 60        # waits for the outcome, asserts no duration
    while time.monotonic() < deadline:
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        if any("Delivered to DelayDemo" in s.value for s in at.success):
            break
        time.sleep(0.2)
    assert any("Delivered to DelayDemo queue 0" in s.value for s in at.success), \
        [s.value for s in at.info]
    properties = at.dataframe[-1].value
    assert {"DELAY", "REAL_TOPIC", "REAL_QID"} <= set(properties["property"])


def test_bad_input_is_a_warning_not_a_traceback():
    at = visit_scheduled()
    send(at, "2 (5s)", topic="bad topic!")
    assert at.warning and not at.exception
    assert "sc_watch" not in at.session_state


def test_a_read_only_fixture_shows_its_levels_and_changes_nothing(tmp_path):
    fixture = [d for d in fixture_dirs() if "4.9.7" in d][0]
    root = copy_store(fixture, str(tmp_path))
    before = tree_fingerprint(root)
    at = _open_read_only(visit_scheduled(), root, os.path.join(fixture, "store.properties"))
    assert not at.error, [e.value for e in at.error]
    assert list(at.dataframe[0].value["level"]) == list(range(1, 19))
    assert any("Read-only view" in i.value for i in at.info)
    [button] = [b for b in at.button if b.label == "Send delayed"]
    assert button.disabled
    assert tree_fingerprint(root) == before


# -- app/scheduled_data.py without streamlit -----------------------------------------------------

def test_formatting():
    assert [format_delay(ms) for ms in (1000, 1500, 120000, 7_200_000, 86_400_000, 5)] == \
        ["1s", "1.5s", "2m", "2h", "1d", "5ms"]
    assert format_time(1_700_000_000_123) == "2023-11-14 22:13:20.123 UTC"
    plus_two = dt.timezone(dt.timedelta(hours=2), "CEST")
    assert format_time(1_700_000_000_123, plus_two) == "2023-11-15 00:13:20.123 CEST"
    assert format_time(None) == "-"
    assert format_countdown(None, 0) == "-"
    assert format_countdown(1000, 1000) == "due now"
    assert format_countdown(5_500, 1000) == "in 4.5 s"
    assert format_countdown(1000 + 185_000, 1000) == "in 3 min 5 s"
    assert format_countdown(1000 + 7_500_000, 1000) == "in 2 h 5 min"


def test_rows_and_figure_keep_raw_values():
    views = [DelayLevelView(1, 1000, 0, 0, 5, 3, 2, 1_700_000_001_000, None),
             DelayLevelView(2, 5000, 1, 0, 0, 0, 0, None, "puts are refused")]
    rows = level_rows(views, 1_700_000_000_000)
    assert rows[0]["delivered / max"] == "3 / 5" and rows[0]["countdown"] == "in 1.0 s"
    assert rows[0]["next_due_ms"] == 1_700_000_001_000 and rows[1]["held because"] == \
        "puts are refused"
    assert pending_rows([ScheduledUnit(3, 4096, 200, 1_700_000_002_000)], 1_700_000_000_000) == [
        {"queue offset": 3, "commit log offset": 4096, "bytes": 200,
         "due": "2023-11-14 22:13:22.000 UTC", "countdown": "in 2.0 s"}]
    figure = levels_figure(views)
    assert [list(trace.y) for trace in figure.data] == [[3, 0], [2, 0]]


@pytest.mark.parametrize("kwargs, reason", [
    (dict(topic="bad topic"), "topic"), (dict(level=0), "Delay level"), (dict(level=19), "Delay level"),
    (dict(queue_id=5000), "Queue id"), (dict(body_text="x" * 5000), "Body"),
    (dict(tags="a\x01b"), "Tags"),
])
def test_build_delayed_message_refuses_bad_input(kwargs, reason):
    args = dict(topic="T", queue_id=0, level=3, max_level=18, body_text="b", tags="t", sequence=1)
    args.update(kwargs)
    with pytest.raises(InputError, match=reason):
        build_delayed_message(**args)


def test_build_delayed_message():
    message = build_delayed_message("T", 2, 3, 18, "hi", "", 7)
    assert (message.topic, message.queue_id, message.body, message.tags) == ("T", 2, b"hi", None)
    assert message.properties == {"DELAY": "3", "scheduledDemoSeq": "7"}


def _open_read_only(at: AppTest, root: str, properties: str) -> AppTest:
    at.text_input(key="picker_path").input(root)
    at.radio(key="picker_mode").set_value("read-only")
    at.text_input(key="picker_props").input(properties)
    [opener] = [b for b in at.button if b.label == "Open"]
    opener.click()
    at.run()
    at.switch_page("../pages/scheduled.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_5x_timer_store_shows_its_wheel_and_counts_messages(tmp_path):
    [fixture] = [d for d in fixture_dirs() if d.endswith("timer-clean")]
    root = copy_store(fixture, str(tmp_path))
    before = tree_fingerprint(root)
    at = _open_read_only(visit_scheduled(), root, os.path.join(fixture, "store.properties"))
    assert at.session_state["sc_zone"] == "UTC" and not at.error, [e.value for e in at.error]
    assert any("5.x-format store" in i.value for i in at.info)
    assert any("Timer store state" in c.value for c in at.caption), [c.value for c in at.caption]
    wheel = at.dataframe[-2].value
    assert len(wheel) == 34 and (wheel["messages"] > 0).all()
    assert list(at.dataframe[-1].value.columns)[:2] == ["timer log pos", "prev pos"]
    [count] = [b for b in at.button if b.label.startswith("Count timer messages")]
    count.click()
    at.run()
    assert not at.exception
    counts = dict(zip(at.dataframe[-1].value["state"], at.dataframe[-1].value["messages"]))
    assert sum(counts.values()) == 98 and counts["delivered"] == 73
    assert tree_fingerprint(root) == before


def test_wheel_helpers():
    from store.timer.codec import TimerLogUnit, WheelSlot

    class Inspector:
        def timer_chain(self, slot_time_ms, max_units):
            return [None] * 3 if slot_time_ms == 2000 else []

    slots = [WheelSlot(2, 2, 2000, 0, 52, 0, 0), WheelSlot(1, 1, 1000, 0, 0, 5, 0)]
    rows = wheel_rows(Inspector(), slots, now_ms=1500)
    assert [(r["slot"], r["messages"], r["counted from"], r["countdown"]) for r in rows] == \
        [(1, 5, "num", "due now"), (2, 3, "chain", "in 0.5 s")]
    figure = wheel_figure(rows, 1500, 1200)
    assert list(figure.data[0].y) == [5, 3]
    assert [a.text for a in figure.layout.annotations] == ["now", "timer read time"]
    assert figure.layout.xaxis.title.text == "slot time (UTC)"
    unit = TimerLogUnit(52, 52, 0, 1, 1000, 2000, 4096, 300, 7, 0)
    assert chain_rows([unit])[0]["due"] == "1970-01-01 00:00:03.000 UTC"
    assert state_counts([]) == {}
