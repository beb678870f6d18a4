"""Simulated power loss: copy the store keeping only what the engine had flushed, then recover the copy.

The model of the disk ("what survives a power cut"):

* Every `MappedFile.flush` (commit log and file consume queues) is wrapped: after its msync the
  flushed position of that file is recorded. These files are append-only, so the bytes below the
  flushed position never change afterwards; the durable image of the file is its current bytes up to
  the recorded position, then zeros. For the commit log, with probability 1/2 some whole 4 KiB pages
  of the unflushed range are kept too (the kernel wrote dirty pages back, in order): that can leave
  a torn record at the cut, which recovery must drop. (Not modelled: a torn consume-queue page. A
  20-byte unit can straddle a page, and a lost second page can leave a unit with a truncated
  tagsCode that still looks valid; RocketMQ has the same exposure.)
* Every `IndexFile.flush` is wrapped: the whole file image is recorded at that moment (index files are
  written in place, so the durable image is the one of the last flush; never flushed = all zeros).
* The checkpoint and the config JSON files are written atomically (tmp + fsync + rename): copied as
  they are. The RocksDB consume queue is not modelled page by page: its copy is dropped entirely (the
  worst case RocksDB allows: nothing synced), so recovery must rebuild it from the commit log.

The engine is paused at a random moment by taking the put lock and the model's own lock (which every
wrapped flush holds), so the image is of one instant. Producers keep running around the pauses.

Asserted on every recovered copy: each message has its exact bytes, no duplicates, per producer the
recovered messages are a prefix of what it put (no hole), queues read contiguously, `check()` is clean,
a new put works; SYNC_FLUSH: every acknowledged message survives; ASYNC_FLUSH: every message whose
record lies below the commit log's flushed offset at the cut survives (only the unflushed tail is
lost).
"""

from __future__ import annotations

import os
import random
import shutil
import threading
import time

import pytest

from store import GetMessageStatus, Message, MessageStore
from store.index.index_file import IndexFile
from store.mappedfile.mapped_file import MappedFile
from store.meta.checkpoint import CheckpointFile
from tests.engine_util import small_config

TOPIC = "PowerT"
PRODUCERS = 3          # producer i writes queue i; producer 2 puts batches of 3


def body_of(producer: int, seq: int) -> bytes:
    rng = random.Random(producer * 7_000_001 + seq)
    return f"{producer}:{seq}:".encode() + rng.randbytes(rng.choice((0, 30, 200, 900)))


