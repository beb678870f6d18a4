"""The dashboard on the newer store structures, under AppTest: a DLedger log's entries (CommitLog page:
entry columns, the 48-byte header beside the record, the byte view marking the header apart; the
Overview naming the log; the Recovery lab on a DLedger copy) and the [5.x] property CRC (the
`__CRC32#` panel of a record, the hex view with the CRC field marked for a record failing it, in the
log and where recovery ended the log). Fixtures are chosen by what they hold (a DLedger dump, a
store.properties with enabledAppendPropCRC), so hidden fixtures of the same shape run too."""

from __future__ import annotations

import os
import zlib

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from tests.app_util import MAIN, close_fixture_stores, ok, open_store, registry_cleanup, start, visit  # noqa: E402,F401
from tests.fixtures_util import copy_store, fixture_dirs, fixture_id, load_dump  # noqa: E402

HEADER = 48


def _properties(fixture: str) -> dict[str, str]:
    with open(os.path.join(fixture, "store.properties"), encoding="utf-8") as handle:
        return dict(line.strip().split("=", 1) for line in handle if "=" in line)


DLEDGER = [pytest.param(f, id=fixture_id(f)) for f in fixture_dirs() if "dledgerAfterStart" in load_dump(f)]
PROP_CRC = [pytest.param(f, id=fixture_id(f)) for f in fixture_dirs()
            if _properties(f).get("enabledAppendPropCRC") == "true"]


pytestmark = pytest.mark.usefixtures("close_fixture_stores")


def _open(root: str, properties: str, mode: str = "read-only") -> AppTest:
    at = open_store(start(timeout_s=90), root, mode, properties)
    assert at.session_state["store_key"] == f"{mode}:{os.path.realpath(root)}"
    return at


def _frame_with(at: AppTest, *columns: str):
    frames = [f.value for f in at.dataframe if set(columns) <= set(f.value.columns)]
    assert frames, (columns, [list(f.value.columns) for f in at.dataframe])
    return frames[0]


def _choose_record(at: AppTest, phy_offset: int) -> AppTest:
    at.selectbox(key="cl_record").set_value(phy_offset)
    at.run()
    ok(at, f"record {phy_offset}")
    return at


def _crc_metric(at: AppTest):
    found = [m for m in at.metric if "CRC32" in m.label]
    assert len(found) == 1, [m.label for m in at.metric]
    return found[0]


# -- DLedger -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fixture", DLEDGER)
def test_dledger_record_browser_shows_each_records_entry(fixture, tmp_path):
    root = copy_store(fixture, str(tmp_path))
    at = visit(_open(root, os.path.join(fixture, "store.properties")), "commitlog")
    entries = {e["commitLogOffset"]: e for e in load_dump(fixture)["dledgerAfterStart"]["entries"]}
    rows = _frame_with(at, "phy_offset", "kind", "dledger_index", "term", "entry_pos", "entry_size")
    records = rows[rows["kind"] == "RECORD"]
    assert len(records) == min(25, len(entries))     # the first page
    for _, row in records.iterrows():
        entry = entries[int(row["phy_offset"])]
        assert (row["dledger_index"], row["term"], row["entry_pos"], row["entry_size"]) == \
            (entry["index"], entry["term"], entry["pos"], entry["size"])
    assert any("DLedger log" in i.value for i in at.info)


@pytest.mark.parametrize("fixture", DLEDGER)
def test_dledger_entry_header_beside_the_record_and_marked_in_the_bytes(fixture, tmp_path):
    root = copy_store(fixture, str(tmp_path))
    at = visit(_open(root, os.path.join(fixture, "store.properties")), "commitlog")
    entry = load_dump(fixture)["dledgerAfterStart"]["entries"][3]
    at = _choose_record(at, entry["commitLogOffset"])
    header = _frame_with(at, "dledger_index", "term", "entry_pos", "entry_size", "magic").iloc[0]
    assert (header["dledger_index"], header["term"], header["entry_pos"], header["entry_size"],
            header["magic"], header["chain_crc"], header["body_crc"], header["body_size"]) == \
        (entry["index"], entry["term"], entry["pos"], entry["size"], entry["magic"],
         entry["chainCrc"], entry["bodyCrc"], entry["bodySize"])
    checks = _frame_with(at, "check", "ok", "detail")
    assert list(checks["ok"]) == [True] * 4
    fields = _frame_with(at, "part", "name", "position", "size", "value")
    head = fields[fields["part"] == "DLedger entry header"]
    assert list(head["name"]) == [f"entry.{n}" for n in ("magic", "size", "index", "term", "pos",
                                                          "channel", "chainCrc", "bodyCrc",
                                                          "bodySize")]
    assert int(head["size"].sum()) == HEADER
    record = fields[fields["part"] == "RocketMQ record"]
    assert record.iloc[0]["name"] == "TOTALSIZE" and record.iloc[0]["position"] == HEADER
    assert int(record["size"].sum()) == entry["bodySize"]
    dump = _frame_with(at, "part", "phy_offset", "hex", "fields starting here")
    assert list(dump["part"][:4]) == ["DLedger entry header"] * 3 + ["RocketMQ record"]
    assert list(dump["phy_offset"][:4]) == [entry["pos"] + 16 * i for i in range(4)]
    assert dump.iloc[0]["fields starting here"].startswith("entry.magic@0")
    assert dump.iloc[3]["fields starting here"].startswith("TOTALSIZE@48")
    # The header's bytes as the file holds them: magic 1, then size.
    assert dump.iloc[0]["hex"].startswith("00 00 00 01 " + " ".join(
        f"{b:02X}" for b in entry["size"].to_bytes(4, "big")))


