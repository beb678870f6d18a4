"""check() on LMQ queues (enableMultiDispatch, rocketmq-all-5.3.3 `multiDispatchLmqQueue`): the units
the records list (INNER_MULTI_DISPATCH / INNER_MULTI_QUEUE_OFFSET) that their LMQ queue lacks are
reported like a record's own ("units a..b of Q are missing although the commit log still holds
them"): a deleted LMQ queue directory, a deleted first file, a queue behind the log.

Each damage is done on a copy of one engine-written store; the undamaged original checks clean.
"""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest

from store import Message, MessageStore
from store.codec.cq_unit import CQ_UNIT_SIZE
from store.tools.check_directory import check_config
from tests.engine_util import small_config

MULTI = "INNER_MULTI_DISPATCH"
A_COUNT = 250                # %LMQ%a: 3 files of 100 units (mapped_file_size_consume_queue 2000)
B_COUNT = A_COUNT // 2       # %LMQ%b: every second message


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    config = small_config(tmp_path_factory.mktemp("lmq") / "s", store_format="5.x",
                          enable_lmq=True, enable_multi_dispatch=True)
    with MessageStore.open(config, start_services=False) as store:
        for i in range(A_COUNT):
            names = "%LMQ%a,%LMQ%b" if i % 2 == 0 else "%LMQ%a"
            assert store.put_message(Message("T", b"m%d" % i, queue_id=i % 2,
                                             properties={MULTI: names})).ok
        store.services.reput.do_reput()
        assert store.get_max_offset_in_queue("%LMQ%a", 0) == A_COUNT
    return config


def _copy(config, tmp_path):
    root = str(tmp_path / "copy")
    shutil.copytree(config.store_path_root_dir, root)
    return dataclasses.replace(config, store_path_root_dir=root)


def _queue_dir(config, name):
    return os.path.join(config.store_path_root_dir, "consumequeue", name, "0")


def _missing(findings):
    return [f for f in findings if "missing although the commit log still holds them" in f.message]


def test_the_original_checks_clean(original):
    assert [f for f in check_config(original) if f.severity in ("error", "warning")] == []


def test_a_deleted_lmq_queue_is_reported(original, tmp_path):
    config = _copy(original, tmp_path)
    shutil.rmtree(os.path.dirname(_queue_dir(config, "%LMQ%b")))
    [finding] = _missing(check_config(config))
    assert finding.severity == "error"
    assert f"units 0..{B_COUNT - 1} of %LMQ%b/0 are missing" in finding.message
    assert "it has no consume queue" in finding.message
    assert "--rebuild-cq %LMQ%b/0" in finding.repair


def test_a_deleted_first_file_of_an_lmq_queue_is_reported(original, tmp_path):
    config = _copy(original, tmp_path)
    os.remove(os.path.join(_queue_dir(config, "%LMQ%a"), f"{0:020d}"))
    [finding] = _missing(check_config(config))
    assert finding.severity == "error"
    assert "units 0..99 of %LMQ%a/0 are missing" in finding.message
    assert "its consume queue starts at unit 100" in finding.message


def test_after_a_crash_it_is_a_warning(original, tmp_path):
    config = _copy(original, tmp_path)
    shutil.rmtree(os.path.dirname(_queue_dir(config, "%LMQ%b")))
    open(os.path.join(config.store_path_root_dir, "abort"), "wb").close()
    [finding] = _missing(check_config(config))
    assert finding.severity == "warning" and "%LMQ%b/0" in finding.message


def test_an_lmq_queue_behind_the_log(original, tmp_path):
    config = _copy(original, tmp_path)
    path = os.path.join(_queue_dir(config, "%LMQ%a"), f"{2 * 2000:020d}")
    with open(path, "r+b") as handle:             # the last 10 units of %LMQ%a zeroed
        handle.seek((A_COUNT - 200 - 10) * CQ_UNIT_SIZE)
        handle.write(bytes(10 * CQ_UNIT_SIZE))
    findings = check_config(config)
    assert any(f"the commit log holds queue offsets up to {A_COUNT - 1} but the consume queue "
               f"ends at {A_COUNT - 10}" in f.message and "%LMQ%a/0" in f.message
               for f in findings), findings


def test_without_multi_dispatch_no_lmq_unit_is_expected(original, tmp_path):
    config = dataclasses.replace(_copy(original, tmp_path), enable_multi_dispatch=False)
    shutil.rmtree(os.path.dirname(_queue_dir(config, "%LMQ%b")))
    assert _missing(check_config(config)) == []


@pytest.mark.parametrize("store_type", ["default", "defaultRocksDB"])
def test_lmq_units_never_dispatched_are_reported_on_both_backends(tmp_path, store_type):
    """Records that list LMQ queues, written while enableMultiDispatch was off (no LMQ unit), then
    checked as a store with it on: every listed queue lacks all of its units."""
    config = small_config(tmp_path / "s", store_type, store_format="5.x", enable_lmq=True,
                          enable_multi_dispatch=False)
    with MessageStore.open(config, start_services=False) as store:
        for i in range(6):
            store.put_message(Message("T", b"m%d" % i, properties={MULTI: "%LMQ%x,%LMQ%y"}))
        store.services.reput.do_reput()
    assert _missing(check_config(config)) == []
    findings = _missing(check_config(dataclasses.replace(config, enable_multi_dispatch=True)))
    assert sorted(f.message.split(" are missing")[0] for f in findings) == [
        "units 0..5 of %LMQ%x/0", "units 0..5 of %LMQ%y/0"]
    assert all(f.severity == "error" and "it has no consume queue" in f.message for f in findings)
