"""Text from user objects and the outside world that never fails: guarded str()/repr(), lone surrogates escaped."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["clean", "for_terminal", "in_thread", "safe_repr", "safe_str", "type_name"]

# C0 and C1 control characters but tab and newline, DEL, lone surrogates: never written raw to a terminal or a log
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# what a CI runner reads as a command: `::error ...::` at a line's start (after blanks), `##[` anywhere
_COMMAND = re.compile(r"^([ \t]*):(?=:)|(#)(?=#\[)", re.M)


def clean(text: str) -> str:
    """`text` with lone surrogates (undecodable file names, `'\\udcff'` in a message) written as `\\udcff`.

    Such strings cannot be encoded as UTF-8, so JSON files, DOT sources and terminals would fail on them.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def for_terminal(text: str) -> str:
    """`text` as it may reach a terminal or a CI log: control characters (ESC...) as `\\x1b`, an undecodable file
    name's bytes as `\\xfe` (surrogate escapes), and what GitHub Actions would run as a workflow command (`::error`
    at a line's start, `##[`) with its first character written `\\x3a` / `\\x23`. Tabs and newlines stay."""
    text = _UNSAFE.sub(_escape_character, text)
    return _COMMAND.sub(lambda m: m.group(1) + "\\x3a" if m.group(2) is None else "\\x23", text)


def _escape_character(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for an undecodable byte: show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def safe_str(obj: Any) -> str:
    """`str(obj)`, or what Python prints when that raises (`<exception str() failed>`): user code decides what
    `__str__` does, and its failure must not replace the user's own error."""
    try:
        text = str(obj)
    except Exception:  # noqa: BLE001 - a user's __str__ may raise anything: this function must not
        return "<exception str() failed>" if isinstance(obj, BaseException) else "<str() failed>"
    if not isinstance(text, str):  # a str subclass whose methods misbehave: take its characters only
        return "<str() failed>"
    return clean(str.__str__(text))


def safe_repr(obj: Any) -> str:
    """`repr(obj)`, or `<T object (repr() failed)>` when the object's `__repr__` raises."""
    try:
        text = repr(obj)
    except Exception:  # noqa: BLE001 - a user's __repr__ may raise anything: this function must not
        return f"<{type_name(obj)} object (repr() failed)>"
    if not isinstance(text, str):
        return f"<{type_name(obj)} object (repr() failed)>"
    return clean(str.__str__(text))


def type_name(obj: Any) -> str:
    """The name of `obj`'s class (a metaclass can make `__name__` anything: fall back to `?`)."""
    name = getattr(type(obj), "__name__", None)
    return clean(name) if isinstance(name, str) else "?"


def in_thread(name: str) -> str:
    """`in thread 'worker#2'`: how every view names one of the program's threads (the tracing thread is unnamed)."""
    return f"in thread {name!r}"