@pytest.mark.parametrize("fixture", DLEDGER)
def test_overview_names_the_dledger_log(fixture, tmp_path):
    root = copy_store(fixture, str(tmp_path))
    at = visit(_open(root, os.path.join(fixture, "store.properties")), "overview")
    at.toggle(key="overview_live").set_value(False)
    at.run()
    settings = _frame_with(at, "setting", "value")
    text = settings[settings["setting"] == "log"].iloc[0]["value"]
    after = load_dump(fixture)["dledgerAfterStart"]
    assert "DLedger log" in text and f"committed index {after['committedIndex']}" in text
    assert f"at pos {after['committedPos']:,}" in text


@pytest.mark.parametrize("fixture", DLEDGER)
def test_recovery_lab_crashes_and_damages_a_dledger_copy(fixture, tmp_path):
    """Regression: the lab's damage step opened commitlog/<file> (FileNotFoundError on DLedger)."""
    root = copy_store(fixture, str(tmp_path / "src"))
    before = os.listdir(os.path.join(root))
    at = visit(_open(root, os.path.join(fixture, "store.properties")), "recovery_lab")
    assert any("DLedger log" in c.value for c in at.caption)
    at.number_input(key="lab_messages").set_value(3)
    at.selectbox(key="lab_damage").set_value("tear the last record")
    at.button[0].click()     # the form's submit button
    at.run()
    ok(at, "lab run")
    assert not at.error, [e.value for e in at.error]
    report = _frame_with(at, "field", "value")
    fields = dict(zip(report["field"], report["value"]))
    assert fields["mode"] == "abnormal"
    assert "dledger-" in fields["start_file"] and "/data/" in fields["start_file"]
    steps = _frame_with(at, "step", "detail")
    assert any("DLedger recovery walks entries" in d for d in steps["detail"])
    lab_root = at.session_state["lab"]["root"]
    assert os.path.realpath(lab_root) != os.path.realpath(root)
    assert not os.path.exists(os.path.join(lab_root, "commitlog"))
    assert os.listdir(root) == before


# -- property CRC --------------------------------------------------------------------------------

def _records(fixture: str) -> list[dict]:
    return sorted(load_dump(fixture)["commitLogRecords"], key=lambda r: r["commitLogOffset"])


def _damage_flag(root: str, record: dict, segment_bytes: int) -> None:
    """Flip FLAG's first byte (record position 16): BODYCRC still matches, the property CRC not."""
    offset = record["commitLogOffset"]
    path = os.path.join(root, "commitlog", f"{offset - offset % segment_bytes:020d}")
    with open(path, "r+b") as handle:
        handle.seek(offset % segment_bytes + 16)
        byte = handle.read(1)
        handle.seek(offset % segment_bytes + 16)
        handle.write(bytes([byte[0] ^ 0x05]))


def _record_bytes(root: str, record: dict, segment_bytes: int) -> bytes:
    offset = record["commitLogOffset"]
    with open(os.path.join(root, "commitlog", f"{offset - offset % segment_bytes:020d}"), "rb") as h:
        h.seek(offset % segment_bytes)
        return h.read(record["size"])


@pytest.mark.parametrize("fixture", PROP_CRC)
def test_an_intact_record_shows_its_property_crc_recomputed_and_matching(fixture, tmp_path):
    root = copy_store(fixture, str(tmp_path))
    at = visit(_open(root, os.path.join(fixture, "store.properties")), "commitlog")
    record = _records(fixture)[2]
    at = _choose_record(at, record["commitLogOffset"])
    assert _crc_metric(at).value == "OK"
    row = _frame_with(at, "__CRC32# stored", "recomputed (bytes before the field)", "matches").iloc[0]
    raw = _record_bytes(root, record, int(_properties(fixture)["mappedFileSizeCommitLog"]))
    crc = zlib.crc32(raw[:-20]) & 0x7FFFFFFF          # the CRC of the record up to its trailer
    assert row["recomputed (bytes before the field)"] == crc
    assert row["read as (digits right to left)"] == crc
    assert row["__CRC32# stored"] == str(crc).rjust(10, "0")[::-1]
    assert raw[-20:] == b"__CRC32#\x01" + row["__CRC32# stored"].encode() + b"\x02"
    assert row["matches"] == "yes"
    assert not [c for c in at.code if "^^" in c.value]       # no hex view for a good record


