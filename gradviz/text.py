"""Text from user objects and the outside world that never fails: guarded str()/repr(), lone surrogates escaped."""

from __future__ import annotations

from typing import Any

__all__ = ["clean", "safe_repr", "safe_str", "type_name"]


def clean(text: str) -> str:
    """`text` with lone surrogates (undecodable file names, `'\\udcff'` in a message) written as `\\udcff`.

    Such strings cannot be encoded as UTF-8, so JSON files, DOT sources and terminals would fail on them.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def safe_str(obj: Any) -> str:
    """`str(obj)`, or what Python prints when that raises (`<exception str() failed>`): user code decides what
    `__str__` does, and its failure must not replace the user's own error."""
    try:
        text = str(obj)
    except Exception:
        return "<exception str() failed>" if isinstance(obj, BaseException) else "<str() failed>"
    if not isinstance(text, str):  # a str subclass whose methods misbehave: take its characters only
        return "<str() failed>"
    return clean(str.__str__(text))


def safe_repr(obj: Any) -> str:
    """`repr(obj)`, or `<T object (repr() failed)>` when the object's `__repr__` raises."""
    try:
        text = repr(obj)
    except Exception:
        return f"<{type_name(obj)} object (repr() failed)>"
    if not isinstance(text, str):
        return f"<{type_name(obj)} object (repr() failed)>"
    return clean(str.__str__(text))


def type_name(obj: Any) -> str:
    """The name of `obj`'s class (a metaclass can make `__name__` anything: fall back to `?`)."""
    name = getattr(type(obj), "__name__", None)
    return clean(name) if isinstance(name, str) else "?"
