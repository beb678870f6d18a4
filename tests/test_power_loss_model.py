"""The power-loss model (tests/power_loss_model.py) and the engine bugs it found, case by case."""

from __future__ import annotations

import os
import random

from store.mappedfile.mapped_file import fsync_directory
from store.mappedfile.mapped_file_queue import MappedFileQueue
from store.meta.config_files import atomic_write_bytes
from tests.power_loss_model import SyncRecorder


def _images(tmp_path, recorder, seeds=range(12)):
    out = []
    for seed in seeds:
        target = tmp_path / f"image{seed}"
        recorder.image(str(target), random.Random(seed))
        out.append(target)
    return out


def test_only_synced_bytes_and_fsynced_entries_survive(tmp_path, monkeypatch):
    root = tmp_path / "root"
    recorder = SyncRecorder(str(root))
    recorder.install(monkeypatch)
    synced = root / "synced"
    with open(synced, "wb") as handle:
        handle.write(b"a" * 8192)
        handle.flush()
        os.fsync(handle.fileno())
    fsync_directory(root)
    with open(synced, "r+b") as handle:   # page 1 rewritten, never synced
        handle.seek(4096)
        handle.write(b"b" * 4096)
    with open(root / "unlisted", "wb") as handle:   # synced, but its directory never fsynced
        handle.write(b"c")
        handle.flush()
        os.fsync(handle.fileno())
    seen = set()
    for image in _images(tmp_path, recorder, range(30)):
        assert not (image / "unlisted").exists()
        data = (image / "synced").read_bytes()
        assert data[:4096] == b"a" * 4096 and data[4096:] in (b"a" * 4096, b"b" * 4096)
        seen.add(data[4096:4097])
    assert seen == {b"a", b"b"}   # the unsynced page is sometimes written back, sometimes not
    assert recorder.calls["fsync"] == 2 and recorder.calls["directory fsync"] == 1


def test_a_rename_is_durable_only_after_the_directory_fsync(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    (root / "config").write_bytes(b"old")
    recorder = SyncRecorder(str(root))
    recorder.install(monkeypatch)
    with open(root / "config.tmp", "wb") as handle:
        handle.write(b"new")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(root / "config.tmp", root / "config")
    for image in _images(tmp_path / "before", recorder):
        assert (image / "config").read_bytes() == b"old"
    fsync_directory(root)
    for image in _images(tmp_path / "after", recorder):
        assert (image / "config").read_bytes() == b"new" and not (image / "config.tmp").exists()
    atomic_write_bytes(root / "config", b"newer")   # the engine's atomic write: all four steps
    for image in _images(tmp_path / "atomic", recorder):
        assert (image / "config").read_bytes() == b"newer"


def test_a_new_segment_keeps_its_length_and_its_new_directory(tmp_path, monkeypatch):
    """Two engine bugs: a preallocated file was never fsynced (a cut could leave its durable name
    with 0 bytes, which no longer loads), and a segment directory made by os.makedirs was never
    fsynced into its parent (the whole commit log could vanish under SYNC_FLUSH)."""
    root = tmp_path / "root"
    recorder = SyncRecorder(str(root))
    recorder.install(monkeypatch)
    queue = MappedFileQueue(str(root / "commitlog"), 8192)
    queue.create_file(0)
    for image in _images(tmp_path, recorder, range(20)):
        assert os.path.getsize(image / "commitlog" / f"{0:020d}") == 8192
    queue.close()


def test_a_new_config_directory_and_index_directory_survive(tmp_path, monkeypatch):
    """Engine bug: config/ (topics.json, consumerOffset.json) and index/ were made with
    os.makedirs and never fsynced into the store root: a cut after the first config write lost
    every config file although each was written atomically."""
    from store.index.index_service import IndexService
    from store.meta.config_files import JsonConfigFile

    root = tmp_path / "root"
    recorder = SyncRecorder(str(root))
    recorder.install(monkeypatch)
    JsonConfigFile(root / "config" / "topics.json", read_only=False).persist('{"a": 1}')
    for image in _images(tmp_path / "config", recorder):
        assert (image / "config" / "topics.json").read_bytes() == b'{"a": 1}'
    service = IndexService(root / "index", 64, 256)
    created = service._create_file()
    for image in _images(tmp_path / "index", recorder):
        copy = image / "index" / os.path.basename(created.path)
        assert os.path.getsize(copy) == created.file_size_bytes
    service.close()
