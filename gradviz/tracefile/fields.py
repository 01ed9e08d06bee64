"""The trace file's layout, shared by its writer (write.py) and its reader (decode.py): which versions are
read, the fields each requires, the record tables, and what a dataclass field's annotation says of its JSON."""

from __future__ import annotations

import types
import typing
from dataclasses import MISSING, fields
from typing import Any

from ..model import (
    Event,
    NodeRecord,
    OpRecord,
    StorageRecord,
    TensorRecord,
    Trace,
    VersionCounterRecord,
)

#: Format versions this gradviz reads. Version 1 (one JSON object per record) is still read; only 2 is written.
READABLE_VERSIONS = (1, 2)

#: The top-level fields every file of a version holds (docs/trace-format.md marks the others optional): a file without
#: one is refused, not read as an empty trace that has "no problems". Version 1 writers before the analysis and the
#: notebook support left out `internal_errors` and `file_labels`, so they stay optional there.
REQUIRED_FIELDS = {
    1: ("torch_version", "script", "tensors", "storages", "version_counters", "nodes", "ops", "events", "exception",
        "sources"),
    2: ("torch_version", "script", "locations", "tensors", "storages", "version_counters", "nodes", "ops", "events",
        "exception", "sources", "internal_errors"),
}  # fmt: skip

#: Extra top-level fields `gradviz render -o x.json` adds; load checks their shape and otherwise ignores them.
EXTRA_FIELDS = ("view", "findings")

# which list a record's list of records lives in, in document order
TABLES: tuple[tuple[str, type], ...] = (
    ("tensors", TensorRecord),
    ("storages", StorageRecord),
    ("version_counters", VersionCounterRecord),
    ("nodes", NodeRecord),
    ("ops", OpRecord),
    ("events", Event),
)
# Trace fields written by name above; any other (plain: int, str, bool, lists and dicts of them) is written and
# read as it is, checked against its annotation, so adding a field to Trace needs no change here
NAMED = {
    "torch_version", "script", *(name for name, _ in TABLES), "exception", "sources", "file_labels",
    "internal_errors",
}  # fmt: skip
NOT_SAVED = {"error"}  # the live exception: never written


def plain_fields() -> list[tuple[str, Any]]:
    return [(n, h) for n, h in field_hints(Trace) if n not in NAMED and n not in NOT_SAVED]


TOP_LEVEL = {"format", "format_version", "locations", *NAMED, *EXTRA_FIELDS}


class Missing:
    """Stands for a field a version-1 record left out (told apart from null)."""

    def __repr__(self) -> str:
        return "missing"


ABSENT = Missing()


_HINTS: dict[type, list[tuple[str, Any]]] = {}
# columns whose few distinct values repeat in every record: one string object each, not one per record
INTERNED = {"dtype", "device", "origin", "op", "name", "module", "created_by", "file"}


def field_hints(cls: type) -> list[tuple[str, Any]]:
    hints = _HINTS.get(cls)
    if hints is None:
        types_of = typing.get_type_hints(cls)
        hints = _HINTS[cls] = [(f.name, types_of[f.name]) for f in fields(cls) if f.init]
    return hints


def field_default(cls: type, name: str) -> Any:
    for f in fields(cls):
        if f.name == name:
            if f.default is not MISSING:
                return f.default
            if f.default_factory is not MISSING:
                return f.default_factory
    return MISSING


def is_optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def strip_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return options[0] if len(options) == 1 else hint
    return hint


def nested_type(hint: Any) -> type | None:
    """The small record type of a `list[SavedTensorRecord]`-like field, else None."""
    base = strip_optional(hint)
    if typing.get_origin(base) is list and is_record(typing.get_args(base)[0]):
        return typing.cast(type, typing.get_args(base)[0])  # (is_record: a class)
    return None


def is_record(hint: Any) -> bool:
    return isinstance(hint, type) and hasattr(hint, "__dataclass_fields__")


def quoted(names: list[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def size_text(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n} bytes"



# ---------------------------------------------------------------- the Trace methods' bodies (model.Persistence)
