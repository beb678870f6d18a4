"""Host fields of a record and the offset message id (spec §2.1 fields 10/12, §3.1, vectors §14.8).

Host field (BORNHOST / STOREHOST), chosen by the sysflag bits 0x10 / 0x20:

| field   | offset | size_bytes       | meaning                         |
|---------|--------|------------------|---------------------------------|
| address | 0      | 4 (v4) / 16 (v6) | IP address bytes, network order |
| port    | 4 / 16 | 4                | signed int, big-endian          |

Offset message id (`MessageDecoder.createMessageId`), rendered as upper-case hex:

| field      | offset | size_bytes | meaning                      |
|------------|--------|------------|------------------------------|
| address    | 0      | 4 / 16     | store host address           |
| port       | 4 / 16 | 4          | store host port              |
| phy_offset | 8 / 20 | 8          | PHYSICALOFFSET of the record |

Host strings are "a.b.c.d:port" and "[a:b:c:d:e:f:g:h]:port": IPv6 groups in lower-case hex without
leading zeros and without `::` compression, as Java's `Inet6Address.getHostAddress` prints them.
An IPv4-mapped IPv6 address stays in the IPv6 form, so a decoded record re-encodes byte for byte.
"""

from __future__ import annotations

import ipaddress
import re
import struct
from functools import lru_cache

from store.errors import CorruptDataError

IPV4_HOST_SIZE = 8
IPV6_HOST_SIZE = 20
IPV4_MSG_ID_LENGTH = 32        # hex characters
IPV6_MSG_ID_LENGTH = 56

_PORT = struct.Struct(">i")
_OFFSET = struct.Struct(">q")
_IPV6_GROUPS = struct.Struct(">8H")
_V4_HOST = struct.Struct(">4si")
_V6_HOST = struct.Struct(">16si")
assert _PORT.size == 4 and _OFFSET.size == 8 and _IPV6_GROUPS.size == 16
assert _V4_HOST.size == IPV4_HOST_SIZE and _V6_HOST.size == IPV6_HOST_SIZE
assert IPV4_MSG_ID_LENGTH == 2 * (IPV4_HOST_SIZE + 8)
assert IPV6_MSG_ID_LENGTH == 2 * (IPV6_HOST_SIZE + 8)

_PORT_TEXT = re.compile(r"-?[0-9]{1,10}", re.ASCII)
_HEX = re.compile(r"[0-9A-Fa-f]*", re.ASCII)


class MessageIdError(CorruptDataError, ValueError):
    """A message id that is not 32 or 56 hex characters; both a CorruptDataError and a ValueError."""


@lru_cache(maxsize=1024)
def encode_host(host: str) -> bytes:
    """The 8-byte (IPv4) or 20-byte (IPv6) host field for "ip:port" / "[ipv6]:port".

    The port may be any 32-bit signed int, because the field is a Java int and decoded records must
    re-encode unchanged. Raises ValueError for anything else (host names are not resolved).
    """
    if not isinstance(host, str):
        raise ValueError(f"host must be a string 'ip:port', not {type(host).__name__}")
    address_text, colon, port_text = host.rpartition(":")
    if not colon or not _PORT_TEXT.fullmatch(port_text):
        raise ValueError(f"host {host!r} is not 'ip:port' with a numeric port")
    port = int(port_text)
    if not -(2**31) <= port < 2**31:
        raise ValueError(f"port {port} of host {host!r} does not fit a 32-bit int")
    if address_text.startswith("[") and address_text.endswith("]"):
        try:
            address = ipaddress.IPv6Address(address_text[1:-1])
        except ValueError:
            raise ValueError(f"host {host!r} has a bad IPv6 address") from None
        return _V6_HOST.pack(address.packed, port)
    if ":" in address_text:
        raise ValueError(f"host {host!r}: write IPv6 hosts as '[address]:port'")
    try:
        address4 = ipaddress.IPv4Address(address_text)
    except ValueError:
        raise ValueError(f"host {host!r} has a bad IPv4 address") from None
    return _V4_HOST.pack(address4.packed, port)


@lru_cache(maxsize=1024)
def host_to_string(field: bytes) -> str:
    """Render a whole 8- or 20-byte host field (address + port) as "ip:port" / "[ipv6]:port"."""
    if len(field) == IPV4_HOST_SIZE:
        address, port = _V4_HOST.unpack(field)
        return f"{address[0]}.{address[1]}.{address[2]}.{address[3]}:{port}"
    assert len(field) == IPV6_HOST_SIZE, "a host field is 8 or 20 bytes"
    address, port = _V6_HOST.unpack(field)
    groups = ":".join([format(group, "x") for group in _IPV6_GROUPS.unpack(address)])
    return f"[{groups}]:{port}"


def decode_host(buf, position: int, v6: bool) -> str:
    """Read the host field at `position` of `buf` (IPv6 when `v6`); CorruptDataError when torn."""
    size = IPV6_HOST_SIZE if v6 else IPV4_HOST_SIZE
    if position < 0 or position + size > len(buf):
        raise CorruptDataError(None, position, f"host field of {size} bytes runs past the buffer")
    return host_to_string(bytes(buf[position:position + size]))


@lru_cache(maxsize=256)
def _host_hex(store_host: str) -> str:
    return encode_host(store_host).hex().upper()


def msg_id_prefix(store_host: str) -> str:
    """The host part of an offset msgId (upper-case hex); append `f"{phy_offset:016X}"`."""
    return _host_hex(store_host)


def create_message_id(store_host: str, phy_offset: int) -> str:
    """The offset msgId: store host address + port + phy_offset, as upper-case hex."""
    if 0 <= phy_offset < 1 << 63:
        return _host_hex(store_host) + f"{phy_offset:016X}"
    return _host_hex(store_host) + _OFFSET.pack(phy_offset).hex().upper()


def decode_message_id(msg_id: str) -> tuple[str, int]:
    """(store host string, phy_offset) of an offset msgId; MessageIdError (a CorruptDataError and a
    ValueError) when it is not 32 or 56 hex characters."""
    if not isinstance(msg_id, str) or len(msg_id) not in (IPV4_MSG_ID_LENGTH, IPV6_MSG_ID_LENGTH):
        length = len(msg_id) if isinstance(msg_id, str) else -1
        raise MessageIdError(None, 0, f"a message id has 32 or 56 hex characters, not {length}")
    if not _HEX.fullmatch(msg_id):
        raise MessageIdError(None, 0, f"message id {msg_id!r} is not hexadecimal")
    raw = bytes.fromhex(msg_id)
    host_size = len(raw) - 8
    phy_offset = _OFFSET.unpack_from(raw, host_size)[0]
    return host_to_string(raw[:host_size]), phy_offset
