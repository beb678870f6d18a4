"""Figure builders and data shaping of the dashboard, without streamlit."""

from __future__ import annotations

import os
import sys

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from app import figures
from app.bodies import render_body
from app.commitlog_data import SegmentInfo, browse_records, segment_map
from app.hexview import annotate_record, check_record
from app.index_data import entries_per_slot, occupancy_grid
from app.overview_data import rates
from app.paths import InputError, resolve_store_dir
from app.query import export_csv
from app.registry import Sample
from store.codec.message import encode_message

SEGMENTS = [SegmentInfo("00000000000000000000", 0, 1000, 900, 100, 9, "full"),
            SegmentInfo("00000000000000001000", 1000, 1000, 300, 0, 3, "active")]


def test_no_streamlit_in_pure_modules():
    """app/*.py (outside app/ui) never import streamlit: checked in a fresh interpreter."""
    import subprocess
    code = ("import sys; import app.figures, app.commitlog_data, app.queues_data, app.index_data, "
            "app.registry, app.recovery_lab, app.tour, app.query, app.produce, app.hexview, "
            "app.bodies, app.overview_data, app.health_data, app.pull_job, app.pipeline_runner, "
            "app.segment_figures, app.index_figures; "
            "assert 'streamlit' not in sys.modules")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True)


def test_metric_tiles():
    from app.overview_data import metric_tile, scale_bytes
    assert [scale_bytes(n) for n in (377, 9_999, 10_240, 1_046_446, 1_117_008, 5 * 2**30)] == \
        [("B", "377"), ("B", "9,999"), ("KiB", "10"), ("MiB", "0.998"), ("MiB", "1.07"), ("GiB", "5")]
    assert metric_tile("messages", 1234567) == ("messages", "1,234,567")
    assert metric_tile("bytes", 838_126, is_bytes=True) == ("bytes (KiB)", "818")
    assert [figures.nice_step(x) for x in (0.25, 1.2, 7, 0.07)] == [0.5, 2.0, 10.0, 0.1]


def test_segment_fill_percentages():
    fig = figures.segment_fill_figure(SEGMENTS)
    assert list(fig.data[0].y) == [90.0, 30.0] and list(fig.data[2].y) == [0.0, 70.0]


def test_rates_from_samples():
    samples = [Sample(0.0, 1_000, 0, 0, 0), Sample(2.0, 3_000, 4096, 2048, 10)]
    frame = rates(samples)
    assert frame.loc[0, "put_messages_per_s"] == 5 and frame.loc[0, "put_kib_per_s"] == 2
    assert frame.loc[0, "backlog_kib"] == 2
    assert isinstance(figures.rates_figure(frame), go.Figure)
    assert len(figures.rates_figure(rates([])).data) == 0


def test_lag_and_depth_figures():
    lag = pd.DataFrame({"group": ["a", "a", "b"], "topic": ["T", "T", "T"], "queue_id": [0, 1, 0],
                        "lag": [5, 0, 7]})
    assert [t.name for t in figures.lag_figure(lag).data] == ["a", "b"]
    depth = pd.DataFrame({"topic": ["T"], "queue_id": [0], "depth": [3]})
    assert list(figures.queue_depth_figure(depth).data[0].y) == [3]


def test_slot_occupancy_and_chain_lengths():
    entries = np.zeros(6, dtype=[("key_hash", ">i4"), ("phy_offset", ">i8"), ("time_diff_s", ">i4"),
                                 ("prev_index", ">i4")])
    entries["key_hash"] = [0, 1, 65, 2, 129, 3]   # slots (64): 1, 1, 2, 1, 3
    per_slot = entries_per_slot(entries, 64)
    assert per_slot[1] == 3 and per_slot[2] == 1 and per_slot.sum() == 5
    grid, per_cell = occupancy_grid(per_slot)
    assert per_cell == 1 and grid.shape == (8, 8) and grid.sum() == 5
    big, per_cell = occupancy_grid(np.ones(5_000_000, dtype=np.int64))
    assert big.size <= 64 * 64 and per_cell > 1 and big.sum() == 5_000_000
    hist = figures.chain_length_histogram(per_slot)
    assert list(hist.data[0].x) == [1, 3] and list(hist.data[0].y) == [2, 1]
    assert isinstance(figures.slot_heatmap(grid), go.Figure)


