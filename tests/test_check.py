"""The store cross-check: clean on real and engine-written stores, precise on damaged copies."""

from __future__ import annotations

import os

import pytest

from store import Message, MessageStore
from store.check.findings import Sink
from store.check.run import check_store, has_errors
from store.codec.index_codec import INDEX_HEADER_SIZE
from store.tools.check_directory import check_config
from tests.engine_util import STORE_TYPES, small_config
from tests.fixtures_util import (copy_store, fixture_dirs, fixture_id, store_config,
                                 tree_fingerprint)

FIXTURES = fixture_dirs()
ROLLED = next(f for f in FIXTURES if f.endswith("rolled-64k"))
SEGMENT0 = os.path.join("commitlog", "00000000000000000000")


def serious(findings):
    return [f for f in findings if f.severity in ("error", "warning")]


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_fixture_is_clean_and_untouched(fixture):
    """Checked in place (the fixture is read-only): no errors, no warnings, nothing written."""
    root = os.path.join(fixture, "store")
    before = tree_fingerprint(root)
    findings = check_config(store_config(fixture, root))
    assert serious(findings) == []
    assert tree_fingerprint(root) == before


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_check_store_on_opened_copy(fixture, tmp_path):
    root = copy_store(fixture, tmp_path)
    before = tree_fingerprint(root)
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        findings = store.check()
    assert serious(findings) == []
    assert tree_fingerprint(root) == before


@pytest.mark.parametrize("store_type", STORE_TYPES)
def test_engine_written_store_is_clean(tmp_path, store_type):
    config = small_config(tmp_path / "s", store_type)
    with MessageStore.open(config) as store:
        for i in range(400):      # rolls commit log segments, CQ files and index files
            store.put_message(Message(f"T{i % 3}", b"x" * (i % 200), queue_id=i % 2,
                                      tags=f"tag{i % 5}", keys=[f"k{i}", "shared"],
                                      properties={"UNIQ_KEY": f"U{i:030d}"}))
    findings = check_config(config)
    assert serious(findings) == [], findings[:5]
    assert len(os.listdir(config.commit_log_dir)) > 1


def _damaged(tmp_path, damage):
    root = copy_store(ROLLED, tmp_path)
    damage(root)
    return root, check_config(store_config(ROLLED, root))


def _patch(path, position, data):
    with open(path, "r+b") as handle:
        handle.seek(position)
        handle.write(data)


def _errors(findings, component):
    return [f for f in findings if f.severity == "error" and f.component == component]


def test_flipped_crc_byte(tmp_path):
    root, findings = _damaged(tmp_path, lambda r: _patch(os.path.join(r, SEGMENT0), 11, b"\x55"))
    errors = _errors(findings, "commitlog")
    assert errors[0].path.endswith(SEGMENT0) and errors[0].position == 8
    assert "BODYCRC" in errors[0].message
    assert has_errors(findings)


def test_truncated_segment(tmp_path):
    name = os.path.join("commitlog", "00000000000000065536")
    root, findings = _damaged(tmp_path, lambda r: os.truncate(os.path.join(r, name), 30000))
    errors = _errors(findings, "commitlog")
    assert any(f.path.endswith(name) and "30000 bytes, expected 65536" in f.message for f in errors)
    assert any("torn" in f.message for f in errors)
    # CQ units into the lost part are reported, but bounded per queue.
    missing = [f for f in _errors(findings, "consumequeue") if "TopicA/0" in f.message]
    assert 1 <= len(missing) <= 4
    assert any(f.component == "files" and "cannot open" in f.message for f in findings)


def test_zeroed_cq_unit(tmp_path):
    name = os.path.join("consumequeue", "TopicA", "0", "00000000000000000000")
    root, findings = _damaged(tmp_path, lambda r: _patch(os.path.join(r, name), 100, bytes(20)))
    [error] = _errors(findings, "consumequeue")
    assert error.path.endswith(name) and error.position == 100
    assert "unit 5 is invalid" in error.message


