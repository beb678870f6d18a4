"""The cross-check's column-wise paths (store.check.columns, fast_units, fast_index) give exactly the
findings of the record-by-record code: on damaged copies of every base store of test_corruption
(RocketMQ fixtures and engine stores), `check_config` with the fast paths is compared with
`check_config` where they pass nothing (every record, unit and entry goes record by record).
Also: the progress callback, and caps (max_records, max_findings) on a store with more than one
kernel scan batch."""

from __future__ import annotations

import os
import random
import shutil
import time

import numpy as np
import pytest

from store import Message, MessageStore, kernel
from store.check import columns as columns_module
from store.check import commitlog as commitlog_module
from store.check import log_view
from store.check import consumequeue as consumequeue_module
from store.check import fast_index, fast_units, index_runs
from store.check import index as index_module
from store.codec.index_codec import ENTRY_DTYPE, HASH_SLOT_SIZE, INDEX_HEADER_SIZE, decode_header
from store.check.run import check_store
from store.codec.message import PHY_OFFSET_POSITION
from store.config import StoreConfig
from store.tools.check_directory import check_config
from tests.test_corruption import apply_damage, bases, scratch  # noqa: F401

CASES = int(os.environ.get("RMQ_CHECK_FAST_CASES", "120"))


def _slow_paths(monkeypatch) -> None:
    """Make every column-wise verdict 'ask the record-by-record code'."""
    monkeypatch.setattr(columns_module.RecordColumns, "walk_rows",
                        lambda self, buf, base, position, *args: position)

    monkeypatch.setattr(fast_units, "matched_units",
                        lambda scan, key, offsets: np.zeros(len(offsets), dtype=bool))
    monkeypatch.setattr(fast_index, "good_entries",
                        lambda scan, name, first, count: np.zeros(count, dtype=bool))
    monkeypatch.setattr(fast_index, "chains_clean", lambda *args: False)


def _findings(config, **kwargs) -> list[str]:
    return [repr(f) for f in check_config(config, **kwargs)]