def test_other_figures():
    files = pd.DataFrame({"file": ["1.sst", "2.sst"], "kind": ["sst", "sst"], "size_bytes": [10, 5],
                          "level": [0, 0]})
    assert list(figures.rocksdb_files_figure(files).data[0].y) == [15]
    findings = pd.DataFrame({"severity": ["error", "warning", "warning"]})
    fig = figures.findings_figure(findings)
    assert list(fig.data[0].y) == ["error", "warning", "info"] and list(fig.data[0].x) == [1, 2, 0]


def test_findings_frame_puts_the_message_first_and_shortens_paths():
    from app.health_data import findings_frame
    from store.check.findings import Finding
    findings = [Finding("info", "files", "/s/root/abort", None, "abort file present"),
                Finding("error", "index", "/elsewhere/x", 4, "bad")]
    frame = findings_frame(findings, "/s/root")
    assert list(frame.columns)[:5] == ["severity", "component", "message", "path", "position"]
    assert list(frame["severity"]) == ["error", "info"]
    assert list(frame["path"]) == ["/elsewhere/x", "abort"]


def _record(body=b"hello", props=b"TAGS\x01a\x02KEYS\x01k1"):
    return bytes(encode_message(topic="TopicA", queue_id=1, body=body, properties_raw=props,
                                born_timestamp=1, born_host="127.0.0.1:5000", store_timestamp=2,
                                store_host="127.0.0.1:10911", phy_offset=4096))


def test_hex_annotation_covers_the_record_and_checks_crc():
    raw = _record()
    fields = annotate_record(raw)
    assert [f.name for f in fields][:3] == ["TOTALSIZE", "MAGICCODE", "BODYCRC"]
    assert sum(f.size for f in fields) == len(raw)
    assert next(f for f in fields if f.name == "BODY").position == 88   # IPv4: body at 88 (spec §2.1)
    check = check_record(raw, 4096)
    assert check.crc_ok and check.msg_id_phy_offset == 4096 and check.msg_id_host == "127.0.0.1:10911"
    flipped = bytearray(raw)
    flipped[88] ^= 0xFF
    assert not check_record(bytes(flipped), 4096).crc_ok


@pytest.mark.parametrize("body, mode, expected_mode", [
    (b"plain text", "auto", "text"), (b"\x00\x01\x02", "auto", "hex"), (b"abc", "base64", "base64"),
    (b"<script>x</script>", "text", "text"), (b"", "auto", "text")])
def test_render_body(body, mode, expected_mode):
    rendered = render_body(body, mode)
    assert rendered.mode == expected_mode
    if expected_mode == "base64":
        assert rendered.text == "YWJj"


def test_render_body_truncates():
    rendered = render_body(b"x" * 10_000, "text", limit_bytes=100)
    assert rendered.truncated and len(rendered.text) == 100 and "10,000" in rendered.note


def test_export_csv_has_base64_bodies():
    from store.codec.message import decode_message
    csv = export_csv([decode_message(_record(b"\xff\x00"))])
    assert "body_base64" in csv and "/wA=" in csv


def test_store_paths_are_checked(tmp_path):
    with pytest.raises(InputError):
        resolve_store_dir("")
    with pytest.raises(InputError):
        resolve_store_dir(str(tmp_path))                 # exists, not a store
    (tmp_path / "commitlog").mkdir()
    assert resolve_store_dir(str(tmp_path / "commitlog" / "..")) == str(tmp_path)


def test_segment_map_and_browser_on_the_sample_store():
    from app.store_config import resolve_config
    from store.message_store import MessageStore
    root = os.path.join(os.path.dirname(os.path.dirname(__file__)), "sample_store")
    with MessageStore.open(resolve_config(root).config, read_only=True) as store:
        segments = segment_map(store)
        assert len(segments) >= 3
        assert all(s.filler_bytes >= 8 for s in segments[:-1])   # rolled files end with BLANK
        rows, next_offset = browse_records(store, 0, 5)
        assert [r["kind"] for r in rows] == ["RECORD"] * 5 and next_offset > rows[-1]["phy_offset"]


