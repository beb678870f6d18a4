"""The client unique key (`UNIQ_KEY` property) a Java producer's `MessageClientIDSetter` makes (spec §3.2).

Raw bytes, then upper-case hex (32 characters for an IPv4 host, 56 for IPv6):

| field                  | offset  | size_bytes | meaning                                                      |
|------------------------|---------|------------|--------------------------------------------------------------|
| ip                     | 0       | 4 or 16    | producer host address (first public, else first private)     |
| pid                    | L       | 2          | process id, low 16 bits                                      |
| class_loader_hash      | L+2     | 4          | `hashCode()` of the class loader (random per process here)   |
| time_since_month_ms    | L+6     | 4          | now - start of the current month (JVM default time zone)     |
| counter                | L+10    | 2          | per-process counter, low 16 bits, one step per id            |

The part before the time field is fixed per process. The store treats the key as an opaque string; the
admin tools reverse the time field to guess where to start a search (`nearly_time_from_key`).
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass
from datetime import datetime, tzinfo

_TAIL = struct.Struct(">hiih")       # pid, class loader hash, time since month start, counter
assert _TAIL.size == 12

UNIQ_KEY_LENGTH_V4 = 32
UNIQ_KEY_LENGTH_V6 = 56


@dataclass(frozen=True, slots=True)
class UniqKeyFields:
    ip: str                       # dotted IPv4 or an IPv6 address
    pid: int                      # low 16 bits, as the signed short stored
    class_loader_hash: int        # signed int32
    time_since_month_ms: int      # signed int32
    counter: int                  # low 16 bits, as the signed short stored


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def month_start_ms(now_ms: int, tz: tzinfo | None = None) -> int:
    """Start of the month holding `now_ms`, in `tz` (None = the local zone, like the JVM default)."""
    moment = datetime.fromtimestamp(now_ms // 1000, tz)   # naive local time when tz is None
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(start.timestamp() * 1000)


def time_field(now_ms: int, tz: tzinfo | None = None) -> int:
    """`(int)(now - startTime)`; a value in (-1,000,000, 0) is clamped to 0 as Java does."""
    diff = _signed(now_ms - month_start_ms(now_ms, tz), 32)
    return 0 if -1_000_000 < diff < 0 else diff


def encode_uniq_key(ip: str | bytes, pid: int, class_loader_hash: int, time_since_month_ms: int,
                    counter: int) -> str:
    """The key from its fields (spec §14.8: 127.0.0.1, 12345, 0x1B6D3586, 1203200000, 0
    -> "7F00000130391B6D358647B760000000")."""
    ip_bytes = ip if isinstance(ip, bytes) else ipaddress.ip_address(ip).packed
    if len(ip_bytes) not in (4, 16):
        raise ValueError(f"an ip is 4 or 16 bytes, not {len(ip_bytes)}")
    tail = _TAIL.pack(_signed(pid, 16), _signed(class_loader_hash, 32),
                      _signed(time_since_month_ms, 32), _signed(counter, 16))
    return (ip_bytes + tail).hex().upper()


def decode_uniq_key(key: str) -> UniqKeyFields:
    """The fields of a key; ValueError for a string that is not 32 or 56 hex characters."""
    if len(key) not in (UNIQ_KEY_LENGTH_V4, UNIQ_KEY_LENGTH_V6):
        raise ValueError(f"a UNIQ_KEY has 32 or 56 hex characters, not {len(key)}")
    raw = bytes.fromhex(key)
    ip_length = len(raw) - _TAIL.size
    pid, loader, diff, counter = _TAIL.unpack_from(raw, ip_length)
    return UniqKeyFields(str(ipaddress.ip_address(raw[:ip_length])), pid, loader, diff, counter)


def nearly_time_from_key(key: str, now_ms: int, tz: tzinfo | None = None) -> int:
    """`getNearlyTimeFromID`: the key's creation time, assuming this month or else the last one."""
    diff = decode_uniq_key(key).time_since_month_ms
    start = month_start_ms(now_ms, tz)
    if start + diff <= now_ms:
        return start + diff
    previous_start = month_start_ms(start - 1, tz)
    return previous_start + diff


def _is_private_v4(address: ipaddress.IPv4Address) -> bool:
    return any(address in ipaddress.ip_network(net)
               for net in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


def _usable_v4(address: ipaddress.IPv4Address) -> bool:
    """`UtilAll.ipCheck`: first octet 1..126 or 128..254 (no loopback, multicast, 0.x)."""
    first = address.packed[0]
    return 1 <= first <= 126 or 128 <= first <= 254


def _candidate_addresses():
    """Local addresses we can see without extra packages: the outbound routes, then the host name
    (lazily: resolving the host name can be slow, and is only needed when the routes fail)."""
    for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as sock:
                sock.connect((probe, 9))          # UDP connect sends nothing; it picks a route
                yield sock.getsockname()[0]
        except OSError:
            pass
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None)
    except OSError:
        return
    for info in infos:
        yield str(info[4][0]).split("%")[0]


def local_ip_bytes(now_ms: int | None = None) -> bytes:
    """`UtilAll.getIP` as far as Python can see the interfaces: the first public IPv4 or global
    IPv6, else the first private IPv4, else (as `createFakeIP`) 4 bytes of the current time."""
    private: bytes | None = None
    for text in _candidate_addresses():
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            continue
        if address.version == 4 and _usable_v4(address):
            if not _is_private_v4(address):
                return address.packed
            private = private or address.packed
        elif address.version == 6 and not (address.is_link_local or address.is_loopback or
                                           address.is_unspecified or address.is_site_local or
                                           address.is_private):
            return address.packed
    if private is not None:
        return private
    now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    return struct.pack(">i", _signed(now_ms, 32))


class UniqKeyGenerator:
    """Makes UNIQ_KEYs like one Java producer process: a fixed prefix, then time and counter.

    Every argument is injectable for tests; the defaults are this host, this process, a random
    "class loader hash", the wall clock and the local time zone. Thread-safe.
    """

    def __init__(self, *, ip: str | bytes | None = None, pid: int | None = None,
                 class_loader_hash: int | None = None, clock_ms=None, tz: tzinfo | None = None,
                 counter_start: int = 0):
        if ip is None:
            ip_bytes = local_ip_bytes()
        elif isinstance(ip, bytes):
            ip_bytes = ip
        else:
            ip_bytes = ipaddress.ip_address(ip).packed
        self.ip_bytes = ip_bytes
        self.pid = os.getpid() if pid is None else pid
        self.class_loader_hash = random.SystemRandom().getrandbits(31) \
            if class_loader_hash is None else class_loader_hash
        self.clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self.tz = tz
        self._counter = itertools.count(counter_start)
        self._lock = threading.Lock()

    def next_key(self) -> str:
        with self._lock:
            counter = next(self._counter)
        now_ms = self.clock_ms()
        return encode_uniq_key(self.ip_bytes, self.pid, self.class_loader_hash,
                               time_field(now_ms, self.tz), counter)

    __call__ = next_key