class DiskModel:
    """What the engine has forced to disk, per file (see the module docstring)."""

    def __init__(self):
        self.lock = threading.RLock()
        self.flushed: dict[str, int] = {}
        self.index_images: dict[str, bytes] = {}

    def install(self, monkeypatch) -> None:
        model = self
        mapped_flush, index_flush, checkpoint_flush = \
            MappedFile.flush, IndexFile.flush, CheckpointFile.flush

        def flush_mapped(self, least_pages=0):
            with model.lock:
                result = mapped_flush(self, least_pages)
                model.flushed[self.path] = max(model.flushed.get(self.path, 0),
                                               self.flushed_position)
                return result

        def flush_index(self):
            with model.lock:
                index_flush(self)
                if self._map is not None and not self.read_only:
                    model.index_images[self.path] = bytes(self._map)

        def flush_checkpoint(self):
            with model.lock:
                checkpoint_flush(self)

        monkeypatch.setattr(MappedFile, "flush", flush_mapped)
        monkeypatch.setattr(IndexFile, "flush", flush_index)
        monkeypatch.setattr(CheckpointFile, "flush", flush_checkpoint)

    def image(self, root: str, target: str, rng: random.Random, live_sizes: dict[str, int]) -> None:
        """Write the durable image of the store at `root` into `target` (call under self.lock)."""
        for dirpath, dirnames, filenames in os.walk(root):
            relative = os.path.relpath(dirpath, root)
            if relative.split(os.sep)[0] == "consumequeue" and \
                    os.path.exists(os.path.join(root, "consumequeue", "CURRENT")):
                dirnames[:] = []
                continue   # the RocksDB consume queue: dropped (see the module docstring)
            os.makedirs(os.path.join(target, relative), exist_ok=True)
            for name in filenames:
                source = os.path.join(dirpath, name)
                destination = os.path.join(target, relative, name)
                top = relative.split(os.sep)[0]
                try:
                    with open(source, "rb") as handle:
                        data = handle.read()
                except FileNotFoundError:
                    continue   # a .tmp being renamed right now
                if top in ("commitlog", "consumequeue"):
                    flushed = self.flushed.get(source, 0)
                    keep = flushed
                    written = live_sizes.get(source, 0)
                    if top == "commitlog" and written > flushed and rng.random() < 0.5:
                        # In-order writeback of whole pages past the flushed position.
                        page = rng.randrange(flushed // 4096, written // 4096 + 1) * 4096
                        keep = min(written, max(flushed, page))
                    data = data[:keep] + bytes(len(data) - keep)
                elif top == "index":
                    data = self.index_images.get(source, bytes(len(data)))
                with open(destination, "wb") as handle:
                    handle.write(data)


def written_positions(store) -> dict[str, int]:
    """Per commit-log / CQ file: end of the bytes present in the mapping (what writeback could save)."""
    sizes = {}
    for mapped in store.commit_log.mapped_files.files:
        sizes[mapped.path] = mapped.committed_position if mapped.write_buffer is not None \
            else mapped.wrote_position
    return sizes


def durable_end(model: DiskModel, store) -> int:
    end = 0
    for mapped in store.commit_log.mapped_files.files:
        flushed = model.flushed.get(mapped.path, 0)
        if flushed:
            end = max(end, mapped.file_from_offset + flushed)
    return end


def produce(store, producer: int, acked: list, stop: threading.Event) -> None:
    batch = 3 if producer == 2 else 1
    seq = 0
    while not stop.is_set():
        seqs = list(range(seq, seq + batch))
        messages = [Message(TOPIC, body_of(producer, s), queue_id=producer, keys=[f"p{producer}-{s}"])
                    for s in seqs]
        result = store.put_message(messages[0]) if batch == 1 else store.put_messages(messages)
        if result.ok:
            size = result.wrote_bytes
            acked.append((producer, seqs, result.wrote_offset + size))
        seq += batch
        time.sleep(0.0005)


def verify_copy(config, sync: bool, cut: dict) -> int:
    if os.environ.get("RMQ_KEEP_IMAGES"):
        shutil.copytree(config.store_path_root_dir, config.store_path_root_dir + ".orig")
    with MessageStore.open(config) as store:
        recovered = {}
        for producer in range(PRODUCERS):
            max_offset = store.get_max_offset_in_queue(TOPIC, producer)
            offset, seqs = 0, []
            for _ in range(max_offset + 1):
                if offset >= max_offset:
                    break
                got = store.get_message("v", TOPIC, producer, offset, 64)
                assert got.status is GetMessageStatus.FOUND, (producer, offset, got.status)
                for message in got.messages:
                    assert message.queue_offset == offset
                    owner, seq, _ = message.body.split(b":", 2)
                    assert int(owner) == producer and message.body == body_of(producer, int(seq))
                    seqs.append(int(seq))
                    offset += 1
            assert seqs == list(range(len(seqs))), f"producer {producer}: hole or duplicate"
            recovered[producer] = set(seqs)
        for producer, seqs, end in cut["acked"]:
            must = sync or end <= cut["durable_end"]
            if must:
                assert set(seqs) <= recovered[producer], (
                    f"producer {producer} seqs {seqs} (end {end}) lost; durable end "
                    f"{cut['durable_end']}, sync={sync}; recovery {store.recovery_report}")
        # Index entries may point past the recovered end (the index is flushed independently of
        # an ASYNC commit log and is never truncated, as in RocketMQ): a warning, tolerated here.
        findings = [f for f in store.check() if f.severity == "error" or (
            f.severity == "warning" and f.component != "index")]
        assert not findings, [str(f) for f in findings[:5]]
        assert store.put_message(Message("AfterPower", b"x")).ok
        total = sum(len(s) for s in recovered.values())
        print(f"cut: recovered {total} acked {sum(len(a[1]) for a in cut['acked'])} "
              f"durable_end {cut['durable_end']} report {store.recovery_report.mode}")
        return total


CONFIGS = [
    # With the pool this once failed (unit 200 of queue 2 -> the record of queue offset 0): a cut left
    # a queue's last CQ files created but empty, recovery then kept maxPhysicOffset at -1, and the
    # whole-log re-dispatch appended unit 0's record at the queue's end. Fixed in
    # store/consumequeue/file/queue_recovery.py; tests/test_consume_queue.py has the exact case.
    ("ASYNC_FLUSH", False, "default"), ("ASYNC_FLUSH", True, "default"),
    ("SYNC_FLUSH", False, "default"), ("ASYNC_FLUSH", False, "defaultRocksDB"),
    ("SYNC_FLUSH", False, "defaultRocksDB"),
]


def run_power_loss(tmp_path, monkeypatch, flush, pool, store_type, cuts, seed):
    rng = random.Random(seed)
    model = DiskModel()
    model.install(monkeypatch)
    overrides = dict(flush_disk_type=flush, transient_store_pool_enable=pool, store_type=store_type,
                     flush_interval_commit_log=rng.choice((10, 50)), flush_commit_log_least_pages=1,
                     commit_interval_commit_log=10, flush_interval_consume_queue=30,
                     flush_consume_queue_thorough_interval=200, flush_commit_log_thorough_interval=300)
    live = small_config(tmp_path / "live", **overrides)
    images = []
    acked: list = []
    stop = threading.Event()
    with MessageStore.open(live) as store:
        threads = [threading.Thread(target=produce, args=(store, p, acked, stop), daemon=True)
                   for p in range(PRODUCERS)]
        for thread in threads:
            thread.start()
        try:
            for number in range(cuts):
                time.sleep(rng.uniform(0.02, 0.3))
                with store.commit_log.put_lock, model.lock:
                    target = str(tmp_path / f"cut{number}")
                    model.image(live.store_path_root_dir, target, rng, written_positions(store))
                    images.append((target, {"acked": list(acked),
                                            "durable_end": durable_end(model, store)}))
        finally:
            stop.set()
            for thread in threads:
                thread.join(10)
    total = 0
    for target, cut in images:
        total += verify_copy(small_config(target, **overrides), flush == "SYNC_FLUSH", cut)
        if not os.environ.get("RMQ_KEEP_IMAGES"):
            shutil.rmtree(target)
    assert total > 0
    return len(images)


def _id(config):
    return "-".join(str(part) for part in config).replace("True", "pool").replace("False", "nopool")


@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_power_loss_quick(tmp_path, monkeypatch, config):
    assert run_power_loss(tmp_path, monkeypatch, *config, cuts=4, seed=len(config[0]) + config[1]) == 4


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=_id)
def test_power_loss_many(tmp_path, monkeypatch, config):
    """24 cuts per configuration, 120 in all."""
    seed = 100 + len(config[0]) + config[1]
    assert run_power_loss(tmp_path, monkeypatch, *config, cuts=24, seed=seed) == 24
