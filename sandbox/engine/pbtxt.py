"""A stdlib reader of protobuf text format, as Triton's config.pbtxt uses it (no protobuf on sandbox hosts).

Without the schema every field maps to a LIST of its values, repeated or not; a message value is a dict of the
same kind. Grammar as protobuf's text format (https://protobuf.dev/reference/protobuf/textformat-spec/):
`name: value`, `name { ... }` / `name: { ... }` / `name < ... >`, lists `name: [a, b]`, optional `,`/`;`
separators, `#` comments, adjacent string literals concatenated, C escapes in strings. Enum values stay the
identifier (e.g. "TYPE_FP32"); true/false become bool. A syntax error raises ValueError("line:col: ...").
"""

from __future__ import annotations

import re
from typing import Any

Message = dict[str, list[Any]]

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\n\f\v]+|\#[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<num>-?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?)(?![\w.]))
  | (?P<ident>-?[A-Za-z_][\w.]*)
  | (?P<sym>[{}<>\[\]:,;])
""", re.VERBOSE)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "\\": "\\", "'": "'",
            '"': '"', "?": "?"}
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)")
_CLOSE = {"{": "}", "<": ">"}


def _unescape(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] in "xuU":
            return chr(int(e[1:], 16))
        if e[0].isdigit():
            return chr(int(e, 8))
        if e in _ESCAPES:
            return _ESCAPES[e]
        raise ValueError(f"invalid escape \\{e}")

    # octal/hex escapes are bytes in protobuf: decode the result as UTF-8 where it forms valid sequences
    text = _ESCAPE.sub(one, body)
    try:
        return text.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return text


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks: list[tuple[str, str, int]] = []  # (kind, text, offset)
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise self.error(pos, f"unexpected character {text[pos]!r}")
            if m.lastgroup != "ws":
                self.toks.append((m.lastgroup or "", m.group(), pos))
            pos = m.end()
        self.i = 0

    def error(self, offset: int, msg: str) -> ValueError:
        line = self.text.count("\n", 0, offset) + 1
        col = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        return ValueError(f"{line}:{col}: {msg}")

    def peek(self) -> tuple[str, str, int]:
        return self.toks[self.i] if self.i < len(self.toks) else ("eof", "", len(self.text))

    def take(self, sym: str | None = None) -> tuple[str, str, int]:
        tok = self.peek()
        if sym is not None and tok[1] != sym:
            raise self.error(tok[2], f"expected '{sym}', got {tok[1] or 'end of input'!r}")
        self.i += 1
        return tok

    def message(self, close: str | None) -> Message:
        msg: Message = {}
        while True:
            kind, text, pos = self.peek()
            if close is not None and text == close and kind == "sym":
                self.take()
                return msg
            if kind == "eof":
                if close is None:
                    return msg
                raise self.error(pos, f"expected '{close}', got end of input")
            if kind != "ident" or text.startswith("-"):
                raise self.error(pos, f"expected a field name, got {text!r}")
            self.take()
            colon = self.peek()[1] == ":"
            if colon:
                self.take()
            msg.setdefault(text, []).extend(self.values(colon))
            if self.peek()[1] in (",", ";"):
                self.take()

    def values(self, colon: bool) -> list[Any]:
        if self.peek()[1] != "[":
            return [self.value(colon)]
        self.take("[")
        out: list[Any] = []
        while self.peek()[1] != "]":
            out.append(self.value(colon))
            if self.peek()[1] != ",":
                break
            self.take(",")
        self.take("]")
        return out

    def value(self, colon: bool) -> Any:
        kind, text, pos = self.peek()
        if text in _CLOSE and kind == "sym":
            self.take()
            return self.message(_CLOSE[text])
        if not colon:
            raise self.error(pos, f"expected ':' or '{{', got {text or 'end of input'!r}")
        self.take()
        if kind == "str":
            parts = [text]
            while self.peek()[0] == "str":  # adjacent literals concatenate
                parts.append(self.take()[1])
            try:
                return "".join(_unescape(p[1:-1]) for p in parts)
            except ValueError as err:
                raise self.error(pos, str(err)) from None
        if kind == "num":
            return _number(text)
        if kind == "ident":
            low = text.lower()
            if text in ("true", "True"):
                return True
            if text in ("false", "False"):
                return False
            if low.lstrip("-") in ("inf", "infinity", "nan"):
                return float(low)
            return text
        raise self.error(pos, f"expected a value, got {text or 'end of input'!r}")


def _number(text: str) -> int | float:
    body = text.lstrip("-")
    sign = -1 if text.startswith("-") else 1
    if body[:2].lower() == "0x":
        return sign * int(body, 16)
    if re.fullmatch(r"0[0-7]+", body):
        return sign * int(body, 8)
    if re.fullmatch(r"\d+", body):
        return sign * int(body)
    return float(text.rstrip("fF"))


def parse(text: str) -> Message:
    """The top-level message of a protobuf text document."""
    return _Parser(text).message(None)


# -- accessors ---------------------------------------------------------------------------------------------------
def first(msg: Message, field: str, default: Any = None) -> Any:
    """The field's last value (protobuf: a singular field given twice keeps the last), or default."""
    vals = msg.get(field)
    return vals[-1] if vals else default


def values(msg: Message, field: str) -> list[Any]:
    return list(msg.get(field, []))


def sub(msg: Message, field: str) -> Message:
    """A singular message field ({} when absent)."""
    v = first(msg, field, {})
    return v if isinstance(v, dict) else {}


def has(msg: Message, field: str) -> bool:
    return bool(msg.get(field))


def string_map(msg: Message, field: str) -> dict[str, Any]:
    """A map field of {key, value} entries, e.g. parameters { key: "x" value { string_value: "y" } }."""
    out: dict[str, Any] = {}
    for entry in values(msg, field):
        if isinstance(entry, dict):
            out[str(first(entry, "key", ""))] = first(entry, "value")
    return out
