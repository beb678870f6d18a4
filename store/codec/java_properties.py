"""`java.util.Properties` text format, as `broker.conf` / `store.properties` use it.

`load(text)` follows `Properties.load`: natural lines end at `\\n`, `\\r` or `\\r\\n`; lines whose first
non-blank character is `#` or `!` are comments; a line ending in an odd number of backslashes continues
on the next line (whose leading blanks are dropped); the key ends at the first unescaped `=`, `:` or
blank; blanks, then at most one `=`/`:`, then blanks separate key and value; escapes `\\t \\n \\r \\f
\\uXXXX` are decoded and a backslash before any other character yields that character. A later duplicate
key wins. A malformed `\\uXXXX` raises ConfigError (Java throws IllegalArgumentException).

`dump(mapping, comments=None)` follows `Properties.store(OutputStream)`: `key=value` lines, with
`\\`, `=`, `:`, `#`, `!`, control characters escaped, spaces escaped in keys and leading spaces in values,
and characters outside printable ASCII written as `\\uXXXX` (so the file is ASCII and any JVM reads it
the same). No date comment is written, so output is reproducible.
"""

from __future__ import annotations

from collections.abc import Mapping

from store.errors import ConfigError

_BLANKS = " \t\f"
_DECODE = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str):
    """Yield logical lines (continuations joined, comments and blank lines dropped)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 1:
                parts.append(line[:-1])
                if i >= len(lines):
                    break
                line = lines[i].lstrip(_BLANKS)
                i += 1
                continue
            parts.append(line)
            break
        yield "".join(parts)


def _unescape(raw: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= len(raw):
            i += 1   # a lone trailing backslash is dropped, as Java does
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2:i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(f"malformed \\uXXXX escape in properties text: {raw[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_DECODE.get(nxt, nxt))
            i += 2
    text = "".join(out)
    # Java strings are UTF-16: a \\uD83D\\uDE00 pair is one character.
    return text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")


def _split(line: str) -> tuple[str, str]:
    i = 0
    key_end = len(line)
    value_start = len(line)
    has_sep = False
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:":
            key_end, value_start, has_sep = i, i + 1, True
            break
        if ch in _BLANKS:
            key_end, value_start = i, i + 1
            break
        i += 1
    j = value_start
    while j < len(line) and line[j] in _BLANKS:
        j += 1
    if not has_sep and j < len(line) and line[j] in "=:":
        j += 1
    while j < len(line) and line[j] in _BLANKS:
        j += 1
    return line[:key_end], line[j:]


def load(text: str) -> dict[str, str]:
    """Parse properties text into an insertion-ordered dict (later duplicates win)."""
    result: dict[str, str] = {}
    for line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        result[_unescape(raw_key)] = _unescape(raw_value)
    return result


def _escape(text: str, *, is_key: bool) -> str:
    out: list[str] = []
    units = text.encode("utf-16-be", "surrogatepass")
    chars = [chr((units[k] << 8) | units[k + 1]) for k in range(0, len(units), 2)]
    for index, ch in enumerate(chars):
        if ch == " ":
            out.append("\\ " if is_key or index == 0 else " ")
        elif ch in "\\=:#!":
            out.append("\\" + ch)
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif " " < ch < "\x7f":
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04X}")
    return "".join(out)


def dump(mapping: Mapping[str, str], comments: str | None = None) -> str:
    """Write `mapping` as properties text, one `key=value` line each, in mapping order."""
    lines = []
    if comments:
        lines.extend("#" + line for line in comments.splitlines())
    for key, value in mapping.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"properties keys and values must be str, got {key!r}={value!r}")
        lines.append(f"{_escape(key, is_key=True)}={_escape(value, is_key=False)}")
    return "".join(line + "\n" for line in lines)
