"""The JSON dialect of the broker's config files (spec §7): fastjson 1.x with PrettyFormat.

Writing (`dumps`) mirrors fastjson's serializers, which the fixtures confirm:

* A map/bean writes `{`, then for each member: `,` between members; before a member with a *string* key a
  line break and one TAB per nesting level; then `"key":value` (no spaces). A member with an *integer*
  key gets no line break and a bare key: `0:5`. After the last member of a non-empty map comes a line
  break, the parent's indentation and `}`. An empty map is `{}`.
  So `{"offsetTable":{"T@G":{0:5,1:12}}}` prints as::

      {
      <TAB>"offsetTable":{
      <TAB><TAB>"T@G":{0:5,1:12
      <TAB><TAB>}
      <TAB>}
      }

* Lists (Java sets/collections) are written inline, `["a","b"]`, with no line breaks; a map inside a
  list is still pretty-printed at the list's nesting level.
* No trailing newline. `true`/`false`/`null`, integers bare. Strings escape `"`, `\\`, the short
  control escapes and other control characters as `\\u00XX`; non-ASCII is written as is.

Python dicts keep insertion order and `dumps` emits that order; callers that model Java beans put the
members in alphabetical order themselves.

Reading (`loads`) accepts standard JSON plus bare (optionally negative) integer keys, returned as `int`.
Quoted keys stay `str`. Any malformed input raises `CorruptDataError(None, position, reason)`.
"""

from __future__ import annotations

import math
from typing import Any

from store.errors import CorruptDataError

MAX_DEPTH = 256          # nesting bound: deeper input is rejected instead of exhausting the stack
MAX_NUMBER_DIGITS = 4000  # below Python's int-from-str limit (4300)
_WHITESPACE = " \t\n\r\f"
_ESCAPES_IN = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPES_OUT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


# ----------------------------------------------------------------------------------------------- reading

class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def fail(self, reason: str, position: int | None = None):
        raise CorruptDataError(None, self.pos if position is None else position, reason)

    def skip_ws(self) -> None:
        text, pos = self.text, self.pos
        while pos < len(text) and text[pos] in _WHITESPACE:
            pos += 1
        self.pos = pos

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self.fail(f"nesting deeper than {MAX_DEPTH}")
        self.skip_ws()
        if self.pos >= len(self.text):
            self.fail("unexpected end of input")
        ch = self.text[self.pos]
        if ch == "{":
            return self.obj(depth)
        if ch == "[":
            return self.array(depth)
        if ch == '"':
            return self.string()
        if ch == "-" or ch.isdigit():
            return self.number()
        for word, result in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return result
        self.fail(f"unexpected character {ch!r}")

    def obj(self, depth: int) -> dict:
        self.pos += 1
        result: dict = {}
        self.skip_ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return result
        while True:
            self.skip_ws()
            if self.text.startswith('"', self.pos):
                key: Any = self.string()
            else:
                start = self.pos
                key = self.number()
                if not isinstance(key, int):
                    self.fail("a bare object key must be an integer", start)
            self.skip_ws()
            if not self.text.startswith(":", self.pos):
                self.fail("expected ':' after an object key")
            self.pos += 1
            result[key] = self.value(depth + 1)
            self.skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("}", self.pos):
                self.pos += 1
                return result
            self.fail("expected ',' or '}' in an object")

    def array(self, depth: int) -> list:
        self.pos += 1
        result: list = []
        self.skip_ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return result
        while True:
            result.append(self.value(depth + 1))
            self.skip_ws()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return result
            self.fail("expected ',' or ']' in an array")

    def string(self) -> str:
        text = self.text
        start = self.pos
        self.pos += 1
        parts: list[str] = []
        while True:
            end = self.pos
            while end < len(text) and text[end] not in '"\\':
                end += 1
            parts.append(text[self.pos:end])
            if end >= len(text):
                self.fail("unterminated string", start)
            self.pos = end + 1
            if text[end] == '"':
                break
            esc = text[self.pos:self.pos + 1]
            if esc in _ESCAPES_IN:
                parts.append(_ESCAPES_IN[esc])
                self.pos += 1
            elif esc == "u":
                digits = text[self.pos + 1:self.pos + 5]
                if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                    self.fail("bad \\u escape")
                parts.append(chr(int(digits, 16)))
                self.pos += 5
            else:
                self.fail(f"bad escape \\{esc}")
        joined = "".join(parts)
        # \uD83D\uDE00 pairs become one character; a lone surrogate is kept as is.
        return joined.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")

    def number(self) -> int | float:
        text, start = self.text, self.pos
        pos = start
        if pos < len(text) and text[pos] == "-":
            pos += 1
        digits_start = pos
        while pos < len(text) and text[pos].isascii() and text[pos].isdigit():
            pos += 1
        if pos == digits_start:
            self.fail("expected a digit", pos)
        is_float = False
        if pos < len(text) and text[pos] == ".":
            is_float = True
            pos += 1
            frac_start = pos
            while pos < len(text) and text[pos].isascii() and text[pos].isdigit():
                pos += 1
            if pos == frac_start:
                self.fail("expected a digit after '.'", pos)
        if pos < len(text) and text[pos] in "eE":
            is_float = True
            pos += 1
            if pos < len(text) and text[pos] in "+-":
                pos += 1
            exp_start = pos
            while pos < len(text) and text[pos].isascii() and text[pos].isdigit():
                pos += 1
            if pos == exp_start:
                self.fail("expected a digit in the exponent", pos)
        if pos - start > MAX_NUMBER_DIGITS:
            self.fail("number too long", start)
        self.pos = pos
        literal = text[start:pos]
        return float(literal) if is_float else int(literal)


def loads(text: str | bytes | bytearray) -> Any:
    """Parse one fastjson document. Bytes are decoded as UTF-8. Raises CorruptDataError."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptDataError(None, exc.start, "not UTF-8") from None
    parser = _Parser(text)
    result = parser.value(0)
    parser.skip_ws()
    if parser.pos != len(text):
        parser.fail("trailing characters after the document")
    return result


# ----------------------------------------------------------------------------------------------- writing

def _dump_string(value: str) -> str:
    out = ['"']
    for ch in value:
        if ch in _ESCAPES_OUT:
            out.append(_ESCAPES_OUT[ch])
        elif ch < " " or ch == "\x7f":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _dump(value: Any, indent: int, out: list[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"nesting deeper than {MAX_DEPTH}")
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no JSON form")
        out.append(repr(value))
    elif isinstance(value, str):
        out.append(_dump_string(value))
    elif isinstance(value, dict):
        out.append("{")
        inner = indent + 1
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            if isinstance(key, str):
                out.append("\n" + "\t" * inner)
                out.append(_dump_string(key))
            elif isinstance(key, int) and not isinstance(key, bool):
                out.append(str(key))
            else:
                raise TypeError(f"map key {key!r} must be str or int")
            out.append(":")
            _dump(item, inner, out, depth + 1)
        if value:
            out.append("\n" + "\t" * indent)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _dump(item, indent, out, depth + 1)
        out.append("]")
    else:
        raise TypeError(f"cannot write {type(value).__name__} as fastjson")


def dumps(obj: Any) -> str:
    """Write `obj` (dict/list/str/int/float/bool/None) in the broker's pretty style, no final newline."""
    out: list[str] = []
    _dump(obj, 0, out, 0)
    return "".join(out)