@pytest.mark.parametrize("chunk", range(max(1, CASES // 40)))
def test_damaged_copies_same_findings(bases, scratch, chunk, monkeypatch):  # noqa: F811
    workdir = os.path.join(str(scratch), f"fast-{chunk}")
    for seed in range(chunk * 40, chunk * 40 + 40):
        rng = random.Random(10_000 + seed)
        base = rng.choice(bases)
        root = os.path.join(workdir, "store")
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.copytree(base.root, root)
        damage = apply_damage(rng, base, root) if seed % 8 else None   # and some undamaged
        config = base.make_config(root)
        for caps in ({}, {"max_records": 1 + rng.randrange(40)}, {"max_findings": 2}):
            fast = _findings(config, **caps)
            with monkeypatch.context() as patch:
                _slow_paths(patch)
                slow = _findings(config, **caps)
            assert fast == slow, (seed, base.name, damage, caps)
    shutil.rmtree(workdir, ignore_errors=True)


def _many_queue_store(root: str, count: int, segment_bytes: int = 2 << 20) -> StoreConfig:
    config = StoreConfig.from_dict({}, store_path_root_dir=root,
                                   mapped_file_size_commit_log=segment_bytes)
    store = MessageStore.open(config)
    try:
        for n in range(count):
            result = store.put_message(Message(
                f"T{n % 5}", bytes(200 + n % 7), queue_id=n % 3, tags=("a", "b", "c")[n % 3],
                keys=(f"k{n}", f"o{n % 50}"), properties={"UNIQ_KEY": f"U{n:08X}"}))
            assert result.ok, result.error
        started = time.monotonic()
        while store.dispatch_behind_bytes() > 0 and time.monotonic() - started < 600:
            time.sleep(0.001)
    finally:
        store.close()
    return config


def test_several_scan_batches_and_caps(tmp_path, monkeypatch):
    """More records than one kernel scan batch and than one window of the walk, segments of 2 MiB,
    shared keys (o0..o49), a key memory smaller than the keys: the fast and the record-by-record
    paths agree, with and without caps, and on damage."""
    monkeypatch.setattr(columns_module, "SCAN_ROWS", 64)
    monkeypatch.setattr(commitlog_module, "WINDOW_RECORDS", 700)
    root = str(tmp_path / "store")
    config = _many_queue_store(root, 3000)
    cases = [{}, {"max_records": 1000}, {"max_records": 2999}, {"max_findings": 1}]
    for remembered in (index_runs.MAX_KEYS_REMEMBERED, 4000):
        monkeypatch.setattr(index_runs, "MAX_KEYS_REMEMBERED", remembered)
        for caps in cases:
            fast = _findings(config, **caps)
            with monkeypatch.context() as patch:
                _slow_paths(patch)
                assert fast == _findings(config, **caps), (remembered, caps)
    # damage: one CQ unit's size, one index entry's phyOffset, one body byte
    queue_file = os.path.join(root, "consumequeue", "T1", "1")
    name = sorted(os.listdir(queue_file))[0]
    with open(os.path.join(queue_file, name), "r+b") as handle:
        handle.seek(20 * 7 + 8)
        handle.write((99).to_bytes(4, "big"))
    log = os.path.join(root, "commitlog", sorted(os.listdir(os.path.join(root, "commitlog")))[0])
    with open(log, "r+b") as handle:
        handle.seek(5000)
        byte = handle.read(1)
        handle.seek(5000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    fast = _findings(config)
    with monkeypatch.context() as patch:
        _slow_paths(patch)
        slow = _findings(config)
    assert fast == slow
    assert any("unit 7" in f for f in fast), fast


def test_healthy_store_passes_in_bulk(tmp_path, monkeypatch):
    """On a healthy store the walk's matchers (store.check.stream_units, stream_index) pass every
    unit, and every index entry but those whose keyHash an earlier entry holds (the key memory
    compares those), over several windows of the walk."""
    monkeypatch.setattr(commitlog_module, "WINDOW_RECORDS", 500)
    root = str(tmp_path / "store")
    config = _many_queue_store(root, 2000)
    slow = {"units": 0, "entries": []}
    check_unit = consumequeue_module.UnitChecker._check_unit
    check_entry = index_module._check_entry

    def count_unit(self, *args):
        slow["units"] += 1
        return check_unit(self, *args)

    def count_entry(path, entries, header, position, state, entry, *walked):
        slow["entries"].append(entry)
        return check_entry(path, entries, header, position, state, entry, *walked)

    def no_rewalk(self, phy_offset):
        raise AssertionError(f"the walk already saw {phy_offset}")

    monkeypatch.setattr(consumequeue_module.UnitChecker, "_check_unit", count_unit)
    monkeypatch.setattr(index_module, "_check_entry", count_entry)
    monkeypatch.setattr(commitlog_module.LogScan, "is_record_start", no_rewalk)
    assert not [f for f in _findings(config) if f.startswith("Finding(severity='error'")]
    assert slow["units"] == 0
    (name,) = os.listdir(config.index_dir)
    with open(os.path.join(config.index_dir, name), "rb") as handle:
        data = handle.read()
    header = decode_header(data)
    entries = np.frombuffer(data, dtype=ENTRY_DTYPE, count=header.index_count,
                            offset=INDEX_HEADER_SIZE + config.max_hash_slot_num * HASH_SLOT_SIZE)
    seen, repeated = set(), []
    for number, key_hash in enumerate(entries["key_hash"].tolist()[1:], start=1):
        if key_hash in seen:
            repeated.append(number)
        seen.add(key_hash)
    assert header.index_count > 4000 and len(repeated) > 1000
    assert slow["entries"] == repeated


def test_progress_callback(tmp_path):
    root = str(tmp_path / "store")
    config = _many_queue_store(root, 300)
    calls = []
    store = MessageStore.open(config, read_only=True)
    try:
        plain = check_store(store)
        with_progress = check_store(store, progress=lambda *call: calls.append(call))
    finally:
        store.close()
    assert [repr(f) for f in plain] == [repr(f) for f in with_progress]
    parts = [part for part, _, _ in calls]
    assert parts.index("commitlog") < parts.index("consumequeue") < parts.index("index")
    for part in ("commitlog", "consumequeue", "index"):
        mine = [(done, total) for p, done, total in calls if p == part]
        assert mine[-1][0] == mine[-1][1] > 0, (part, mine)
        assert all(0 < done <= total for done, total in mine), (part, mine)
        assert [done for done, _ in mine] == sorted(done for done, _ in mine)


def test_segment_starts_match_a_full_walk(tmp_path, monkeypatch):
    """The walk keeps one record start in CHECKPOINT_EVERY; `is_record_start` and `starts_near`
    (walked again from a checkpoint) answer what the starts of a whole walk answer, damaged
    segment and max_records cap included."""
    from array import array

    from store.check.findings import Sink
    monkeypatch.setattr(commitlog_module, "CHECKPOINT_EVERY", 7)
    monkeypatch.setattr(commitlog_module, "WINDOW_RECORDS", 300)
    root = str(tmp_path / "store")
    config = _many_queue_store(root, 1500)
    log_dir = os.path.join(root, "commitlog")
    with open(os.path.join(log_dir, sorted(os.listdir(log_dir))[0]), "r+b") as handle:
        handle.seek(200_000)
        handle.write(b"\x7f" * 9)               # the walk stops in the middle of the segment
    for cap in (None, 700):
        view = log_view.CommitLogView([log_dir], config.mapped_file_size_commit_log)
        try:
            scan = commitlog_module.walk_commit_log(view, Sink(1000), max_records=cap,
                                                    unclean=False)
            full = array("q")
            commitlog_module._walk_segment(view, view.segments[0], True, Sink(1000),
                                           commitlog_module.LogScan(), full, cap, False,
                                           columns_module.RecordColumns())
            starts = [start for start in full if start < scan.walked_to]
            assert 100 < len(starts) and len(scan.segment_starts.checkpoints) > 10
            probes = starts + [start + 1 for start in starts] + list(range(0, 300_000, 997))
            known = set(starts)
            for phy in probes:
                expected = None if phy >= scan.walked_to else phy in known
                assert scan.is_record_start(phy) == expected, (cap, phy)
                before = [start for start in starts if start <= phy]
                near = scan.starts_near(phy)
                if before and phy < scan.walked_to:
                    assert before[-1] in near and all(s in starts for s in near), (cap, phy)
        finally:
            view.close()


def test_scan_ahead_same_findings_and_no_thread_left(tmp_path, monkeypatch):
    """The walk's batches are scanned ahead on a second thread (store.check.scan_ahead): batches
    inside a segment and the next segments'. Taken or dropped (damage makes the walk leave a
    segment's batches for the record-by-record path), the findings are those of a walk without
    it, and no thread outlives the check."""
    import threading

    from store.check import scan_ahead as scan_ahead_module

    monkeypatch.setattr(columns_module, "SCAN_ROWS", 64)
    root = str(tmp_path / "store")
    config = _many_queue_store(root, 3000, segment_bytes=256 << 10)
    logs = sorted(os.listdir(os.path.join(root, "commitlog")))
    assert len(logs) >= 3
    with open(os.path.join(root, "commitlog", logs[0]), "r+b") as handle:
        handle.seek(PHY_OFFSET_POSITION)  # the first record's PHYSICALOFFSET: the walk leaves the
        handle.write((12345).to_bytes(8, "big"))   # thread's batches of this segment
    with open(os.path.join(root, "commitlog", logs[1]), "r+b") as handle:
        position = 0
        for _ in range(150):              # a body byte of record 150: BODYCRC stops a batch
            handle.seek(position)
            position += int.from_bytes(handle.read(4), "big")
        handle.seek(position + 88 + 5)    # 4.9.7 v1, IPv4: the body starts at byte 88
        byte = handle.read(1)
        handle.seek(position + 88 + 5)
        handle.write(bytes([byte[0] ^ 0xFF]))
    counts = {"scanned": 0, "taken": 0}
    scan_columns, take = columns_module._scan_columns, scan_ahead_module.ScanAhead.take

    def counted_scan_columns(*args):
        counts["scanned"] += 1
        return scan_columns(*args)

    def counted_take(self, *args):
        answer = take(self, *args)
        counts["taken"] += answer is not None
        return answer

    monkeypatch.setattr(columns_module, "_scan_columns", counted_scan_columns)
    monkeypatch.setattr(scan_ahead_module.ScanAhead, "take", counted_take)
    for caps in ({}, {"max_records": 1500}, {"max_findings": 1}):
        with_ahead = _findings(config, **caps)
        assert not [t for t in threading.enumerate() if t.name.startswith("rmq-check-scan")]
        with monkeypatch.context() as patch:
            patch.setattr(columns_module.RecordColumns, "scan_ahead", lambda self, plan: None)
            assert with_ahead == _findings(config, **caps), caps
        if not caps:
            assert any("BODYCRC" in f for f in with_ahead), with_ahead
            assert any("PHYSICALOFFSET field says 12345" in f for f in with_ahead), with_ahead
    if kernel.COMPILED:                # the twins scan on the walk's own thread
        assert counts["taken"] > 10 and counts["scanned"] > counts["taken"], counts


def test_key_memory_known_is_exact():
    """`_KeyMemory.known` (a bit filter on the low 24 bits, then a search of the remembered
    hashes) answers exactly what a set answers, for hashes that share the filter's bits too."""
    rng = np.random.default_rng(7)
    memory = index_module._KeyMemory(view=None)
    remembered: set[int] = set()
    for _ in range(30):
        new = rng.integers(0, 1 << 31, 200)
        new[:50] = (new[:50] & ~((1 << 24) - 1)) | 12345      # one filter bit, many hashes
        memory.remember(new, new)
        memory[int(rng.integers(0, 1 << 31))] = "text"
        remembered.update(memory.pending)
        asked = np.concatenate([rng.integers(0, 1 << 31, 500), rng.choice(new, 100),
                                (rng.integers(0, 1 << 7, 100) << 24) | 12345])
        expected = np.array([int(h) in remembered for h in asked])
        assert (memory.known(asked) == expected).all()
    assert len(memory) == len(remembered)


def _chains_clean_by_definition(slot_table, entries, slots: int, count: int) -> bool:
    """chains_clean's docstring, entry by entry."""
    links = [0] * count
    for slot, head in enumerate(slot_table.tolist()):
        if 0 < head < count:
            if int(entries["key_hash"][head]) % slots != slot:
                return False
            links[head] += 1
    for number in range(1, count):
        key_hash, prev = int(entries["key_hash"][number]), int(entries["prev_index"][number])
        if prev < 0 or prev >= number or key_hash < 0:
            return False
        if prev > 0:
            if int(entries["key_hash"][prev]) % slots != key_hash % slots:
                return False
            links[prev] += 1
    return all(n == 1 for n in links[1:])


def test_chains_clean_matches_its_definition(monkeypatch):
    """The column-wise chain verdict (each entry's slot kept in an array, the entries read once, a
    chunk at a time) against its definition, on healthy tables and damaged ones."""
    monkeypatch.setattr(fast_index, "CHAIN_CHUNK", 7)
    rng = random.Random(5)
    verdicts = set()
    for case in range(300):
        slots, count = rng.randrange(1, 12), rng.randrange(1, 40)
        table = np.zeros(slots, dtype=">i4")
        entries = np.zeros(count, dtype=ENTRY_DTYPE)
        for number in range(1, count):          # a healthy index: each entry heads its slot
            key_hash = rng.randrange(1 << 31)
            entries[number]["key_hash"] = key_hash
            entries[number]["prev_index"] = table[key_hash % slots]
            table[key_hash % slots] = number
        for _ in range(rng.choice((0, 0, 1, 2))):   # damage
            field = rng.choice(("key_hash", "prev_index", "slot"))
            if field == "slot":
                table[rng.randrange(slots)] = rng.randrange(-2, count + 2)
            elif count > 1:
                entries[rng.randrange(1, count)][field] = rng.randrange(-3, max(count, 3) * 3)
        released = []
        got = fast_index.chains_clean(table, entries, slots, count, lambda: released.append(1))
        assert got == _chains_clean_by_definition(table, entries, slots, count), case
        verdicts.add(got)
    assert verdicts == {True, False}


def test_hash_collision_reported_alike(tmp_path, monkeypatch):
    """Two keys whose `topic#key` share a keyHash ("Aa" and "BB": Java's String.hashCode): one
    info finding naming both, from the column-wise and the record-by-record paths alike."""
    root = str(tmp_path / "store")
    config = StoreConfig.from_dict({}, store_path_root_dir=root)
    store = MessageStore.open(config)
    try:
        for n, key in enumerate(("Aa", "x1", "BB", "x2", "Aa")):
            assert store.put_message(Message("T", bytes(100 + n), keys=(key,))).ok
        started = time.monotonic()
        while store.dispatch_behind_bytes() > 0 and time.monotonic() - started < 60:
            time.sleep(0.001)
    finally:
        store.close()
    fast = _findings(config)
    with monkeypatch.context() as patch:
        _slow_paths(patch)
        assert fast == _findings(config)
    collisions = [f for f in fast if "hash collision" in f]
    assert len(collisions) == 1 and "'T#Aa' and 'T#BB'" in collisions[0], fast


def test_stream_index_search_is_searchsorted():
    """The sliced binary search of the walk's index matcher answers as np.searchsorted, for sorted
    and unsorted needles, below, inside and above the haystack, with repeats."""
    from store.check.stream_index import _search
    rng = np.random.default_rng(1)
    for case in range(2000):
        haystack = np.sort(rng.integers(-50, 50, int(rng.integers(0, 40))))
        needles = rng.integers(-60, 60, int(rng.integers(0, 30)))
        if case % 2:
            needles = np.sort(needles)
        assert (_search(haystack, needles) == np.searchsorted(haystack, needles)).all()


def test_chain_verdicts_on_a_thread(tmp_path):
    """index_chains.ChainVerdicts answers as chains_clean on the file (clean, then with a slot
    damaged), None for another indexCount or an unknown file, and leaves no thread behind."""
    import threading
    from store.check.index_chains import ChainVerdicts
    root = str(tmp_path / "store")
    config = _many_queue_store(root, 300)
    (name,) = os.listdir(config.index_dir)
    path = os.path.join(config.index_dir, name)
    slots, maximum = config.max_hash_slot_num, config.max_index_num
    for damaged in (False, True):
        with open(path, "rb") as handle:
            data = handle.read()
        header = decode_header(data)
        table = np.frombuffer(data, dtype=">i4", count=slots, offset=INDEX_HEADER_SIZE)
        entries = np.frombuffer(data, dtype=ENTRY_DTYPE, count=header.index_count,
                                offset=INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE)
        expected = fast_index.chains_clean(table, entries, slots, header.index_count)
        assert expected is not damaged
        chains = ChainVerdicts(config.index_dir, slots, maximum)
        assert chains.verdict(path, header.index_count) is expected
        assert chains.verdict(path, header.index_count + 1) is None
        assert chains.verdict(path + "0", header.index_count) is None
        chains.close()
        assert not [t for t in threading.enumerate() if t.name == "check-index-chains"]
        slot = int(np.flatnonzero(table > 0)[0])
        with open(path, "r+b") as handle:          # a slot pointing at the wrong entry
            handle.seek(INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE)
            handle.write((int(table[slot]) - 1).to_bytes(4, "big"))
