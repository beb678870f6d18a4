"""Vectorised text of stored socket addresses and offset message ids (spec §2.1 fields 10/12, §3.1).

Host text follows the engine's `MessageRecord`: IPv4 as `a.b.c.d:port`, IPv6 as
`[x:x:x:x:x:x:x:x]:port` with Java's `getHostAddress` groups (lower-case hex, no leading zeros, no `::`
compression). Both are built as a character matrix plus a keep-mask, never one Python string per row.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from store.pipeline.arrowkit import (
    constant_column, decimal_digits, gather_bytes, gather_int, hex_chars, join_columns, string_array, unaligned_view,
)

IPV4_HOST_BYTES = 8
IPV6_HOST_BYTES = 20
# The two upper-case hex characters of every byte value, as one native uint16 (chars in memory order).
_HEX_PAIRS = np.frombuffer(b"".join(b"%02X" % value for value in range(256)), dtype=np.uint16)


def _port_text(ports: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # A stored port is an int; RocketMQ only ever writes 0..65535. Show the unsigned value otherwise.
    return decimal_digits(ports & 0xFFFFFFFF, 10)


def host_text(buf: np.ndarray, host_positions: np.ndarray, is_v6: np.ndarray) -> pa.Array:
    """`ip:port` text of the host field at each position; `is_v6` says which rows use 20-byte fields.

    Hosts repeat (one store host, a few producers): when every row is IPv4, the text is built for the
    distinct 8-byte (address, port) values only and taken for every row.
    """
    n = host_positions.shape[0]
    if n > 64 and not bool(is_v6.any()) and buf.flags.c_contiguous:
        keys = pa.array(unaligned_view(buf, "<u8")[host_positions.astype(np.int64, copy=False)])
        encoded = keys.dictionary_encode()
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        if len(encoded.dictionary) * 4 < n:
            first = np.empty(len(encoded.dictionary), dtype=np.int64)
            first[codes] = np.arange(n, dtype=np.int64)   # some row of each distinct value
            distinct = _host_text_rows(buf, host_positions[first], is_v6[first])
            return distinct.take(pa.array(codes))
    return _host_text_rows(buf, host_positions, is_v6)


def _host_text_rows(buf: np.ndarray, host_positions: np.ndarray, is_v6: np.ndarray) -> pa.Array:
    n = host_positions.shape[0]
    v4_bytes = gather_bytes(buf, host_positions, 4)
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    for octet in range(4):
        parts.append(decimal_digits(v4_bytes[:, octet].astype(np.int64), 3))
        if octet < 3:
            parts.append(constant_column(".", n))
    any_v6 = bool(is_v6.any())
    port_position = host_positions + np.where(is_v6, 16, 4)
    if any_v6:
        v6_parts = _v6_address_columns(buf, host_positions, n)
        parts = [(c, k & ~is_v6[:, None]) for c, k in parts] + [(c, k & is_v6[:, None]) for c, k in v6_parts]
    parts.append(constant_column(":", n))
    parts.append(_port_text(gather_int(buf, port_position, 4)))
    return join_columns(parts)


def _v6_address_columns(buf: np.ndarray, host_positions: np.ndarray, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    raw = gather_bytes(buf, host_positions, 16)
    groups = raw[:, 0::2].astype(np.int64) << 8 | raw[:, 1::2]
    parts = [constant_column("[", n)]
    for g in range(8):
        value = groups[:, g]
        nibbles = np.stack([(value >> shift) & 0xF for shift in (12, 8, 4, 0)], axis=1).astype(np.uint8)
        chars = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)[nibbles]
        keep = value[:, None] >= np.array([0x1000, 0x100, 0x10, 0x0], dtype=np.int64)
        keep[:, -1] = True
        parts.append((chars, keep))
        if g < 7:
            parts.append(constant_column(":", n))
    parts.append(constant_column("]", n))
    return parts


def offset_message_ids(
    buf: np.ndarray, store_host_positions: np.ndarray, is_v6: np.ndarray, phy_offsets: np.ndarray
) -> pa.Array:
    """Upper-case hex of store address + port + phy_offset (32 characters, 56 for IPv6 store hosts)."""
    n = store_host_positions.shape[0]
    if not bool(is_v6.any()) and buf.flags.c_contiguous:
        # All IPv4: 8 bytes of host + 8 of offset -> 32 hex characters, two per byte from a table.
        raw = np.empty((n, 2), dtype=">u8")
        if n:
            raw[:, 0] = unaligned_view(buf, ">u8")[store_host_positions.astype(np.int64, copy=False)]
        raw[:, 1] = phy_offsets.astype(np.int64).view(np.uint64)
        chars = _HEX_PAIRS[raw.view(np.uint8).reshape(n, 16)]
        offsets = np.arange(n + 1, dtype=np.int64) * 32
        return string_array(offsets, chars.view(np.uint8).reshape(-1))
    raw = np.zeros((n, 28), dtype=np.uint8)
    raw[:, :20] = gather_bytes(buf, store_host_positions, 20) if n else raw[:, :20]
    # IPv4 rows: 4 address bytes + 4 port bytes are the first 8 bytes; move the offset right after them.
    offset_bytes = phy_offsets.astype(">i8").view(np.uint8).reshape(n, 8)
    v4 = ~is_v6
    raw[v4, 8:16] = offset_bytes[v4]
    raw[is_v6, 20:28] = offset_bytes[is_v6]
    chars = hex_chars(raw)
    keep = np.ones_like(chars, dtype=bool)
    keep[v4, 32:] = False
    return join_columns([(chars, keep)])
