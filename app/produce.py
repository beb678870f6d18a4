"""Building messages from the Produce form, and a bounded background load generator."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

from app.paths import InputError
from store.api import Message
from store.codec.javahash import java_string_hash
from store.codec.topic import validate_topic
from store.errors import InvalidTopicError, StoreError

SELECTORS = ("queue id", "hash of first key", "round robin")
MAX_BATCH = 256
MAX_PROPERTIES = 64
MAX_LOAD_MESSAGES = 100_000
MAX_LOAD_RATE_PER_S = 2000
MAX_LOAD_BODY_BYTES = 64 * 1024


def parse_properties(text: str) -> dict[str, str]:
    """`name=value` lines; blank lines ignored. InputError for anything else."""
    props: dict[str, str] = {}
    for number, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InputError(f"Property line {number} must look like name=value.")
        if any(ch in name + value for ch in "\x01\x02"):
            raise InputError(f"Property line {number} contains a separator character (\\x01/\\x02).")
        props[name] = value
    if len(props) > MAX_PROPERTIES:
        raise InputError(f"At most {MAX_PROPERTIES} properties.")
    return props


def choose_queue(selector: str, queue_id: int, queue_count: int, keys: list[str], sequence: int) -> int:
    if selector == "queue id":
        return queue_id
    queue_count = max(1, queue_count)
    if selector == "hash of first key":
        return abs(java_string_hash(keys[0] if keys else "")) % queue_count
    return sequence % queue_count


@dataclass(frozen=True)
class ProduceForm:
    topic: str
    queue_id: int
    selector: str
    queue_count: int
    tags: str
    keys: str
    properties_text: str
    body: bytes
    flag: int
    batch_size: int
    transaction: str = "none"            # a key of TRANSACTIONS
    prepared_offset: int = 0             # COMMIT / ROLLBACK: the PREPARED record's physical offset


# MessageSysFlag.TRANSACTION_*_TYPE (bits 2-3 of SYSFLAG). A broker's EndTransactionProcessor writes
# the COMMIT / ROLLBACK record with PREPARED TRANSACTION OFFSET = the PREPARED record's offset.
TRANSACTIONS = {"none": 0x0, "prepared": 0x4, "commit": 0x8, "rollback": 0xC}


def build_messages(form: ProduceForm, sequence: int = 0) -> list[Message]:
    """One Message per batch slot (a batch goes to one queue); InputError for bad input."""
    topic = (form.topic or "").strip()
    try:
        validate_topic(topic)
    except InvalidTopicError as error:
        raise InputError(f"Invalid topic: {error}") from None
    if form.selector not in SELECTORS:
        raise InputError(f"Unknown queue selector {form.selector!r}.")
    if not 1 <= form.batch_size <= MAX_BATCH:
        raise InputError(f"Batch size must be between 1 and {MAX_BATCH}.")
    if not 0 <= form.queue_id < 1024:
        raise InputError("Queue id must be between 0 and 1023.")
    if not -2**31 <= form.flag < 2**31:
        raise InputError("Flag must fit a 32-bit signed integer.")
    if form.transaction not in TRANSACTIONS:
        raise InputError(f"Unknown transaction type {form.transaction!r}.")
    sys_flag = TRANSACTIONS[form.transaction]
    if sys_flag and form.batch_size != 1:
        raise InputError("A transactional message is put alone: set the batch size to 1.")
    if form.transaction in ("commit", "rollback"):
        if not 0 <= form.prepared_offset < 2**63:
            raise InputError("The prepared offset is the PREPARED record's physical offset (>= 0).")
        prepared_offset = form.prepared_offset
    else:
        prepared_offset = 0
    keys = [k for k in (form.keys or "").split(" ") if k]
    props = parse_properties(form.properties_text)
    queue_id = choose_queue(form.selector, form.queue_id, form.queue_count, keys, sequence)
    tags = form.tags.strip() or None
    return [Message(topic, form.body, queue_id=queue_id, tags=tags, keys=keys, properties=props or None,
                    flag=form.flag, sys_flag=sys_flag, prepared_transaction_offset=prepared_offset)
            for _ in range(form.batch_size)]


class LoadGenerator:
    """Puts messages at a target rate in a daemon thread, bounded by a count; `stop()` ends it."""

    def __init__(self, store, *, topics: list[str], queues: int, rate_per_s: float, body_bytes: int,
                 total: int, seed: int = 7):
        for topic in topics:
            try:
                validate_topic(topic)
            except InvalidTopicError as error:
                raise InputError(f"Invalid topic {topic!r}: {error}") from None
        if not topics:
            raise InputError("Give at least one topic.")
        if not 1 <= total <= MAX_LOAD_MESSAGES:
            raise InputError(f"Message count must be between 1 and {MAX_LOAD_MESSAGES}.")
        if not 0 < rate_per_s <= MAX_LOAD_RATE_PER_S:
            raise InputError(f"Rate must be between 1 and {MAX_LOAD_RATE_PER_S} messages/s.")
        if not 0 <= body_bytes <= MAX_LOAD_BODY_BYTES:
            raise InputError(f"Body size must be between 0 and {MAX_LOAD_BODY_BYTES} bytes.")
        if not 1 <= queues <= 64:
            raise InputError("Queue spread must be between 1 and 64.")
        self.store = store
        self.topics, self.queues, self.rate_per_s = topics, queues, rate_per_s
        self.body_bytes, self.total = body_bytes, total
        self.sent = 0
        self.failed = 0
        self.last_error: str | None = None
        self.started_s = time.monotonic()
        self.finished_s: float | None = None
        self._stop = threading.Event()
        self._random = random.Random(seed)
        self._thread = threading.Thread(target=self._run, name="load-generator", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def progress(self) -> float:
        return min(1.0, (self.sent + self.failed) / self.total)

    @property
    def stopped(self) -> bool:
        """True once `stop()` was asked for (as opposed to finishing the count)."""
        return self._stop.is_set()

    @property
    def rate_text(self) -> str:
        """The achieved rate against the target, e.g. '49.8 of 50 msgs/s'."""
        elapsed_s = (self.finished_s or time.monotonic()) - self.started_s
        achieved = (self.sent + self.failed) / elapsed_s if elapsed_s > 0 else 0.0
        return f"{achieved:,.1f} of {self.rate_per_s:,.0f} msgs/s"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        try:
            self._put_all()
        except StoreError as error:   # e.g. the store was closed under the generator
            self.last_error = f"{type(error).__name__}: {error}"
        finally:
            self.finished_s = time.monotonic()

    def _put_all(self) -> None:
        interval_s = 1.0 / self.rate_per_s
        next_at = time.monotonic()
        for number in range(self.total):
            if self._stop.is_set() or self.store.closed:
                return
            topic = self.topics[number % len(self.topics)]
            body = (f"load-{number}-".encode() * (self.body_bytes // 8 + 1))[:self.body_bytes]
            message = Message(topic, body, queue_id=self._random.randrange(self.queues),
                              tags=f"load{number % 3}", keys=[f"load-{number}"])
            result = self.store.put_message(message)
            if result.ok:
                self.sent += 1
            else:
                self.failed += 1
                self.last_error = f"{result.status.value}: {result.error}"
            next_at += interval_s
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
