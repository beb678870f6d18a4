"""Showing message bodies safely: as text in a chosen charset, base64 or hex, cut to a size limit.

The result is plain text for st.text / st.code; nothing here is ever rendered as HTML or markdown.
"""

from __future__ import annotations

import base64
import codecs
from dataclasses import dataclass

MODES = ("auto", "text", "base64", "hex")
CHARSETS = ("utf-8", "latin-1", "gbk", "utf-16", "ascii")
DEFAULT_LIMIT_BYTES = 4096
MAX_LIMIT_BYTES = 1 << 20


@dataclass(frozen=True)
class RenderedBody:
    text: str
    mode: str              # the mode actually used
    shown_bytes: int
    total_bytes: int
    note: str              # a sentence for the page ("" when nothing to say)

    @property
    def truncated(self) -> bool:
        return self.shown_bytes < self.total_bytes


def looks_textual(body: bytes, charset: str = "utf-8") -> bool:
    """Decodes cleanly and has no control characters other than tab/newline/carriage return."""
    try:
        text = body.decode(charset)
    except (UnicodeDecodeError, LookupError):
        return False
    return all(ch >= " " or ch in "\t\n\r" for ch in text)


def render_body(body: bytes, mode: str = "auto", charset: str = "utf-8",
                limit_bytes: int = DEFAULT_LIMIT_BYTES) -> RenderedBody:
    """Text for display; `auto` picks text when the body decodes cleanly, else hex."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    try:
        codecs.lookup(charset)
    except LookupError:
        raise ValueError(f"unknown charset {charset!r}") from None
    limit_bytes = max(1, min(int(limit_bytes), MAX_LIMIT_BYTES))
    shown = body[:limit_bytes]
    used = mode
    if mode == "auto":
        used = "text" if looks_textual(body[:limit_bytes], charset) or not body else "hex"
    if used == "text":
        text = shown.decode(charset, errors="replace")
        text = "".join(ch if ch >= " " or ch in "\t\n\r" else "\N{REPLACEMENT CHARACTER}" for ch in text)
    elif used == "base64":
        text = base64.b64encode(shown).decode("ascii")
    else:
        text = hex_dump(shown)
    note = ""
    if len(body) > len(shown):
        note = f"showing the first {len(shown):,} of {len(body):,} bytes"
    if mode == "auto" and used == "hex" and body:
        note = ("binary body shown as hex" + (f"; {note}" if note else ""))
    return RenderedBody(text, used, len(shown), len(body), note)


def hex_dump(data: bytes, width: int = 16) -> str:
    lines = []
    for start in range(0, len(data), width):
        chunk = data[start:start + width]
        ascii_part = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}  {chunk.hex(' '):<{width * 3}} {ascii_part}")
    return "\n".join(lines)


def preview(body: bytes, limit_chars: int = 60) -> str:
    """A one-line preview for tables (text if textual, else hex), never longer than `limit_chars`."""
    if looks_textual(body[:limit_chars * 4]):
        text = body[:limit_chars * 4].decode("utf-8", errors="replace").replace("\n", " ")
    else:
        text = "0x" + body[:limit_chars // 2].hex()
    return text[:limit_chars] + ("…" if len(text) > limit_chars or len(body) > limit_chars * 4 else "")
