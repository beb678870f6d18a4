"""[5.x] Batch consume queues on the dashboard's ConsumeQueue page (app/batch_data.py,
pages/consumequeue.py) under AppTest, on stores the engine wrote with a batch topic
(tests/test_batch_view.make_batch_store): the queue table, units with every field beside their
records, a message offset inside a batch, bad input, the check button, and no byte changed."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from app.batch_data import UNIT_COLUMNS, batch_queue_table, batch_units_table  # noqa: E402
from store import MessageStore  # noqa: E402
from tests.app_util import registry_cleanup  # noqa: E402,F401
from tests.fixtures_util import REPO_ROOT, tree_fingerprint  # noqa: E402
from tests.test_batch_view import BASES, COUNTS, make_batch_store, unit_path  # noqa: E402
from tests.test_cli_batch import PROPERTIES  # noqa: E402

MAIN = os.path.join(REPO_ROOT, "app", "main.py")


def _store(tmp_path):
    config = make_batch_store(tmp_path / "s")
    (tmp_path / "store.properties").write_text(PROPERTIES)
    return config, str(tmp_path / "store.properties")


def _page(root: str, properties: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    at.text_input(key="picker_path").input(root)
    at.radio(key="picker_mode").set_value("read-only")
    at.text_input(key="picker_props").input(properties)
    [b for b in at.button if b.label == "Open"][0].click()
    at.run()
    at.switch_page("../pages/consumequeue.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _frame(at: AppTest, first_column: str):
    frames = [f.value for f in at.dataframe if list(f.value.columns)[:1] == [first_column]]
    assert frames, [list(f.value.columns)[:3] for f in at.dataframe]
    return frames[0]


def test_batch_queues_on_the_consumequeue_page(tmp_path):
    config, properties = _store(tmp_path)
    root = config.store_path_root_dir
    before = tree_fingerprint(root)
    at = _page(root, properties)
    assert "Batch consume queues" in [h.value for h in at.header]
    row = [r for r in _frame_with(at, "units") if r["topic"] == "B"][0]
    assert (row["queue_id"], row["files"], row["units"], row["min_offset"], row["max_offset"],
            row["messages"], row["batch_topic"]) == (0, 2, 6, 0, 16, 16, True)
    assert row["first_store_time"].endswith(" UTC")
    units = _frame(at, "queue_offsets")
    assert list(units.columns) == UNIT_COLUMNS
    assert list(units["msg_base_offset"]) == BASES and list(units["batch_size"]) == COUNTS
    assert list(units["queue_offsets"])[:2] == ["0..2", "3..3"]
    assert units["valid"].all() and (units["record"] == "B / 0").all()
    assert all(text.endswith(" UTC") for text in units["store_time"])
    assert list(units["file"]) == ["00000000000000000000"] * 4 + ["00000000000000000184"] * 2
    raw = open(unit_path(config), "rb").read()[:46]
    assert units["unit_hex"][0] == raw.hex(" ").upper()
    # a message offset inside a batch starts at the unit holding it
    at.text_input(key="bcq_offset_B_0").input("10")
    at.run()
    assert list(_frame(at, "queue_offsets")["msg_base_offset"]) == BASES[3:]
    # the check button: nothing wrong
    [b for b in at.button if b.label == "Check this batch queue"][0].click()
    at.run()
    assert any("finds nothing wrong" in s.value for s in at.success)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert tree_fingerprint(root) == before


def _frame_with(at: AppTest, column: str) -> list[dict]:
    for frame in at.dataframe:
        if column in frame.value.columns:
            return frame.value.to_dict("records")
    raise AssertionError(f"no table with a {column!r} column")


@pytest.mark.parametrize("text, expected", [("99", "no unit holds message offset 99"),
                                            ("x", "Message offset")])
def test_bad_offset_is_one_clear_message(tmp_path, text, expected):
    config, properties = _store(tmp_path)
    at = _page(config.store_path_root_dir, properties)
    at.text_input(key="bcq_offset_B_0").input(text)
    at.run()
    assert not at.exception
    shown = [e.value for e in at.error] + [w.value for w in at.warning]
    assert any(expected in message.replace("\\", "") for message in shown), shown


def test_a_wrong_unit_and_the_check(tmp_path):
    config, properties = _store(tmp_path)
    path = unit_path(config)
    with open(path, "r+b") as handle:             # unit 1: batchSize 2, its record's INNER_NUM 1
        handle.seek(46 + 36)
        handle.write((2).to_bytes(2, "big"))
    at = _page(config.store_path_root_dir, properties)
    units = _frame(at, "queue_offsets")
    assert list(units["valid"])[:3] == [True, False, True]
    assert units["problems"][1] == "batchSize 2 but the record's INNER_NUM is 1"
    [b for b in at.button if b.label == "Check this batch queue"][0].click()
    at.run()
    findings = _frame(at, "severity")
    hit = findings[findings["position"] == 46]
    assert list(hit["file"]) == [path] and "INNER_NUM is 1" in hit["message"].iloc[0]


def test_no_batch_section_without_batch_queues(tmp_path):
    config = make_batch_store(tmp_path / "s", counts=[])
    (tmp_path / "store.properties").write_text(PROPERTIES)
    at = _page(config.store_path_root_dir, str(tmp_path / "store.properties"))
    assert "Batch consume queues" not in [h.value for h in at.header]


def test_data_functions(tmp_path):
    config, _properties = _store(tmp_path)
    with MessageStore.open(config, read_only=True, start_services=False) as store:
        [row] = batch_queue_table(store).to_dict("records")
        assert (row["topic"], row["messages"]) == ("B", 16)
        frame, more = batch_units_table(store, "B", 0, 4, 2)
        assert list(frame["msg_base_offset"]) == [4, 9] and more
        frame, more = batch_units_table(store, "B", 0, 15, 500)      # capped at 200, none more
        assert list(frame["msg_base_offset"]) == [15] and not more


def test_topics_page_counts_a_batch_topic_in_messages(tmp_path):
    config, properties = _store(tmp_path)
    at = _page(config.store_path_root_dir, properties)
    at.switch_page("../pages/topics.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    rows = {row["topic"]: row for row in _frame_with(at, "messages")}
    assert (rows["B"]["queues"], rows["B"]["messages"]) == (1, 16)
    assert rows["T"]["messages"] == 1


def test_browse_query_and_reset_reach_a_batch_topic(tmp_path):
    """Browse, Query (time range) and the group reset listed queues through the facade's queues()
    (ordinary consume queues only): a batch topic had "No consume queue". Browsing backwards read a
    record twice when a chunk boundary fell inside its batch."""
    from app import browse, groups_data, query
    config, _properties = _store(tmp_path)
    with MessageStore.open(config, read_only=True, start_services=False) as store:
        forward = browse.page_forward(store, "B", 0, 0, 50)
        assert [m.queue_offset for m in forward.messages] == BASES
        assert (forward.min_offset, forward.max_offset) == (0, 16)
        backward = browse.page_backward(store, "B", 0, 16, 50)
        assert [m.queue_offset for m in backward.messages] == BASES
        # chunk boundaries inside batches: [0, 5) holds the record at 4 (4..8), [5, 16) must not
        assert [r.queue_offset for r in browse._read_range(store, "B", 0, 5, 16)] == BASES[3:]
        steps = groups_data.plan_reset(store, "g", "B", "latest")
        assert [(s.queue_id, s.target) for s in steps] == [(0, 16)]
        found = query.by_time_range(store, "B", 1, 1 << 62).messages
        assert sorted(m.queue_offset for m in found) == BASES


def test_overview_totals_count_batch_queues(tmp_path):
    from app.overview_data import totals
    config, _properties = _store(tmp_path)
    with MessageStore.open(config, read_only=True, start_services=False) as store:
        values = totals(store)
    assert (values["topics"], values["queues"], values["messages"]) == (2, 2, 17)   # B 16 + T 1