def test_cq_unit_with_wrong_size_and_tags(tmp_path):
    name = os.path.join("consumequeue", "TopicA", "0", "00000000000000000000")
    root, findings = _damaged(tmp_path, lambda r: _patch(os.path.join(r, name), 20 + 8,
                                                         (1).to_bytes(4, "big") + bytes(8)))
    [error] = _errors(findings, "consumequeue")
    assert error.position == 20 and "size 1" in error.message and "tagsCode 0" in error.message


def test_corrupted_index_entry(tmp_path):
    entries = INDEX_HEADER_SIZE + 64 * 4

    def damage(root):
        index_dir = os.path.join(root, "index")
        path = os.path.join(index_dir, sorted(os.listdir(index_dir))[0])
        _patch(path, entries + 3 * 20 + 4, (12345).to_bytes(8, "big"))    # entry 3: phy offset
        _patch(path, entries + 5 * 20, (777).to_bytes(4, "big"))           # entry 5: key hash

    root, findings = _damaged(tmp_path, damage)
    errors = _errors(findings, "index")
    by_position = {f.position: f.message for f in errors}
    assert "not the start of a record" in by_position[entries + 3 * 20]
    assert any(f.position == entries + 5 * 20 and "matches none of the keys" in f.message
               for f in errors)


@pytest.mark.parametrize("size", [4095, 4100, 0])
def test_wrong_checkpoint_size(tmp_path, size):
    def damage(root):
        path = os.path.join(root, "checkpoint")
        data = open(path, "rb").read()
        with open(path, "wb") as handle:
            handle.write(data[:size].ljust(size, b"\0"))

    root, findings = _damaged(tmp_path, damage)
    [error] = _errors(findings, "checkpoint")
    assert f"is {size} bytes, expected 4096" in error.message


def test_checkpoint_in_the_future(tmp_path):
    root, findings = _damaged(tmp_path, lambda r: _patch(os.path.join(r, "checkpoint"), 8,
                                                         (2**62).to_bytes(8, "big")))
    assert any(f.component == "checkpoint" and f.severity == "warning" and f.position == 8
               for f in findings)


def test_broken_config_json(tmp_path):
    def damage(root):
        with open(os.path.join(root, "config", "consumerOffset.json"), "w") as handle:
            handle.write("{not json")

    root, findings = _damaged(tmp_path, damage)
    [error] = _errors(findings, "config")
    assert error.path.endswith("consumerOffset.json") and "does not parse" in error.message


def test_garbage_after_the_end(tmp_path):
    last = os.path.join("commitlog", "00000000000000262144")
    root, findings = _damaged(tmp_path, lambda r: _patch(os.path.join(r, last), 3376, b"\x01" * 40))
    [error] = _errors(findings, "commitlog")
    assert error.position == 3376 and "after the end of the log" in error.message


def test_caps_say_so(tmp_path):
    root = copy_store(ROLLED, tmp_path)
    config = store_config(ROLLED, root)
    findings = check_config(config, max_records=10)
    assert any("max_records=10" in f.message for f in findings)
    for name in sorted(os.listdir(os.path.join(root, "commitlog")))[:3]:
        _patch(os.path.join(root, "commitlog", name), 11, b"\x55")
    capped = check_config(config, max_findings=2)
    assert len(capped) == 3 and "max_findings=2" in capped[-1].message


@pytest.mark.parametrize("garbage", [b"\xff" * 64, b"\x00\x00\x00\x10\xda\xa3\x20\xa7" * 8])
def test_never_raises_on_garbage_segments(tmp_path, garbage):
    def damage(root):
        for name in os.listdir(os.path.join(root, "commitlog")):
            _patch(os.path.join(root, "commitlog", name), 0, garbage)

    root, findings = _damaged(tmp_path, damage)
    assert has_errors(findings)


def test_sink_groups_and_summary():
    sink = Sink(100)
    for i in range(7):
        sink.add_limited("g", "error", "commitlog", None, i, "x")
    sink.summarize()
    assert len(sink.findings) == 4 and "4 more" in sink.findings[-1].message


