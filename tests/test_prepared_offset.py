"""PREPARED TRANSACTION OFFSET on put: a COMMIT record carries its PREPARED record's commit-log offset.

A broker's `EndTransactionProcessor.endMessageTransaction` sets `preparedTransactionOffset` of the
COMMIT / ROLLBACK record to the half message's `commitLogOffset`; `MessageExtEncoder` copies it and the
sysFlag into the record unchanged, and `DefaultAppendMessageCallback.doAppend` gives PREPARED and
ROLLBACK records queue offset 0 without advancing the queue. So the real store's bytes for a PREPARED
then COMMIT pair are its bytes for the same two messages with those fields changed: the test replays
a real fixture's first lines with the second as PREPARED and the third as its COMMIT, and compares
with the real records so edited.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import struct

import pytest

from store import MessageStore, kernel
from store.codec import message as msgcodec
from store.codec import prop_crc
from store.commitlog import put_path
from tests.engine_util import FakeClock, small_config
from tests.fixtures_util import fixture_dirs, fixture_id, load_dump, store_config


def _replayable(fixture: str) -> bool:
    dump = load_dump(fixture)
    return "timerBefore" not in dump and "dledgerAfterStart" not in dump and \
        os.path.isdir(os.path.join(fixture, "store", "commitlog"))


FIXTURES = [f for f in fixture_dirs() if _replayable(f)]


def _lines_and_results(fixture: str, count: int):
    with open(os.path.join(fixture, "write-result.json"), encoding="utf-8") as handle:
        written = json.load(handle)
    written = written["results"] if isinstance(written, dict) else written
    with open(os.path.join(fixture, "messages.jsonl"), encoding="utf-8") as handle:
        lines = [json.loads(text) for text in handle if text.strip()]
    pairs = [(line, want) for line, want in zip(lines, written) if "batch" not in line]
    return pairs[:count]


def _real_record(fixture: str, phy_offset: int, size: int) -> bytearray:
    config = store_config(fixture, os.path.join(fixture, "store"))
    segment = config.mapped_file_size_commit_log
    path = os.path.join(fixture, "store", "commitlog", f"{phy_offset - phy_offset % segment:020d}")
    with open(path, "rb") as handle:
        handle.seek(phy_offset % segment)
        return bytearray(handle.read(size))


def _edit(record: bytearray, *, sys_flag_bits: int, queue_offset: int, prepared: int) -> bytearray:
    """The real record with the fields a transaction changes; resealed if it has a __CRC32#."""
    sys_flag = struct.unpack_from(">i", record, msgcodec.SYSFLAG_POSITION)[0]
    struct.pack_into(">i", record, msgcodec.SYSFLAG_POSITION, sys_flag | sys_flag_bits)
    struct.pack_into(">q", record, msgcodec.QUEUE_OFFSET_POSITION, queue_offset)
    b = msgcodec.born_host_size(sys_flag)
    s = msgcodec.store_host_size(sys_flag)
    struct.pack_into(">q", record, 60 + b + s, prepared)
    if prop_crc.has_reserved_trailer(record, 0, len(record)):
        prop_crc.seal(record)
    return record


@pytest.mark.parametrize("fixture", FIXTURES, ids=fixture_id)
def test_prepared_then_commit_is_what_the_real_store_writes(fixture, tmp_path):
    from tests.test_replay_fixtures import _message
    pairs = _lines_and_results(fixture, 3)
    (line0, want0), (line1, want1), (line2, want2) = pairs
    assert want1["wroteOffset"] > 0
    version = load_dump(fixture)["rocketmqVersion"]
    config = store_config(fixture, str(tmp_path / "store"),
                          store_format="5.x" if "-5." in version else "4.9")
    clock = FakeClock(start_ms=want0["storeTimestamp"])
    with MessageStore.open(config, clock_ms=clock) as store:
        clock.now = want0["storeTimestamp"]
        assert store.put_message(_message(line0)).ok
        clock.now = want1["storeTimestamp"]
        prepared = store.put_message(dataclasses.replace(_message(line1), sys_flag=0x4))
        clock.now = want2["storeTimestamp"]
        commit = store.put_message(dataclasses.replace(
            _message(line2), sys_flag=0x8, prepared_transaction_offset=prepared.wrote_offset))
        assert prepared.ok and commit.ok
        assert prepared.wrote_offset == want1["wroteOffset"] and prepared.queue_offset == 0
        got_prepared = store.inspect.record_bytes(prepared.wrote_offset)
        got_commit = store.inspect.record_bytes(commit.wrote_offset)
        # The COMMIT gets a queue unit; its queue did not advance for the PREPARED record.
        same_queue = (line1["topic"], line1["queueId"]) == (line2["topic"], line2["queueId"])
        commit_queue_offset = want2["logicsOffset"] - (1 if same_queue and want1["logicsOffset"]
                                                        < want2["logicsOffset"] else 0)
        assert commit.queue_offset == commit_queue_offset
        store.dispatch_pending()
        pulled = store.get_message("g", line2["topic"], line2["queueId"], commit_queue_offset, 1)
        assert pulled.messages[0].prepared_transaction_offset == prepared.wrote_offset
        assert pulled.messages[0].transaction_type == msgcodec.TRANSACTION_COMMIT
    real_prepared = _edit(_real_record(fixture, want1["wroteOffset"], want1["wroteBytes"]),
                          sys_flag_bits=0x4, queue_offset=0, prepared=0)
    real_commit = _edit(_real_record(fixture, want2["wroteOffset"], want2["wroteBytes"]),
                        sys_flag_bits=0x8, queue_offset=commit_queue_offset,
                        prepared=want1["wroteOffset"])
    assert got_prepared == bytes(real_prepared)
    assert got_commit == bytes(real_commit)
    # Recovery reads it back into the dispatch request.
    with MessageStore.open(config, read_only=True) as store:
        decoded = msgcodec.decode_message(store.inspect.record_bytes(commit.wrote_offset))
        assert decoded.prepared_transaction_offset == prepared.wrote_offset