def _rocksdb_store(root, messages: int = 240):
    """A small RocksDB-backed store with `messages` messages over two topics (left open)."""
    from store.api import Message
    from store.message_store import MessageStore
    from tests.engine_util import small_config
    store = MessageStore.open(small_config(root, "defaultRocksDB"))
    for number in range(messages):
        assert store.put_message(Message(f"Rocks{number % 2}", b"r" * 64, queue_id=number % 3)).ok
    store.dispatch_pending()
    return store


def test_rocksdb_stats_and_summary(tmp_path):
    """stats() of the RocksDB consume queue, and the ConsumeQueue page's tables built from it:
    live (memtable only), then read-only after a clean shutdown (flushed to level-0 SST files)."""
    from app.queues_data import facts_rows, rocksdb_summary
    from store.message_store import MessageStore
    from tests.engine_util import small_config
    store = _rocksdb_store(tmp_path)
    try:
        stats = store.consume_queues.stats()
        assert stats["open"] and set(stats["column_families"]) == {"default", "offset"}
        default = stats["column_families"]["default"]
        assert default["rocksdb.estimate-num-keys"] == 240        # one key per unit
        assert default["rocksdb.num-entries-active-mem-table"] == 240
        assert default["rocksdb.compaction-pending"] == 0
        summary = rocksdb_summary(store)
        assert summary.facts["estimated keys"] >= 240
        assert summary.facts["database open"] == "yes"
        assert list(summary.properties.columns) == ["property", "default", "offset"]
        assert "estimate-num-keys" in set(summary.properties["property"])
        assert (summary.files["kind"] == "wal").any()
    finally:
        store.close()
    with MessageStore.open(small_config(tmp_path, "defaultRocksDB"), read_only=True) as store:
        stats = store.consume_queues.stats()
        ssts = stats["sst_files"]
        assert ssts and all(f["level"] == 0 and f["size_bytes"] > 0 for f in ssts)
        assert sum(f["num_entries"] for f in ssts) >= 240
        summary = rocksdb_summary(store)
        assert summary.facts["database open"] == "yes (snapshot)"
        assert summary.facts["SST files (live)"] == len(ssts) == summary.facts["SST files in directory"]
        sst_rows = summary.files[summary.files["kind"] == "sst"]
        assert set(sst_rows["file"]) == {f["name"] for f in ssts}
        assert (sst_rows["level"] == 0).all()
        fig = figures.rocksdb_files_figure(summary.files)
        assert list(fig.data[0].x) == ["L0"] and fig.data[0].y[0] == sum(f["size_bytes"] for f in ssts)
        rows = {row["fact"]: row["value"] for row in facts_rows(summary.facts)}
        assert rows["compaction pending"] == "no" and rows["running compactions"] == "0"


def test_rocksdb_stats_before_the_database_exists(tmp_path):
    """A read-only RocksDB consume queue with no database yet reports itself closed."""
    from app.queues_data import facts_rows
    from store.consumequeue.base import ConsumeQueueSettings
    from store.consumequeue.rocksdb.queue_store import RocksDBConsumeQueueStore
    cq = RocksDBConsumeQueueStore(ConsumeQueueSettings(str(tmp_path), store_type="defaultRocksDB",
                                                       read_only=True, style="5.x"))
    cq.load()
    try:
        assert cq.stats() == {"open": False, "path": str(tmp_path / "consumequeue"),
                              "column_families": {}, "sst_files": []}
    finally:
        cq.close()
    assert facts_rows({"x": None, "y": 1234}) == [{"fact": "x", "value": "-"},
                                                  {"fact": "y", "value": "1,234"}]


def _rolled_segments(count: int, size: int = 4096, last_fill: int = 1000) -> list[SegmentInfo]:
    full = [SegmentInfo(f"{i * size:020d}", i * size, size, size - 96, 96, 10, "full")
            for i in range(count - 1)]
    return full + [SegmentInfo(f"{(count - 1) * size:020d}", (count - 1) * size, size, last_fill, 0, 2,
                               "active")]


