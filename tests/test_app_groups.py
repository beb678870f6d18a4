"""The Consumer groups page under AppTest: lag per queue and per group on every RocketMQ fixture,
against read-dump.json's consumer offsets and queue max offsets; the offset reset (earliest, latest,
time), its preview, its backwards warning and confirmation, and its refusal on a read-only store."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from app import groups_data  # noqa: E402
from store.api import Message  # noqa: E402
from tests.app_util import button, open_store, registry_cleanup, start, visit  # noqa: E402,F401
from tests.fixtures_util import (copy_store, fixture_dirs, fixture_id, load_dump,  # noqa: E402
                                 tree_fingerprint)


def start_page(path: str | None = None, properties: str = "", mode: str = "read-only") -> AppTest:
    at = start()
    if path is not None:
        open_store(at, path, mode, properties)
    visit(at, "consumer_groups")
    assert [t.value for t in at.title] == ["Consumer groups"]
    return at


def frame_with(at: AppTest, column: str):
    return [f.value for f in at.dataframe if column in f.value.columns]


@pytest.mark.parametrize("fixture", fixture_dirs(), ids=fixture_id)
def test_lag_matches_the_real_store(fixture, tmp_path):
    root = copy_store(fixture, tmp_path / "ro")
    before = tree_fingerprint(root)
    at = start_page(root, os.path.join(fixture, "store.properties"))
    assert not at.error, [e.value for e in at.error]
    dump = load_dump(fixture)
    if not dump["consumerOffsets"]:
        assert any("No consumer group" in i.value for i in at.info)
        return
    max_of = {(q["topic"], q["queueId"]): q["maxOffset"] for q in dump["queues"]}
    min_of = {(q["topic"], q["queueId"]): q["minOffset"] for q in dump["queues"]}
    expected: dict[str, dict] = {}
    for key, committed in dump["consumerOffsets"].items():
        topic, group = key.split("@", 1)
        per_queue = expected.setdefault(group, {})
        for queue_id in {q for t, q in max_of if t == topic} | {int(q) for q in committed}:
            offset = committed.get(str(queue_id))
            high = max_of.get((topic, queue_id), 0)
            lag = high - min_of.get((topic, queue_id), 0) if offset is None else max(0, high - offset)
            per_queue[(topic, queue_id)] = (offset, high, lag)
    [groups] = frame_with(at, "total lag")
    totals = {g: sum(v[2] for v in per.values()) for g, per in expected.items()}
    assert dict(zip(groups["group"], groups["total lag"])) == totals
    assert list(groups["total lag"]) == sorted(groups["total lag"], reverse=True)
    for group, per_queue in expected.items():
        at.selectbox(key="cg_group").set_value(group)
        at.run()
        [queues] = frame_with(at, "lag")
        got = {(r["topic"], r["queue"]): (None if r["committed offset"] == "none" else
                                          int(r["committed offset"]), r["max offset"], r["lag"])
               for r in queues.to_dict("records")}
        assert got == per_queue, group
        assert all(lag >= 0 for lag in queues["lag"])
        assert all(note for note, committed in zip(queues["note"], queues["committed offset"])
                   if committed == "none"), "a counted-from-the-start lag says why"
        assert list(queues["lag"]) == sorted(queues["lag"], reverse=True)
    # read-only: the reset is refused
    assert any("resetting offsets is refused" in w.value for w in at.warning)
    button(at, "Preview the reset").click()
    at.run()
    assert button(at, "Reset offsets").disabled
    assert tree_fingerprint(root) == before
    from app.ui.state import get_registry
    get_registry().close(f"read-only:{os.path.realpath(root)}")


def _hosted_with_progress(topic: str):
    at = start_page()
    from app.ui.state import get_registry
    store = get_registry().get(at.session_state["store_key"]).store
    assert store.put_messages([Message(topic, f"m{n}".encode(), queue_id=0) for n in range(30)]).ok
    assert store.put_messages([Message(topic, f"n{n}".encode(), queue_id=1) for n in range(10)]).ok
    store.dispatch_pending()
    store.commit_consumer_offset(topic + "Group", topic, 0, 25)
    store.commit_consumer_offset(topic + "Group", topic, 1, 4)
    at.run()
    at.selectbox(key="cg_group").set_value(topic + "Group")
    at.run()
    at.selectbox(key="cg_topic").set_value(topic)
    return at, store


def test_reset_to_earliest_warns_and_needs_confirmation():
    at, store = _hosted_with_progress("EarliestT")
    at.radio(key="cg_target").set_value("earliest")
    button(at, "Preview the reset").click()
    at.run()
    assert not at.exception
    [plan] = frame_with(at, "after the reset")
    assert list(plan["after the reset"]) == [0, 0] and list(plan["change"]) == ["-25", "-4"]
    assert any("BACKWARDS on 2 queue(s)" in w.value and "29" in w.value for w in at.warning)
    assert button(at, "Reset offsets").disabled
    at.checkbox(key="cg_confirm_2_earliest").check()
    at.run()
    button(at, "Reset offsets").click()
    at.run()
    assert any("Reset 2 queue(s)" in s.value for s in at.success)
    assert [store.query_consumer_offset("EarliestTGroup", "EarliestT", q) for q in (0, 1)] == [0, 0]
    [queues] = frame_with(at, "lag")
    assert dict(zip(queues["queue"], queues["lag"])) == {0: 30, 1: 10}


def test_reset_to_latest_and_to_a_time():
    at, store = _hosted_with_progress("LatestT")
    at.radio(key="cg_target").set_value("latest")
    button(at, "Preview the reset").click()
    at.run()
    assert not at.warning                             # forwards only: no warning
    at.checkbox(key="cg_confirm_2_latest").check()
    at.run()
    button(at, "Reset offsets").click()
    at.run()
    assert [store.query_consumer_offset("LatestTGroup", "LatestT", q) for q in (0, 1)] == [30, 10]
    # to a time before every message: the first offsets
    steps = groups_data.plan_reset(store, "LatestTGroup", "LatestT", "time", 1)
    assert [(s.queue_id, s.current, s.target, s.backwards) for s in steps] == \
        [(0, 30, 0, True), (1, 10, 0, True)]


def test_apply_reset_refuses_read_only():
    class ReadOnly:
        read_only = True
    with pytest.raises(ValueError, match="read-only"):
        groups_data.apply_reset(ReadOnly(), True, "g", "t", [groups_data.ResetStep(0, 5, 0)])