@pytest.mark.parametrize("fixture", PROP_CRC)
def test_a_record_failing_its_crc_shows_the_hex_with_the_field_marked(fixture, tmp_path):
    """Without forceVerifyPropCRC recovery checks BODYCRC and keeps the record: the browser shows it,
    and its panel says MISMATCH with the engine's hex view."""
    root = copy_store(fixture, str(tmp_path / "store"))
    props = _properties(fixture)
    segment_bytes = int(props["mappedFileSizeCommitLog"])
    record = _records(fixture)[1]
    _damage_flag(root, record, segment_bytes)
    lenient = tmp_path / "store.properties"
    lenient.write_text("".join(f"{k}={v}\n" for k, v in props.items() if k != "forceVerifyPropCRC")
                       + "forceVerifyPropCRC=false\n")
    at = _choose_record(visit(_open(root, str(lenient)), "commitlog"), record["commitLogOffset"])
    assert _crc_metric(at).value == "MISMATCH"
    row = _frame_with(at, "__CRC32# stored", "matches", "verdict").iloc[0]
    assert row["matches"] == "NO" and "does not match" in row["verdict"]
    (code,) = [c.value for c in at.code if "^^" in c.value]
    lines = code.splitlines()
    marks = [i for i, line in enumerate(lines) if set(line.split()) <= {"^^", "--"} and line.strip()]
    assert marks and all(lines[i - 1].startswith(("0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
                                                   "a", "b", "c", "d", "e", "f")) for i in marks)
    assert sum(line.split().count("^^") for line in (lines[i] for i in marks)) == 10
    assert lines[0].startswith(f"{record['commitLogOffset']:016x}")
    assert "CRC field: bytes" in lines[-1]


@pytest.mark.parametrize("fixture", PROP_CRC)
def test_the_record_that_ends_the_log_is_shown_with_its_crc_field(fixture, tmp_path):
    """With forceVerifyPropCRC the failing record is where recovery ends the log: past the browsable
    records, so the page shows it apart."""
    props = _properties(fixture)
    if props.get("forceVerifyPropCRC") != "true":
        pytest.skip("the store does not verify the property CRC on recovery")
    root = copy_store(fixture, str(tmp_path))
    record = _records(fixture)[1]
    _damage_flag(root, record, int(props["mappedFileSizeCommitLog"]))
    at = visit(_open(root, os.path.join(fixture, "store.properties")), "commitlog")
    assert "The record where the log ends" in [h.value for h in at.header]
    assert any("fails its property CRC" in w.value for w in at.warning)
    (code,) = [c.value for c in at.code if "^^" in c.value]
    assert code.splitlines()[0].startswith(f"{record['commitLogOffset']:016x}")
    rows = _frame_with(at, "phy_offset", "kind", "topic")
    assert int(rows["phy_offset"].max()) < record["commitLogOffset"]


def test_recovery_lab_on_the_default_sample_copy_still_runs():
    """The lab now hands the child the viewed store's own config (lab_properties) on a commitlog/
    store too: flipped bytes in the last record are found by the abnormal recovery."""
    at = AppTest.from_file(MAIN, default_timeout=90)
    at.run()
    at = visit(at, "recovery_lab")
    at.number_input(key="lab_messages").set_value(3)
    at.selectbox(key="lab_damage").set_value("flip bytes in the last record")
    at.button[0].click()
    at.run()
    ok(at, "lab run")
    assert not at.error, [e.value for e in at.error]
    fields = dict(zip(*(_frame_with(at, "field", "value")[c] for c in ("field", "value"))))
    assert fields["mode"] == "abnormal" and "commitlog" in fields["start_file"]
    lab = at.session_state["lab"]
    with open(lab["properties"], encoding="utf-8") as handle:
        text = handle.read()
    assert "storePathRootDir" not in text and "mappedFileSizeCommitLog=" in text


@pytest.mark.parametrize("fixture", PROP_CRC)
def test_following_the_tail_stops_where_recovery_stopped(fixture, tmp_path):
    """Regression: a read-only store's refresh (the dashboard's tail-follow) walked on past a record
    failing its property CRC under forceVerifyPropCRC (it checked BODYCRC only), so the pages showed
    the records recovery had cut."""
    props = _properties(fixture)
    if props.get("forceVerifyPropCRC") != "true":
        pytest.skip("the store does not verify the property CRC on recovery")
    from store import MessageStore
    from tests.fixtures_util import store_config
    root = copy_store(fixture, str(tmp_path))
    record = _records(fixture)[1]
    _damage_flag(root, record, int(props["mappedFileSizeCommitLog"]))
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        assert store.pointers()["max_phy_offset"] == record["commitLogOffset"]
        assert store.refresh() == 0
        assert store.pointers()["max_phy_offset"] == record["commitLogOffset"]