@pytest.mark.parametrize("count", [1, 54, 153, 1200])
def test_log_strip_has_a_fixed_height_and_bounded_bars(count):
    from app import segment_figures
    segments = _rolled_segments(count)
    wrote = segments[-1].file_from_offset + 1000
    fig = segment_figures.log_strip_figure(segments, {"wrote": wrote, "flushed": wrote - 10})
    assert fig.layout.height == segment_figures.STRIP_HEIGHT_PX
    records = fig.data[0]
    assert len(records.x) <= segment_figures.MAX_STRIP_BARS
    assert sum(records.x) == sum(s.data_bytes for s in segments)        # nothing lost in the bins
    assert sum(fig.data[2].x) == sum(s.size_bytes - s.data_bytes - s.filler_bytes for s in segments)
    assert f"{count:,} segment file(s)" in fig.layout.title.text
    box = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(box) == 1 and box[0].x0 == segments[-1].file_from_offset      # the active segment


def test_log_strip_shows_the_expired_range():
    from app import segment_figures
    segments = _rolled_segments(5)[2:]
    fig = segment_figures.log_strip_figure(segments, {"wrote": segments[-1].file_from_offset + 10})
    expired = [t for t in fig.data if t.name == "expired (deleted)"]
    assert expired and list(expired[0].x) == [segments[0].file_from_offset]


def test_pointer_zoom_labels_a_lagging_flush_in_bytes():
    """The live-store case: flushed 11,262,116 vs wrote 11,459,070 in a 1 GiB segment is a 0.02%
    gap: the figure zooms to the pointers and labels the 196,954 bytes."""
    from app import segment_figures
    segment = SegmentInfo("00000000000000000000", 0, 1 << 30, 11_459_070, 0, 900, "active")
    pointers = {"wrote": 11_459_070, "committed": 11_459_070, "flushed": 11_262_116,
                "reput": 11_459_070, "confirm": -1, "min_phy_offset": 0}
    fig = segment_figures.pointer_zoom_figure([segment], pointers)
    texts = [a.text for a in fig.layout.annotations]
    assert "<b>196,954 bytes behind wrote</b>" in texts
    assert texts.count("= wrote") == 2                       # committed and reput are level
    x0, x1 = fig.layout.xaxis.range
    assert x0 < 11_262_116 and x1 > 11_459_070 and x1 - x0 < 1_000_000   # zoomed in
    assert "zoomed to the pointers" in fig.layout.title.text
    lanes = [t.y[0] for t in fig.data if t.type == "scatter" and t.mode == "markers"]
    assert lanes == ["wrote<br>11,459,070", "committed<br>11,459,070", "flushed<br>11,262,116",
                     "reput<br>11,459,070"]                  # confirm -1 has no lane
    red = [t for t in fig.data if t.type == "scatter" and t.mode == "lines"]
    assert len(red) == 1 and list(red[0].x) == [11_262_116, 11_459_070]


def test_pointer_zoom_shows_the_whole_segment_when_pointers_are_far_apart():
    from app import segment_figures
    segments = _rolled_segments(3, size=1000, last_fill=600)
    fig = segment_figures.pointer_zoom_figure(segments, {"wrote": 2600, "flushed": 1900})
    x0, x1 = fig.layout.xaxis.range
    assert x0 < 1900 and x1 > 3000                          # flushed still in the previous file
    assert "<b>700 bytes behind wrote</b>" in [a.text for a in fig.layout.annotations]
    assert segment_figures.pointer_zoom_figure([], {}).data == ()


def test_recent_segments_roll():
    from app import segment_figures
    fig = segment_figures.recent_segments_figure(_rolled_segments(25))
    assert list(fig.data[0].x) == [f"#{n}" for n in range(15, 25)]
    assert "Newest 10 of 25" in fig.layout.title.text
    fig = segment_figures.recent_segments_figure(_rolled_segments(26))
    assert list(fig.data[0].x)[-1] == "#25"                   # a new file pushes the window on


