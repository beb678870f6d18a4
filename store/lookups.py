"""Read-only lookups of the facade: offsets, time search, earliest times, what topics exist.

Kept apart from `message_store.py` so that the facade stays small; everything here only reads.
"""

from __future__ import annotations

from dataclasses import dataclass

BOUNDARIES = ("nearest", "lower", "upper")


@dataclass(frozen=True)
class QueueSummary:
    topic: str
    queue_id: int
    min_offset: int
    max_offset: int
    max_phy_end: int

    @property
    def depth(self) -> int:
        return self.max_offset - self.min_offset


class LookupsMixin:
    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.consume_queues.get_min_offset(topic, queue_id)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.consume_queues.get_max_offset(topic, queue_id)

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, queue_offset: int) -> int:
        unit = self.consume_queues.get_unit(topic, queue_id, queue_offset)
        return unit.phy_offset if unit is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int,
                                    boundary: str | None = None) -> int:
        """Queue offset of the message stored nearest `timestamp_ms` (spec §10.3).

        `boundary`: "nearest" (4.9.7, the default for 4.9 stores), "lower" (first message stored at
        or after the time; the 5.x default) or "upper" (last message stored at or before it).
        """
        boundary = boundary or ("lower" if self.style == "5.x" else "nearest")
        if boundary not in BOUNDARIES:
            raise ValueError(f"boundary must be one of {BOUNDARIES}, not {boundary!r}")
        return self.consume_queues.get_offset_in_queue_by_time(
            topic, queue_id, timestamp_ms, boundary, self._store_time_of)

    def _store_time_of(self, phy_offset: int, size: int) -> int:
        if phy_offset < self.commit_log.min_offset():
            return -1
        return self.commit_log.store_timestamp_at(phy_offset, size)

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        unit = self.consume_queues.get_unit(topic, queue_id, queue_offset)
        if unit is None:
            return -1
        return self.commit_log.store_timestamp_at(unit.phy_offset, unit.size)

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int | None = None) -> int:
        """Store time of the first message of a queue, or of the whole commit log (-1 if none).

        4.9.7 reads the store-wide value through a buffer of 2 x maxMessageSize, which fails (-1)
        when the first segment holds fewer readable bytes than that; 4.9 stores keep that answer.
        """
        if topic is not None:
            return self.get_message_store_timestamp(
                topic, queue_id, self.get_min_offset_in_queue(topic, queue_id))
        min_offset = self.commit_log.min_offset()
        if self.style != "5.x":
            mapped = self.commit_log.mapped_files.find_file(min_offset)
            size = self.config.max_message_size * 2
            if mapped is None or (min_offset - mapped.file_from_offset) + size > mapped.read_position:
                return -1
        if min_offset >= self.commit_log.max_offset():
            return -1
        return self.commit_log.store_timestamp_at(min_offset)

    def queues(self) -> list[tuple[str, int]]:
        """Every (topic, queue_id) with a consume queue, sorted."""
        return sorted(self.consume_queues.queues())

    def topic_names(self) -> list[str]:
        return sorted({topic for topic, _ in self.queues()})

    def queue_summaries(self) -> list[QueueSummary]:
        cq = self.consume_queues
        return [QueueSummary(t, q, cq.get_min_offset(t, q), cq.get_max_offset(t, q),
                             cq.get_max_phy_end(t, q)) for t, q in self.queues()]

    def total_messages(self) -> int:
        return sum(s.depth for s in self.queue_summaries())

    def dispatch_behind_bytes(self) -> int:
        return self.services.reput.behind_bytes()
