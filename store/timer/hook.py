"""The put-time rewrite of a timer message (RocketMQ 5.3.3 broker, `HookUtils.handleScheduleMessage`
and `transformTimerMessage`). Pure: no I/O; the wheel's slot count comes in as a callable.

Only single puts: the broker registers the hook for `MessageExtBrokerInner`, and a batch
(`MessageExtBatch`) is stored as sent. A message whose transaction type is NOT_TYPE or COMMIT, whose
topic is not `rmq_sys_wheel_timer` (a rolled timer is put as is), and which carries
`TIMER_DELIVER_MS`, `TIMER_DELAY_SEC` or `TIMER_DELAY_MS` (`checkIfTimerMessage`):

| case                                           | outcome                                        |
|------------------------------------------------|------------------------------------------------|
| a `DELAY` level > 0 too                        | timer properties dropped; the level applies    |
| `TIMER_OUT_MS` already set                     | not a timer message (put as is)                |
| `timerWheelEnable=false`                       | refused: WHEEL_TIMER_NOT_ENABLE                |
| the property is not a Java long                | refused: WHEEL_TIMER_MSG_ILLEGAL               |
| deliver time <= now, with `TIMER_DEL_UNIQKEY`  | refused: WHEEL_TIMER_MSG_ILLEGAL               |
| deliver time <= now                            | put unchanged in its own topic                 |
| deliver time - now > `timerMaxDelaySec` x 1000 | refused: WHEEL_TIMER_MSG_ILLEGAL               |
| the slot holds too many timers (`isReject`)    | refused: WHEEL_TIMER_FLOW_CONTROL              |
| else                                           | rewritten (below)                              |

The deliver time is `TIMER_DELAY_SEC` x 1000 + now, else `TIMER_DELAY_MS` + now, else
`TIMER_DELIVER_MS` (that precedence; Java long arithmetic, so an overflow wraps). The rewrite adds
`TIMER_OUT_MS` = the deliver time rounded down to `timerPrecisionMs`, one step less when it is an
exact multiple; then `REAL_TOPIC` and `REAL_QID`; topic `rmq_sys_wheel_timer`, queue 0. The timer
property itself stays (the 5.3.3 timer-clean fixture: all three kinds, `TIMER_DELAY_MS` included).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Callable

from store.api import Message, PutMessageStatus
from store.codec import prop_crc as crc_codec
from store.codec.properties import encode_properties
from store.timer.codec import TIMER_TOPIC

TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
TIMER_PROPERTIES = (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS)
_TRANSACTION_PREPARED, _TRANSACTION_ROLLBACK = 0x04, 0x0C
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_INT_MAX = (1 << 31) - 1


class TimerRefused(Exception):
    """A timer message RocketMQ's put hook refuses: RocketMQ's status and a sentence."""

    def __init__(self, status: PutMessageStatus, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class TimerHookSettings:
    """The slice of StoreConfig the hook reads."""

    wheel_enabled: bool             # timerWheelEnable
    precision_ms: int               # timerPrecisionMs
    max_delay_sec: int              # timerMaxDelaySec
    congest_num_each_slot: int      # timerCongestNumEachSlot

    @classmethod
    def from_config(cls, config) -> "TimerHookSettings":
        return cls(config.timer_wheel_enable, config.timer_precision_ms, config.timer_max_delay_sec,
                   config.timer_congest_num_each_slot)


def java_parse_long(text: str) -> int | None:
    """`Long.parseLong`, or None where Java throws (no blanks, optional sign, 64-bit range)."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    value = int(text)
    return value if _LONG_MIN <= value <= _LONG_MAX else None


def _wrap_long(value: int) -> int:
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _delay_level(properties) -> int:
    text = properties.get("DELAY")
    if not text:
        return 0
    value = java_parse_long(text)
    return value if value is not None else 0   # a bad DELAY is refused by the put path


def timer_out_ms(deliver_ms: int, precision_ms: int) -> int:
    """`TIMER_OUT_MS` for a deliver time: rounded down to the precision, an exact multiple one step
    less (so the slot that delivers it is read once that time has passed)."""
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms // precision_ms * precision_ms


def is_reject(congest_num: int, congest_num_each_slot: int, draw: Callable[[], int]) -> bool:
    """`TimerMessageStore.isReject`: `draw()` is `RANDOM.nextInt(1000)`."""
    if congest_num <= congest_num_each_slot:
        return False
    if congest_num >= congest_num_each_slot * 2:
        return True
    return draw() > 1000 * (congest_num - congest_num_each_slot) / (congest_num_each_slot + 0.1)