def test_recovery_segments_figure_draws_the_cut_on_the_segments():
    from app import segment_figures
    before_files = [SegmentInfo("00000000000000000000", 0, 1000, 1000, 0, 9, "full"),
                    SegmentInfo("00000000000000001000", 1000, 1000, 1000, 0, 9, "full")]
    after_files = [before_files[0], SegmentInfo("00000000000000001000", 1000, 1000, 640, 0, 6, "active")]
    before = {"file end (max wrote)": 2000, "valid end (scan)": 1640, "consume queues end": 1700}
    after = {"file end (max wrote)": 1640, "valid end (scan)": 1640, "consume queues end": 1640,
             "reput": 1640}
    fig = segment_figures.recovery_segments_figure(before_files, after_files, before, after)
    lanes = {t.y[0] for t in fig.data}
    assert lanes == {"before recovery", "after recovery"}
    markers = [(t.y[0], t.name, t.x[0]) for t in fig.data if t.type == "scatter"]
    assert ("before recovery", "consume queues end", 1700) in markers
    assert ("after recovery", "reput", 1640) in markers and len(markers) == 7
    rect = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(rect) == 1 and (rect[0].x0, rect[0].x1) == (1640, 2000)
    assert any("360 bytes" in a.text and "1,640" in a.text for a in fig.layout.annotations)
    clean = segment_figures.recovery_segments_figure(before_files, after_files, before, after,
                                                     cut_bytes=0)
    assert not [s for s in clean.layout.shapes if s.type == "rect"]
    assert any("nothing to cut" in a.text for a in clean.layout.annotations)
    dirty = segment_figures.recovery_segments_figure(before_files, after_files, before, after,
                                                     cut_bytes=72)
    assert [(s.x0, s.x1) for s in dirty.layout.shapes if s.type == "rect"] == [(1640, 1712)]
    after_bars = [(t.name, t.base[0], t.x[0]) for t in fig.data
                  if t.type == "bar" and t.y[0] == "after recovery"]
    assert ("free", 1640, 360) in after_bars               # the cut tail is free space again


def test_chain_walk_figure_draws_slot_hops_arrows_and_verdicts():
    from app.index_data import KeyWalk
    from app.index_figures import chain_walk_figure
    steps = pd.DataFrame([
        {"file": "20260101000002000", "hop": 0, "entry": 9, "slot": 3, "key_hash": 7, "phy_offset": 900,
         "store_time": "t", "prev_entry": 4, "verdict": "hash collision: same 32-bit hash, different key"},
        {"file": "20260101000002000", "hop": 1, "entry": 4, "slot": 3, "key_hash": 7, "phy_offset": 400,
         "store_time": "t", "prev_entry": 0, "verdict": "match"},
        {"file": "20260101000001000", "hop": 0, "entry": 2, "slot": 3, "key_hash": 11,
         "phy_offset": 100, "store_time": "t", "prev_entry": 0, "verdict": "other key in the same slot"}])
    walk = KeyWalk("T#k", 7, 7, 3, steps, pd.DataFrame(), 1,
                   ("20260101000002000", "20260101000001000", "20260101000000000"))
    fig = chain_walk_figure(walk)
    slots = [t for t in fig.data if t.name == "hash slot"]
    assert [t.x[0] for t in slots] == [0, 1, 2] and [t.text[0] for t in slots] == ["", "", "empty"]
    assert fig.layout.yaxis.ticktext[0] == "slot 3"
    hops = {(t.x[0], t.y[0]): (t.name, t.text[0]) for t in fig.data if t.name != "hash slot"}
    assert hops == {(0, 1): ("hash collision (same hash, other key)", "#9 (prevIndex 4)"),
                    (0, 2): ("real match", "#4 (prevIndex 0)"),
                    (1, 1): ("other key in the slot", "#2 (prevIndex 0)")}
    arrows = sorted((a.ax, a.ay, a.x, a.y) for a in fig.layout.annotations if a.showarrow)
    # slot -> #9 -> #4 (prevIndex) in the newest file, then on to the older files' slots
    assert arrows == [(0, 0, 0, 1), (0, 1, 0, 2), (0, 2, 1, 0), (1, 0, 1, 1), (1, 1, 2, 0)]
    assert "1 match(es), 1 collision(s)" in fig.layout.title.text