def test_rollback_carries_it_too_and_gets_no_queue_unit(tmp_path):
    from store import Message
    with MessageStore.open(small_config(tmp_path / "s", store_format="5.x")) as store:
        prepared = store.put_message(Message("Tx", b"half", sys_flag=0x4))
        rollback = store.put_message(Message("Tx", b"half", sys_flag=0xC,
                                             prepared_transaction_offset=prepared.wrote_offset))
        assert rollback.ok and rollback.queue_offset == 0
        store.dispatch_pending()
        assert store.get_max_offset_in_queue("Tx", 0) == 0
        record = msgcodec.decode_message(store.inspect.record_bytes(rollback.wrote_offset))
        assert record.prepared_transaction_offset == prepared.wrote_offset


@pytest.mark.parametrize("bad", [2**63, -(2**63) - 1, 1.5, "7", True])
def test_a_prepared_offset_that_is_not_a_long_is_refused(tmp_path, bad):
    from store import Message
    with MessageStore.open(small_config(tmp_path / "s")) as store:
        result = store.put_message(Message("Tx", b"x", sys_flag=0x8, prepared_transaction_offset=bad))
    assert result.status.value == "MESSAGE_ILLEGAL" and "prepared_transaction_offset" in result.error


@pytest.mark.skipif(kernel.encode_put is None, reason="the C kernel is not built")
@pytest.mark.parametrize("append_prop_crc", [False, True])
def test_the_compiled_put_encoder_carries_it_or_declines(append_prop_crc):
    from tests.test_kernel_encode_put import _random_message
    rng = random.Random(5)
    settings = put_path.PutSettings("127.0.0.1:10911", 4096, "5.x", True, (1000, 5000), 1 << 20,
                                    append_prop_crc)
    accepted = 0
    for _ in range(2000):
        message = dataclasses.replace(_random_message(rng), prepared_transaction_offset=rng.choice(
            [0, 0, 1234, 2**63 - 1, -1, 2**63, True, 1.5]))
        try:
            record, draft = put_path._encode_for_put(message, settings, 1_700_000_000_123)
        except put_path.PutRefused:
            record = draft = None
        fast = kernel.encode_put(message, settings.kernel_context, 1_700_000_000_123)
        if fast is None:
            continue
        accepted += 1
        assert record is not None and fast[0] == record          # the same bytes, offset included
        assert draft.prepared_transaction_offset == message.prepared_transaction_offset
        layout = msgcodec.decode_message(fast[0])
        assert layout.prepared_transaction_offset == message.prepared_transaction_offset
    if append_prop_crc:
        assert accepted == 0         # the trailer is sealed in the lock: the Python path encodes
    else:
        assert accepted > 100


def test_cli_produce_writes_a_commit_that_names_its_prepared_record(tmp_path, capsys):
    from store.cli import main
    (tmp_path / "store.properties").write_text("mappedFileSizeCommitLog=65536\nstoreFormat=5.x\n")
    root = str(tmp_path / "store")
    assert main(["produce", "Tx", "--store", root, "--transaction", "prepared", "--json"]) == 0
    prepared = json.loads(capsys.readouterr().out)[0]
    assert prepared["queueOffset"] == 0
    assert main(["produce", "Tx", "--store", root, "--transaction", "commit", "--prepared-offset",
                 str(prepared["commitLogOffset"]), "--json"]) == 0
    commit = json.loads(capsys.readouterr().out)[0]
    from store import StoreConfig
    config = StoreConfig.from_properties(tmp_path / "store.properties", store_path_root_dir=root)
    with MessageStore.open(config, read_only=True) as store:
        record = msgcodec.decode_message(store.inspect.record_bytes(commit["commitLogOffset"]))
    assert record.transaction_type == msgcodec.TRANSACTION_COMMIT
    assert record.prepared_transaction_offset == prepared["commitLogOffset"]
    # --prepared-offset without commit/rollback is a usage error and writes nothing more.
    assert main(["produce", "Tx", "--store", root, "--prepared-offset", "5"]) == 2
    assert "--prepared-offset" in capsys.readouterr().err
