"""`prefault` (store/kernel/c/prefault.c) against its twin (store/kernel/prefault.py), what it does
to a map (the pages resident, the bytes unchanged), and the service that runs it ahead of the commit
log's writer (store/services/prefault.py)."""

from __future__ import annotations

import hashlib
import mmap
import random
import sys
import types

import pytest

from store import Message, MessageStore
from store import kernel
from store.kernel import prefault as prefault_module
from store.kernel.prefault import prefault_py, sync_range_py
from store.services.prefault import PrefaultService, prefault_supported
from tests.engine_util import small_config
from tests.kernel_fuzz import prefault_target
from tests.kernel_fuzz.edges import Disagreement, outcome

needs_native = pytest.mark.skipif(not kernel.COMPILED, reason="the C kernel is not built")
needs_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise is Linux's")
FUNCTIONS = [pytest.param(prefault_py, id="twin"),
             pytest.param(getattr(kernel._native, "prefault", None), id="native",
                          marks=needs_native)]
SYNC_FUNCTIONS = [pytest.param(sync_range_py, id="twin"),
                  pytest.param(getattr(kernel._native, "sync_range", None), id="native",
                               marks=needs_native)]
PAGE = mmap.PAGESIZE


def _resident_kib(path: str) -> int:
    """Rss (KiB) of this process's maps of `path`, from /proc/self/smaps."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                inside = line.rstrip("\n").endswith(path)
            elif inside and head and head[0] == "Rss:":
                total += int(head[1])
    return total


@needs_native
@needs_linux
def test_native_agrees_with_twin_on_random_and_edge_arguments():
    fuzzer = types.SimpleNamespace(rng=random.Random(17), native=kernel._native,
                                   executions={"prefault": 0}, compared={"prefault": 0},
                                   last_input=None)
    for _ in range(600):
        prefault_target.prefault(fuzzer, outcome, Disagreement)
    assert fuzzer.compared["prefault"] == 600


@needs_linux
@pytest.mark.parametrize("prefault", FUNCTIONS)
def test_answers_and_refusals(prefault, tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(b"")
    with open(path, "r+b") as handle:
        handle.truncate(16 * PAGE)
        mapped = mmap.mmap(handle.fileno(), 16 * PAGE)
        read_only = mmap.mmap(handle.fileno(), 16 * PAGE, access=mmap.ACCESS_READ)
    assert prefault(mapped, 0, 16 * PAGE) == 16 * PAGE
    assert prefault(mapped, 1, 2 * PAGE) == PAGE            # whole pages inside the range only
    assert prefault(mapped, PAGE + 1, PAGE) == 0
    assert prefault(mapped, 15 * PAGE, 10**18) == PAGE      # clipped to the map
    assert prefault(mapped, 20 * PAGE, 5) == 0
    assert prefault(mapped, 0, 0) == 0
    for args, error, message in [
            ((mapped, -1, 1), ValueError, "prefault: start and length must be >= 0"),
            ((mapped, 0, -PAGE), ValueError, "prefault: start and length must be >= 0"),
            ((mapped, 2**63, 1), OverflowError, "cannot fit 'int' into an index-sized integer"),
            ((mapped, 0.0, 1), TypeError, "'float' object cannot be interpreted as an integer"),
            ((bytearray(PAGE), 0, 1), TypeError, "prefault: the map must be an mmap.mmap"),
            ((mapped, 0), TypeError, "prefault(map, start, length)"),
            ((read_only, 0, PAGE), BufferError, "Object is not writable.")]:
        with pytest.raises(error) as raised:
            prefault(*args)
        assert str(raised.value) == message
    read_only.close()
    mapped.close()
    with pytest.raises(ValueError, match="mmap closed or invalid"):
        prefault(mapped, 0, PAGE)


@needs_linux
@pytest.mark.parametrize("prefault", FUNCTIONS)
def test_a_subclass_of_mmap_is_a_map(prefault, tmp_path):
    """A map of a subclass of mmap.mmap (tests/power_loss_model.py records flushes with one) is
    advised like any other."""
    class Recording(mmap.mmap):
        pass

    path = tmp_path / "segment"
    path.write_bytes(bytes(4 * PAGE))
    with open(path, "r+b") as handle:
        mapped = Recording(handle.fileno(), 4 * PAGE)
    try:
        assert prefault(mapped, 0, 4 * PAGE) == 4 * PAGE
    finally:
        mapped.close()


@needs_linux
@pytest.mark.parametrize("prefault", FUNCTIONS)
def test_populates_pages_of_a_sparse_file_without_changing_bytes(prefault, tmp_path):
    path = tmp_path / "00000000000000000000"
    with open(path, "wb") as handle:
        handle.truncate(256 * PAGE)
    with open(path, "r+b") as handle:
        mapped = mmap.mmap(handle.fileno(), 256 * PAGE)
    try:
        mapped[:5] = b"hello"
        before = _resident_kib(str(path))
        assert prefault(mapped, 64 * PAGE, 128 * PAGE) == 128 * PAGE
        assert _resident_kib(str(path)) - before >= 128 * PAGE // 1024
        assert mapped[:5] == b"hello" and mapped[5:] == bytes(256 * PAGE - 5)
    finally:
        mapped.close()
    assert path.read_bytes() == b"hello" + bytes(256 * PAGE - 5)


def _store(tmp_path, **overrides):
    return MessageStore.open(small_config(tmp_path, **overrides), start_services=False)


@needs_native
@needs_linux
def test_service_keeps_the_lead_ahead_of_the_writer(tmp_path):
    store = _store(tmp_path, mapped_file_size_commit_log=1 << 20)
    try:
        service = store.services.prefault
        assert isinstance(service, PrefaultService) and prefault_supported()
        calls = []
        service._advise = lambda map_, start, length: calls.append((start, length)) or length
        service.lead_bytes, service.min_step_bytes = 256 << 10, 64 << 10
        assert service.advance() == 0                       # no segment yet
        store.put_message(Message("T", b"x" * 1000, 0))
        segment = store.commit_log.mapped_files.files[-1]
        wrote = segment.wrote_position
        assert service.advance() == 256 << 10 and calls == [(wrote, 256 << 10)]
        assert service.advance() == 0                       # nothing new to populate
        while True:
            store.put_message(Message("T", b"x" * 1000, 0))
            position = segment.wrote_position
            if position - wrote >= 64 << 10:
                break
            assert service.advance() == 0                   # less than a step
        assert service.advance() == position - wrote
        assert calls[-1] == (wrote + (256 << 10), position - wrote)
        service.lead_bytes = 4 << 20                        # up to the segment's end, even if short
        assert service.advance() == (1 << 20) - (position + (256 << 10))
        assert calls[-1][0] + calls[-1][1] == 1 << 20
    finally:
        store.close()


@needs_native
@needs_linux
def test_service_really_populates_and_puts_read_back(tmp_path):
    store = _store(tmp_path, mapped_file_size_commit_log=4 << 20)
    try:
        sent = [Message("T", bytes([n]) * 900, n % 4, keys=[f"k{n}"]) for n in range(64)]
        store.put_message(sent[0])
        segment = store.commit_log.mapped_files.files[-1]
        before = _resident_kib(segment.path)
        digest = hashlib.sha256(segment.buffer[:]).hexdigest()
        first_free_page = (segment.wrote_position // PAGE + 1) * PAGE
        assert store.services.prefault.advance() == (4 << 20) - first_free_page
        assert _resident_kib(segment.path) - before >= 3 << 10
        assert hashlib.sha256(segment.buffer[:]).hexdigest() == digest
        for message in sent[1:]:
            assert store.put_message(message).ok
        store.dispatch_pending()
        for n, message in enumerate(sent):
            got = store.get_message("G", "T", n % 4, n // 4, 1)
            assert got.messages[0].body == message.body
    finally:
        store.close()


def _refuse(map_, start, length):
    raise OSError(22, "Invalid argument")


def _closed(map_, start, length):
    raise ValueError("mmap closed or invalid")


@needs_native
@needs_linux
@pytest.mark.parametrize("advise", [_refuse, _closed], ids=["madvise-refused", "map-closed"])
def test_service_survives_a_failing_madvise(tmp_path, caplog, advise):
    """A refused madvise (EINVAL: an old kernel) stops the service for good, with a log line; a map
    closed under it (the segment was just retired) is passed over and the service goes on."""
    store = _store(tmp_path)
    try:
        service = store.services.prefault
        store.put_message(Message("T", b"x", 0))
        service._advise = advise
        assert service.advance() == 0
        if advise is _refuse:
            assert service.unavailable is not None and service.unavailable.errno == 22
            assert service._stop.is_set() and "puts fault their pages themselves" in caplog.text
            service._advise = lambda *args: pytest.fail("called after it stopped")
        else:
            assert service.unavailable is None and not service._stop.is_set()
        assert service.advance() == 0
        assert store.put_message(Message("T", b"y", 0)).ok
    finally:
        store.close()


@needs_native
@needs_linux
def test_which_stores_run_the_service(tmp_path):
    with MessageStore.open(small_config(tmp_path / "a")) as store:
        thread = store.services.prefault._thread
        assert thread is not None and thread.is_alive()
    assert store.services.prefault._thread is None          # stopped by close
    with MessageStore.open(small_config(tmp_path / "b", transient_store_pool_enable=True)) as store:
        assert store.services.prefault is None              # records go to the pool's buffers
    with MessageStore.open(small_config(tmp_path / "a"), read_only=True) as store:
        assert store.services.prefault is None
    with MessageStore.open(small_config(tmp_path / "c", flush_disk_type="SYNC_FLUSH")) as store:
        assert store.services.prefault is None              # group commits would sync the zeros


def test_twin_is_used_without_the_kernel():
    assert prefault_module.prefault is (kernel._native.prefault if kernel.COMPILED else prefault_py)


def test_no_service_where_it_is_not_supported(tmp_path, monkeypatch):
    from store.services import lifecycle
    monkeypatch.setattr(lifecycle, "prefault_supported", lambda: False)
    with MessageStore.open(small_config(tmp_path)) as store:
        assert store.services.prefault is None
        assert store.put_message(Message("T", b"x", 0)).ok


@needs_native
@needs_linux
def test_sync_range_native_agrees_with_twin_on_random_and_edge_arguments():
    fuzzer = types.SimpleNamespace(rng=random.Random(23), native=kernel._native,
                                   executions={"sync_range": 0}, compared={"sync_range": 0},
                                   last_input=None)
    for _ in range(400):
        prefault_target.sync_range(fuzzer, outcome, Disagreement)
    assert fuzzer.compared["sync_range"] == 400


@needs_linux
@pytest.mark.parametrize("sync_range", SYNC_FUNCTIONS)
def test_sync_range_answers_and_refusals(sync_range, tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(b"")
    with open(path, "r+b") as handle:
        handle.truncate(16 * PAGE)
        mapped = mmap.mmap(handle.fileno(), 16 * PAGE)
        read_only = mmap.mmap(handle.fileno(), 16 * PAGE, access=mmap.ACCESS_READ)
    assert sync_range(mapped, 0, 16 * PAGE, True) == 16 * PAGE
    assert sync_range(mapped, PAGE + 5, 3 * PAGE + 1, True) == 2 * PAGE + 1   # from start's page
    assert sync_range(mapped, 7, 7, False) == 7
    assert sync_range(mapped, 0, 0, True) == 0
    for args, error, message in [
            ((mapped, -1, 1, True), ValueError,
             "sync_range: need 0 <= start <= end <= the map's size"),
            ((mapped, 5, 4, True), ValueError,
             "sync_range: need 0 <= start <= end <= the map's size"),
            ((mapped, 0, 16 * PAGE + 1, True), ValueError,
             "sync_range: need 0 <= start <= end <= the map's size"),
            ((mapped, 2**63, 1, True), OverflowError,
             "cannot fit 'int' into an index-sized integer"),
            ((mapped, 0.0, 1, True), TypeError,
             "'float' object cannot be interpreted as an integer"),
            ((bytearray(PAGE), 0, 1, True), TypeError, "sync_range: the map must be an mmap.mmap"),
            ((mapped, 0, 1), TypeError, "sync_range(map, start, end, drop)"),
            ((read_only, 0, PAGE, True), BufferError, "Object is not writable.")]:
        with pytest.raises(error) as raised:
            sync_range(*args)
        assert str(raised.value) == message
    read_only.close()
    mapped.close()
    with pytest.raises(ValueError, match="mmap closed or invalid"):
        sync_range(mapped, 0, PAGE, True)


@needs_linux
@pytest.mark.parametrize("sync_range", SYNC_FUNCTIONS)
def test_sync_range_drops_the_whole_pages_below_and_keeps_every_byte(sync_range, tmp_path):
    """The pages below end's page leave this process's map (a dirty one stays dirty in the page
    cache: the sync writes it); the partly written last page stays mapped; every byte reads back
    the same through the map and through the file."""
    path = tmp_path / "00000000000000000000"
    with open(path, "wb") as handle:
        handle.truncate(64 * PAGE)
    with open(path, "r+b") as handle:
        mapped = mmap.mmap(handle.fileno(), 64 * PAGE)
    try:
        data = bytes(random.Random(5).randrange(256) for _ in range(40 * PAGE + 100))
        mapped[:len(data)] = data
        before = _resident_kib(str(path))
        assert before >= 41 * PAGE // 1024
        assert sync_range(mapped, 3 * PAGE + 9, len(data), True) == len(data) - 3 * PAGE
        assert before - _resident_kib(str(path)) >= 37 * PAGE // 1024    # pages 3..39 dropped
        assert mapped[:len(data)] == data and mapped[len(data):] == bytes(64 * PAGE - len(data))
        with open(path, "rb") as handle:
            assert handle.read(len(data)) == data
    finally:
        mapped.close()


@needs_native
def test_the_commit_logs_segments_flush_their_range(tmp_path):
    """With the compiled kernel, the commit log's segments flush [flushed, read position) through
    sync_range (the consume queues keep fdatasync); the flushed pointer and the bytes are right."""
    with MessageStore.open(small_config(tmp_path)) as store:
        results = [store.put_message(Message("TopicA", bytes([n]) * 2000, n % 4))
                   for n in range(40)]
        store.dispatch_pending()
        segment = store.commit_log.mapped_files.files[-1]
        assert segment.flush() == segment.wrote_position == segment.flushed_position
        assert segment.ranged_sync
        queue = store.consume_queues.queue("TopicA", 0)
        assert not any(f.ranged_sync for f in queue.mapped_files.files)
        for n, result in enumerate(results):
            assert store.look_message_by_offset(result.wrote_offset).body == bytes([n]) * 2000


def test_a_flush_of_a_map_closed_under_it_falls_back_to_fdatasync(tmp_path, monkeypatch):
    """Cleanup closes a segment's map before it marks the segment destroyed: a flush in between
    syncs the file by fdatasync instead of failing on the closed map."""
    from store.mappedfile.mapped_file import MappedFile
    segment = MappedFile(str(tmp_path / "00000000000000000000"), 16 * PAGE, create=True)
    segment.ranged_sync = True
    segment.append(b"x" * (3 * PAGE))
    synced = []
    monkeypatch.setattr(segment, "_sync_to_disk", lambda: synced.append(True))
    segment.buffer.close()
    assert segment.flush() == 3 * PAGE and synced == [True]
    segment.destroy()