def rewrite_timer_message(message: Message, settings: TimerHookSettings, now_ms: int, *,
                          slot_num: Callable[[int], int] = lambda _time_ms: 0,
                          draw: Callable[[], int] = lambda: random.randrange(1000)) -> Message:
    """The message to store for `message` (itself when the hook leaves it alone); raises
    TimerRefused with RocketMQ's status. `slot_num(time_ms)` is the wheel's timer count for a slot
    (`TimerWheel.getNum`)."""
    properties = message.properties
    if not properties or not any(name in properties for name in TIMER_PROPERTIES):
        return message
    if (message.sys_flag & 0x0C) in (_TRANSACTION_PREPARED, _TRANSACTION_ROLLBACK) \
            or message.topic == TIMER_TOPIC:
        return message
    if _delay_level(properties) > 0:
        # checkIfTimerMessage: a delay level wins; the timer properties are cleared.
        kept = {k: v for k, v in properties.items() if k not in TIMER_PROPERTIES}
        return replace(message, properties=kept)
    if TIMER_OUT_MS in properties:
        return message
    if not settings.wheel_enabled:
        raise TimerRefused(PutMessageStatus.WHEEL_TIMER_NOT_ENABLE,
                           "timerWheelEnable is false: timer messages are refused")
    deliver_ms = _deliver_ms(properties, now_ms)
    if deliver_ms <= now_ms:
        if TIMER_DEL_UNIQKEY in properties:
            raise TimerRefused(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL,
                               "a timer delete message whose deliver time has passed")
        return message
    if deliver_ms - now_ms > settings.max_delay_sec * 1000:
        raise TimerRefused(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL,
                           f"deliver time {deliver_ms} is more than timerMaxDelaySec "
                           f"({settings.max_delay_sec} s) away")
    out_ms = timer_out_ms(deliver_ms, settings.precision_ms)
    # A slot's num is an int: with the default Integer.MAX_VALUE nothing is ever rejected.
    if settings.congest_num_each_slot < _INT_MAX and \
            is_reject(slot_num(out_ms), settings.congest_num_each_slot, draw):
        raise TimerRefused(PutMessageStatus.WHEEL_TIMER_FLOW_CONTROL,
                           f"the wheel slot of {out_ms} holds more than timerCongestNumEachSlot "
                           f"({settings.congest_num_each_slot}) timers")
    rewritten = dict(properties)
    rewritten[TIMER_OUT_MS] = str(out_ms)
    rewritten["REAL_TOPIC"] = message.topic
    rewritten["REAL_QID"] = str(message.queue_id)
    return replace(message, topic=TIMER_TOPIC, queue_id=0, properties=rewritten)


def _deliver_ms(properties, now_ms: int) -> int:
    """The deliver time by RocketMQ's precedence; TimerRefused when the value is not a long."""
    for name, scale in ((TIMER_DELAY_SEC, 1000), (TIMER_DELAY_MS, 1)):
        text = properties.get(name)
        if text is not None:
            value = java_parse_long(text) if isinstance(text, str) else None
            if value is None:
                raise TimerRefused(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL,
                                   f"{name} {text!r} is not a number")
            return _wrap_long(now_ms + value * scale)
    text = properties.get(TIMER_DELIVER_MS)
    value = java_parse_long(text) if isinstance(text, str) else None
    if value is None:
        raise TimerRefused(PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL,
                           f"{TIMER_DELIVER_MS} {text!r} is not a number")
    return value


def delivery_properties(properties, *, enqueue_time_ms: int, roll: bool, dequeue_ms: int,
                        prop_crc: bool) -> tuple[bytes, dict[str, str]]:
    """`TimerMessageStore.convert` + `convertMessage` for a due timer record's decoded properties:
    (the properties field to store, the properties the new record is dispatched with).

    `TIMER_ENQUEUE_MS` (unless `enqueue_time_ms` is -1), `TIMER_ROLL_TIMES` + 1 for a roll and
    `TIMER_DEQUEUE_MS` are added to the decoded map (a 128-bucket HashMap, `string2messageProperties`),
    the string is made, and only then are `REAL_TOPIC` / `REAL_QID` cleared (a roll keeps them), so
    the stored copy still holds them. With `enabledAppendPropCRC` the copied `__CRC32#` is dropped
    and the 20-byte trailer reserved, as the commit log's put does."""
    changed = dict(properties)
    if enqueue_time_ms != -1:
        changed[TIMER_ENQUEUE_MS] = str(enqueue_time_ms)
    if roll:
        times = java_parse_long(changed.get(TIMER_ROLL_TIMES) or "0")
        changed[TIMER_ROLL_TIMES] = str((times or 0) + 1)
    changed[TIMER_DEQUEUE_MS] = str(dequeue_ms)
    if prop_crc:
        changed.pop(crc_codec.PROPERTY_CRC32, None)
    raw = encode_properties(changed, style="5.x", capacity=128)
    if prop_crc:
        raw += crc_codec.PLACEHOLDER
    if not roll:
        changed.pop("REAL_TOPIC", None)
        changed.pop("REAL_QID", None)
    return raw, changed
