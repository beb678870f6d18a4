"""Synthetic commit logs for tests: a small spec-§2 encoder and an appender that follows the BLANK rule.

Independent of the engine's codec on purpose: the pipeline's vectorised decoder is checked against bytes
produced by a separate, scalar implementation of the spec (and against the real fixtures).
"""

from __future__ import annotations

import ipaddress
import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

MAGIC_V1 = -626843481
MAGIC_V2 = -626843477
BLANK_MAGIC = -875286124


def _host_bytes(host: str) -> tuple[bytes, bool]:
    address, _, port = host.rpartition(":")
    ip = ipaddress.ip_address(address.strip("[]"))
    return ip.packed + struct.pack(">i", int(port)), ip.version == 6


@dataclass
class SyntheticMessage:
    topic: str = "TopicA"
    queue_id: int = 0
    body: bytes = b"hello"
    properties_raw: bytes = b"TAGS\x01TagA\x02KEYS\x01k1 k2"
    flag: int = 0
    sys_flag: int = 0
    queue_offset: int = 0
    born_timestamp: int = 1_700_000_000_000
    born_host: str = "127.0.0.1:50000"
    store_timestamp: int = 1_700_000_000_123
    store_host: str = "127.0.0.1:10911"
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    version: int = 1
    extra: dict = field(default_factory=dict)


def encode(message: SyntheticMessage, phy_offset: int) -> bytes:
    """One record exactly as spec §2.1 lays it out (BODYCRC computed, IPv6 sysflag bits set)."""
    born, born_v6 = _host_bytes(message.born_host)
    store, store_v6 = _host_bytes(message.store_host)
    sys_flag = message.sys_flag | (0x10 if born_v6 else 0) | (0x20 if store_v6 else 0)
    topic = message.topic.encode("utf-8")
    topic_length = struct.pack(">h", len(topic)) if message.version == 2 else struct.pack(">b", len(topic))
    tail = (
        struct.pack(">i", message.reconsume_times) + struct.pack(">q", message.prepared_transaction_offset)
        + struct.pack(">i", len(message.body)) + message.body + topic_length + topic
        + struct.pack(">h", len(message.properties_raw)) + message.properties_raw
    )
    head_size = 4 * 5 + 8 + 8 + 4 + 8 + len(born) + 8 + len(store)
    total = head_size + len(tail)
    head = struct.pack(
        ">iiiiiqqiq", total, MAGIC_V2 if message.version == 2 else MAGIC_V1, zlib.crc32(message.body) & 0x7FFFFFFF,
        message.queue_id, message.flag, message.queue_offset, phy_offset, sys_flag, message.born_timestamp,
    ) + born + struct.pack(">q", message.store_timestamp) + store
    record = head + tail
    assert len(record) == total
    return record


class CommitLogWriter:
    """Appends records to `<store>/commitlog/` segments of `segment_size_bytes`, with BLANK fillers.

    Segments are created full-size and zero-filled (like RocketMQ's mapped files); each append is one
    `pwrite` followed by `fsync`-free visibility through the page cache, which is what a reader sees
    while a broker writes.
    """

    def __init__(self, store_dir: str | os.PathLike, segment_size_bytes: int, *, preallocate_next: bool = True):
        self.directory = Path(store_dir) / "commitlog"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.segment_size_bytes = segment_size_bytes
        self.preallocate_next = preallocate_next
        self.next_queue_offsets: dict[tuple[str, int], int] = {}
        self.phy_offset = self._recover_end()

    def _recover_end(self) -> int:
        from store.pipeline.layout import list_segments
        from store.pipeline.segment_reader import SegmentReader, SegmentSplit

        segments = list_segments(self.directory)
        end = 0
        for segment in segments:
            reader = SegmentReader(SegmentSplit(segment.path, segment.file_from_offset), columns=["topic", "queue_id"])
            for batch in reader.batches():
                for topic, queue_id in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                    key = (topic, queue_id)
                    self.next_queue_offsets[key] = self.next_queue_offsets.get(key, 0) + 1
            if reader.end.records or segment.file_from_offset == 0:
                end = reader.end.phy_offset if reader.end.kind != "blank" else segment.file_from_offset + segment.size_bytes
        return end

    def _segment(self, file_from_offset: int) -> Path:
        path = self.directory / f"{file_from_offset:020d}"
        if not path.exists():
            with open(path, "wb") as handle:
                handle.truncate(self.segment_size_bytes)
        return path

    def append(self, message: SyntheticMessage) -> int:
        """Append one message (queue offset assigned per topic/queue); returns its phy_offset."""
        key = (message.topic, message.queue_id)
        message.queue_offset = self.next_queue_offsets.get(key, 0)
        record = encode(message, self.phy_offset)
        position = self.phy_offset % self.segment_size_bytes
        free = self.segment_size_bytes - position
        if len(record) + 8 > free:
            self._write(self.phy_offset, struct.pack(">ii", free, BLANK_MAGIC))
            self.phy_offset += free
            record = encode(message, self.phy_offset)
        self._write(self.phy_offset, record)
        self.next_queue_offsets[key] = message.queue_offset + 1
        written_at = self.phy_offset
        self.phy_offset += len(record)
        return written_at

    def _write(self, phy_offset: int, data: bytes) -> None:
        file_from_offset = phy_offset - phy_offset % self.segment_size_bytes
        path = self._segment(file_from_offset)
        if self.preallocate_next:
            self._segment(file_from_offset + self.segment_size_bytes)
        with open(path, "r+b") as handle:
            handle.seek(phy_offset - file_from_offset)
            handle.write(data)
