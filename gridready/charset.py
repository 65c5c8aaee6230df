"""What user text may look like: digits are ASCII 0-9, and a character that cannot be seen is shown escaped.

Python's `int('１２')` is 12 and its (and pydantic's) `\\d` matches every Unicode digit, so a number or a pattern
check that does not say ASCII accepts fullwidth or Arabic-Indic digits that no tool downstream reads alike. Error
lines name keys as they are; a key holding a zero-width space or another format or control character would read
like a valid one, so such characters are written as escapes (`\\u200b`).
"""

from __future__ import annotations

import re
import unicodedata

# Unicode categories nobody sees: controls, format characters (zero-width space and joiners, bidi overrides, BOM),
# surrogates, private use, unassigned, line and paragraph separators, and spaces other than the ASCII one.
_UNSEEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
ASCII_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
ASCII_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


def _unseen(char: str) -> bool:
    category = unicodedata.category(char)
    return category in _UNSEEN or (category == "Zs" and char != " ")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str, keep: str = "") -> str:
    """`text` with every character that cannot be seen (but those in `keep`) written as an escape (`a\\u200bb`);
    the rest as it is."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(_escape(c) if _unseen(c) and c not in keep else c for c in text)


def has_foreign_digit(text: str) -> bool:
    """A decimal digit other than ASCII 0-9 (fullwidth `１`, Arabic-Indic `٣`, ...)."""
    return any(not c.isascii() and unicodedata.category(c) == "Nd" for c in text)


def ascii_int(text: str) -> int:
    """int() of ASCII digits only (an optional sign); ValueError otherwise, `int('１２')` included."""
    if not ASCII_INT.fullmatch(text.strip()):
        raise ValueError(f"not a whole number in ASCII digits: {visible(text)!r}")
    return int(text)


def ascii_float(text: str) -> float:
    """float() of an ASCII decimal number only; ValueError otherwise (`float('１.５')`, `nan`, `inf` included)."""
    if not ASCII_NUMBER.fullmatch(text.strip()):
        raise ValueError(f"not a number in ASCII digits: {visible(text)!r}")
    return float(text)