def test_check_store_read_only_writes_nothing_on_writable_copy(tmp_path):
    fixture = next(f for f in FIXTURES if f.endswith("crash-64k"))
    root = copy_store(fixture, tmp_path)
    before = tree_fingerprint(root)
    with MessageStore.open(store_config(fixture, root), read_only=True) as store:
        findings = check_store(store)
    assert not has_errors(findings)
    assert tree_fingerprint(root) == before


def _index_entries(path, slots, count):
    import numpy as np
    from store.codec.index_codec import ENTRY_DTYPE, HASH_SLOT_SIZE
    with open(path, "rb") as handle:
        data = handle.read()
    position = INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE
    return position, np.frombuffer(data, dtype=ENTRY_DTYPE, count=count, offset=position)


def test_prev_index_linking_into_another_chain(tmp_path):
    """The root cause of corruption seed 1000127: an entry whose prevIndex (0, the end of its
    chain) gained a bit and now points at an older entry of another slot. The walk used to stop
    silently at that already-reached entry. Every entry has exactly one predecessor."""
    config = small_config(tmp_path / "s")
    with MessageStore.open(config) as store:
        for i in range(120):
            store.put_message(Message("T", b"x", queue_id=0, keys=[f"k{i}"]))
    assert not has_errors(check_config(config))
    path = os.path.join(config.index_dir, sorted(os.listdir(config.index_dir))[0])
    slots = config.max_hash_slot_num
    position, entries = _index_entries(path, slots, 100)
    slot_of = entries["key_hash"].astype("int64") % slots
    entry = next(e for e in range(20, 100) if entries["prev_index"][e] == 0)
    target = next(x for x in range(1, entry) if slot_of[x] != slot_of[entry])
    prev_position = position + entry * 20 + 16
    _patch(path, prev_position, int(target).to_bytes(4, "big"))
    errors = _errors(check_config(config), "index")
    assert any(f.position == prev_position or f"links to entry {target}" in f.message
               for f in errors), errors
    assert all(f.path == path and f.on_restart and f.repair for f in errors)


def test_missing_index_is_an_error_with_its_repair(tmp_path):
    import shutil
    root, findings = _damaged(tmp_path, lambda r: shutil.rmtree(os.path.join(r, "index")))
    [error] = _errors(findings, "index")
    assert "no index files" in error.message and "720 records" in error.message
    assert error.repair == f"rmqstore recover --rebuild-index --store {root}"
    assert "IndexService.load" in error.on_restart


def test_missing_queue_after_clean_shutdown_is_an_error(tmp_path):
    import shutil
    queue = os.path.join("consumequeue", "TopicB", "1")
    root, findings = _damaged(tmp_path, lambda r: shutil.rmtree(os.path.join(r, queue)))
    [error] = _errors(findings, "consumequeue")
    assert error.path == os.path.join(root, queue) and "TopicB/1" in error.message
    assert error.repair == f"rmqstore recover --rebuild-cq TopicB/1 --store {root}"


def test_every_finding_says_restart_and_repair(tmp_path):
    root, findings = _damaged(tmp_path, lambda r: _patch(os.path.join(r, SEGMENT0), 11, b"\x55"))
    for finding in findings:
        if finding.severity == "error":
            assert finding.on_restart, finding
    [crc] = [f for f in findings if "BODYCRC" in f.message]
    assert "truncates" in crc.on_restart and crc.repair is None    # no safe automatic repair
    assert set(crc.to_dict()) >= {"on_restart", "repair"}


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_every_finding_of_a_damaged_fixture_has_restart_advice(fixture, tmp_path):
    root = copy_store(fixture, tmp_path)
    from store.dledger.layout import find_data_dir
    dledger = find_data_dir(root)       # a DLedger log: the first record is at entry pos + 48
    if dledger is not None:
        _patch(os.path.join(dledger, sorted(os.listdir(dledger))[0]), 48 + 11, b"\x55")
    else:
        _patch(os.path.join(root, SEGMENT0), 11, b"\x55")
    findings = check_config(store_config(fixture, root))
    assert has_errors(findings)
    assert all(f.on_restart for f in findings), [f for f in findings if not f.on_restart]
