"""Reading a trace file's document back into a Trace: every column decoded and checked against its record's
annotation (fields.py), format version 1's one-object-per-record layout included; a file is refused whole,
naming what is wrong and where, never half read."""

from __future__ import annotations

import enum
import itertools
import re
import sys
import typing
from collections.abc import Callable
from dataclasses import MISSING
from typing import Any

from ..model import (
    FORMAT_NAME,
    ExceptionRecord,
    Location,
    Trace,
)
from .checks import (
    check as _check,
    check_event_data,
    check_extras,
    check_references,
    describe as _describe,
    is_bool as _is_bool,
    is_int as _is_int,
    is_json_plain,
    is_str as _is_str,
    short as _short,
)
from .fields import (
    ABSENT,
    INTERNED,
    READABLE_VERSIONS,
    REQUIRED_FIELDS,
    TABLES,
    TOP_LEVEL,
    field_default,
    field_hints,
    is_optional,
    is_record,
    nested_type,
    plain_fields,
    quoted,
    strip_optional,
)


def from_document(data: Any) -> Trace:
    """Build a Trace from a parsed document of any readable version; ValueError naming the first bad field.

    Consumes `data`: its lists of records are dropped from it as they are built."""
    _check(isinstance(data, dict), "top level must be a JSON object")
    if "format" not in data and isinstance(data.get("trace"), dict) and set(data) <= {"view", "trace", "findings"}:
        data = data["trace"]  # `gradviz render -o x.json` before format 2 wrapped the trace: {view, trace, findings}
    version = _check_top_level(data)
    locations, tables, raw_exception = _tables(data, version)
    built = {}
    for name, cls in TABLES:
        built[name] = _build(cls, tables.pop(name), name, locations)
        data.pop(name, None)  # the columns are records now: let them go, so the peak is not document + records
    exception = None
    if raw_exception is not None:
        exception = _build_one(ExceptionRecord, raw_exception, "exception", locations)
    trace = Trace(
        tensors=_unique(built["tensors"], "tensors"),
        storages=_unique(built["storages"], "storages"),
        version_counters=_unique(built["version_counters"], "version_counters"),
        nodes=_unique(built["nodes"], "nodes"),
        ops=built["ops"],
        events=built["events"],
        exception=exception,
        script=data.get("script"),
        sources=_str_dict(data.get("sources", {}), "sources"),
        file_labels=_str_dict(data.get("file_labels", {}), "file_labels"),
        torch_version=data.get("torch_version"),
        internal_errors=_str_list(data.get("internal_errors", []), "internal_errors"),
        **{name: _plain_value(data[name], hint, name) for name, hint in plain_fields() if name in data},
    )
    check_references(trace)
    check_event_data(trace)
    return trace


def _check_top_level(data: dict[str, Any]) -> int:
    """The document's format version, once its name, version and top-level fields are known good."""
    _check(data.get("format") == FORMAT_NAME, f"'format' must be {FORMAT_NAME!r}, got {_short(data.get('format'))}")
    _check("format_version" in data, "'format_version' is missing")
    version = data["format_version"]
    readable = ", ".join(map(str, READABLE_VERSIONS))
    newer = type(version) is int and version > max(READABLE_VERSIONS)
    _check(
        type(version) is int and version in READABLE_VERSIONS,
        f"unsupported format_version {_short(version)} (this gradviz reads versions {readable}"
        f"{'; a newer gradviz wrote this file' if newer else ''})",
    )
    missing = [name for name in REQUIRED_FIELDS[version] if name not in data]
    _check(not missing, f"{quoted(missing)} {'is' if len(missing) == 1 else 'are'} missing "
                        f"(required in format version {version}; docs/trace-format.md lists the optional fields)")
    unknown = set(data) - TOP_LEVEL - {name for name, _ in plain_fields()}
    _check(not unknown, f"unknown field(s) {sorted(unknown)} at the top level")
    for key in ("torch_version", "script"):
        _check(data.get(key) is None or isinstance(data[key], str), f"'{key}' must be a string or null")
    check_extras(data)
    return int(version)


def _tables(data: dict[str, Any], version: int) -> tuple[list[Location], dict[str, Any], Any]:
    """The document's locations, its tables as columns (format 1's lists of records turned into columns) and its
    exception record, still raw."""
    raw_exception = data.get("exception")
    if version == 1:
        locations: list[Location] = []
        tables = {name: _v1_columns(cls, data.get(name, []), name, locations) for name, cls in TABLES}
        if isinstance(raw_exception, dict) and isinstance(raw_exception.get("location"), dict):
            where = _v1_location(raw_exception["location"], "exception.location", locations)
            raw_exception = dict(raw_exception, location=where)
        return locations, tables, raw_exception
    locations = _locations(data["locations"])
    tables = {}
    for name, _ in TABLES:
        raw = data.get(name, {})
        _check(isinstance(raw, dict), f"'{name}' must be an object of columns, got {_describe(raw)}")
        tables[name] = raw
    return locations, tables, raw_exception


# ---------------------------------------------------------------------------------------------- building records
def _build(cls: type, columns: dict[str, Any], table: str, locations: list[Location]) -> list[Any]:
    hints = field_hints(cls)
    known = {name for name, _ in hints}
    unknown = set(columns) - known
    _check(not unknown, f"'{table}' has unknown field(s) {sorted(unknown)}")
    length: int | None = None
    for name, values in columns.items():
        if not isinstance(values, list):
            raise ValueError(f"{table}.{name} must be a list (one value per record), got {_describe(values)}")
        if length is None:
            length = len(values)
        _check(len(values) == length, f"{table}.{name} holds {len(values)} values, the other fields {length}")
    length = length or 0
    args: list[list[Any]] = []
    for name, hint in hints:
        if name in columns:
            args.append(_decode_column(columns[name], hint, table, name, locations))
        else:
            default = field_default(cls, name)
            _check(default is not MISSING or length == 0, f"{table}.{name} is missing")
            args.append([default() if callable(default) else default for _ in range(length)])
    return list(map(cls, *args)) if args else []


def _build_one(cls: type, raw: Any, where: str, locations: list[Location]) -> Any:
    _check(isinstance(raw, dict), f"{where} must be an object, got {_describe(raw)}")
    hints = dict(field_hints(cls))
    unknown = set(raw) - set(hints)
    _check(not unknown, f"{where} has unknown field(s) {sorted(unknown)}")
    columns = {name: [value] for name, value in raw.items()}
    if not columns:  # an empty object: a record of defaults, if every field has one
        missing = [name for name in hints if field_default(cls, name) is MISSING]
        _check(not missing, f"{where}.{missing[0] if missing else ''} is missing")
        return cls()
    return _build(cls, columns, where, locations)[0]


_NONE = type(None)


class _Column:
    """One column being decoded: its values, whether they may be null, and how to name a bad one."""

    def __init__(self, values: list[Any], optional: bool, table: str, name: str) -> None:
        self.values = values
        self.optional = optional
        self.where = f"{table}[{{}}].{name}"
        self.allowed_none = {_NONE} if optional else set()

    def each(self, ok: Callable[[Any], bool], what: str) -> None:
        """ValueError naming the first value neither null (where allowed) nor `ok`."""
        for i, v in enumerate(self.values):
            if not ((self.optional and v is None) or ok(v)):
                raise ValueError(f"{self.where.format(i)} {what}, got {_describe(v)}")

    def types_are(self, *kinds: type) -> bool:
        return set(map(type, self.values)) <= {*kinds, *self.allowed_none}


def _decode_column(values: list[Any], hint: Any, table: str, name: str, locations: list[Location]) -> list[Any]:
    """Check one column against its field's type and build the typed values; ValueError naming the first bad one.

    Each check first looks at the set of value types (one pass in C), and walks the values one by one only to
    name the bad one: loading a long trace is dominated by these checks."""
    base = strip_optional(hint)
    column = _Column(values, is_optional(hint), table, name)
    if base is str:
        if not column.types_are(str):
            column.each(_is_str, "must be a string")
        if name in INTERNED:  # a few distinct values repeated in every record: one string object each
            return [v if v is None else sys.intern(v) for v in values] if column.optional else list(map(sys.intern, values))
        return values
    if base is int:
        if not column.types_are(int):
            column.each(_is_int, "must be an integer")
        return values
    if base is bool:
        if not column.types_are(bool):
            column.each(_is_bool, "must be true or false")
        return values
    if base is Location:
        return _location_column(column, locations)
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return _enum_column(column, base)
    origin = typing.get_origin(base)
    if origin is tuple:  # byte ranges: [start, stop)
        column.each(lambda v: isinstance(v, list) and len(v) == 2 and _is_int(v[0]) and _is_int(v[1]) and 0 <= v[0] <= v[1],
                    "must be a list of 2 values [start, stop) with 0 <= start <= stop")  # fmt: skip
        return [None if v is None else (v[0], v[1]) for v in values]
    if origin is list:
        (item,) = typing.get_args(base)
        if is_record(item):
            return _nested_column(item, values, table, name, locations)
        return _list_column(column, item)
    if origin is dict or typing.is_typeddict(base):  # Event.data: kind-specific, checked once the trace is built
        if not column.types_are(dict):
            column.each(lambda v: isinstance(v, dict), "must be an object")
        return values
    raise ValueError(f"{table}.{name}: cannot read a value of type {hint!r}")  # a field added without a reader


def _location_column(column: _Column, locations: list[Location]) -> list[Location | None]:
    """Indexes into the document's table of locations, as the Location records they name."""
    values, count = column.values, len(locations)
    present = [v for v in values if v is not None] if column.optional else values
    if not (column.types_are(int) and (not present or (min(present) >= 0 and max(present) < count))):
        column.each(lambda v: _is_int(v) and 0 <= v < count, f"must be an index into 'locations' (0 to {count - 1})")
    return [None if v is None else locations[v] for v in values] if column.optional else [locations[v] for v in values]


def _enum_column(column: _Column, kind: type[enum.Enum]) -> list[Any]:
    choices = {m.value: m for m in kind}
    for i, v in enumerate(column.values):
        if not (column.optional and v is None) and (not isinstance(v, str) or v not in choices):
            raise ValueError(f"{column.where.format(i)} must be one of {', '.join(map(repr, choices))}, got {_short(v)}")
    return [None if v is None else choices[v] for v in column.values]


def _list_column(column: _Column, item: Any) -> list[Any]:
    """Lists of plain values (ids, sizes), each item of the item's type."""
    values = column.values
    if not column.types_are(list):
        column.each(lambda v: isinstance(v, list), "must be a list")
    item_types = {strip_optional(item)} | ({_NONE} if is_optional(item) else set())
    if not set(map(type, itertools.chain.from_iterable(values))) <= item_types:
        for i, v in enumerate(values):
            for j, x in enumerate(v):
                if type(x) not in item_types:
                    raise ValueError(f"{column.where.format(i)}[{j}] has the wrong type ({_describe(x)})")
    return values


def _nested_column(cls: type, values: list[Any], table: str, name: str, locations: list[Location]) -> list[Any]:
    """A column whose values are lists of small records (saved tensors, version changes), each stored as
    [field, field, ...]: all items checked and built at once, column by column, then handed back per record."""
    hints = field_hints(cls)
    width = len(hints)
    defaults = [field_default(cls, n) for n, _ in hints]
    # trailing fields with a default may be left out (a file written before the field existed)
    required = max((k + 1 for k, d in enumerate(defaults) if d is MISSING), default=0)
    items: list[Any] = []
    counts: list[int] = []
    for i, value in enumerate(values):
        if not isinstance(value, list):
            raise ValueError(f"{table}[{i}].{name} must be a list, got {_describe(value)}")
        for j, item in enumerate(value):
            if not (isinstance(item, list) and required <= len(item) <= width):
                raise ValueError(
                    f"{table}[{i}].{name}[{j}] must be a list of {width} values "
                    f"({', '.join(n for n, _ in hints)}), got {_short(item)}"
                )
            if len(item) < width:
                value[j] = item + defaults[len(item) :]
        items.extend(value)
        counts.append(len(value))
    columns = [list(column) for column in zip(*items)] if items else [[] for _ in hints]
    try:
        built = _build(cls, {n: c for (n, _), c in zip(hints, columns)}, f"{table}.{name}", locations)
    except ValueError as exc:  # name the record: "nodes[3].saved[1].tensor", not the flat item index
        raise ValueError(_locate(str(exc), f"{table}.{name}", counts, f"{table}[{{}}].{name}[{{}}]")) from None
    out, start = [], 0
    for count in counts:
        out.append(built[start : start + count])
        start += count
    return out


def _locate(message: str, flat: str, counts: list[int], pattern: str) -> str:
    """Turn `flat[k]` in a message into the record and item it came from."""
    match = re.match(re.escape(flat) + r"\[(\d+)\]", message)
    if not match:
        return message
    k = int(match.group(1))
    for i, count in enumerate(counts):
        if k < count:
            return pattern.format(i, k) + message[match.end() :]
        k -= count
    return message


def _locations(raw: Any) -> list[Location]:
    _check(isinstance(raw, list), f"'locations' must be a list, got {_describe(raw)}")
    out = []
    for i, item in enumerate(raw):
        _check(
            isinstance(item, list) and len(item) == 3 and _is_str(item[0]) and _is_int(item[1]) and _is_str(item[2]),
            f"locations[{i}] must be [file, line, code] (string, integer, string), got {_short(item)}",
        )
        out.append(Location(sys.intern(item[0]), item[1], item[2]))
    return out


# ---------------------------------------------------------------------------------------------- version 1
def _v1_columns(cls: type, raw: Any, table: str, locations: list[Location]) -> dict[str, list[Any]]:
    """Version 1 stored one object per record: turn them into the columns version 2 stores."""
    _check(isinstance(raw, list), f"'{table}' must be a list, got {_describe(raw)}")
    hints = field_hints(cls)
    names = {name for name, _ in hints}
    index: dict[tuple[str, int, str], int] = {}
    columns: dict[str, list[Any]] = {name: [] for name, _ in hints}
    for i, record in enumerate(raw):
        _check(isinstance(record, dict), f"{table}[{i}] must be an object, got {_describe(record)}")
        unknown = set(record) - names
        _check(not unknown, f"{table}[{i}] has unknown field(s) {sorted(unknown)}")
        for name, hint in hints:
            value = record.get(name, ABSENT)
            if value is ABSENT:
                default = field_default(cls, name)
                _check(default is not MISSING, f"{table}[{i}] is missing the field {name!r}")
                value = default() if callable(default) else default
            elif strip_optional(hint) is Location and value is not None:
                value = _v1_location(value, f"{table}[{i}].{name}", locations, index)
            elif (nested := nested_type(hint)) is not None:
                value = _v1_nested(nested, value, f"{table}[{i}].{name}")
            columns[name].append(value)
    return columns


def _v1_location(raw: Any, where: str, locations: list[Location], index: dict[tuple[str, int, str], int] | None = None) -> int:
    _check(isinstance(raw, dict), f"{where} must be an object, got {_describe(raw)}")
    unknown = set(raw) - {"file", "line", "code"}
    _check(not unknown, f"{where} has unknown field(s) {sorted(unknown)}")
    file, line, code = raw.get("file", ABSENT), raw.get("line", ABSENT), raw.get("code", "")
    _check(_is_str(file), f"{where}.file must be a string, got {_describe(file)}")
    _check(_is_int(line), f"{where}.line must be an integer, got {_describe(line)}")
    _check(_is_str(code), f"{where}.code must be a string, got {_describe(code)}")
    key = (file, line, code)
    found = index.get(key) if index is not None else None
    if found is None:
        found = len(locations)
        locations.append(Location(sys.intern(file), line, code))
        if index is not None:
            index[key] = found
    return found


def _v1_nested(cls: type, raw: Any, where: str) -> Any:
    if not isinstance(raw, list):
        return raw  # the column check names it
    hints = field_hints(cls)
    out = []
    for j, item in enumerate(raw):
        _check(isinstance(item, dict), f"{where}[{j}] must be an object, got {_describe(item)}")
        unknown = set(item) - {n for n, _ in hints}
        _check(not unknown, f"{where}[{j}] has unknown field(s) {sorted(unknown)}")
        row = []
        for name, _ in hints:
            value = item.get(name, ABSENT)
            if value is ABSENT:
                default = field_default(cls, name)
                _check(default is not MISSING, f"{where}[{j}] is missing the field {name!r}")
                value = default
            row.append(value)
        out.append(row)
    return out


# ---------------------------------------------------------------------------------------------- cross-checks
def _unique(records: list[Any], key: str) -> dict[str, Any]:
    out = {r.id: r for r in records}
    if len(out) != len(records):
        seen: set[str] = set()
        for r in records:
            _check(r.id not in seen, f"'{key}' holds id {r.id!r} twice")
            seen.add(r.id)
    return out


def _plain_value(value: Any, hint: Any, name: str) -> Any:
    """A plain top-level field, checked against its annotation like a column of one value; a small record (the
    step window) checked field by field."""
    record = strip_optional(hint)
    if is_record(record):
        if value is None and is_optional(hint):
            return None
        try:
            return _build_one(record, value, name, [])
        except ValueError as exc:
            raise ValueError(str(exc).replace(f"{name}[0].", f"{name}.", 1)) from None
    _check(is_json_plain(value), f"'{name}' holds a value of unsupported type")
    try:
        return _decode_column([value], hint, "trace", name, [])[0]
    except ValueError as exc:
        raise ValueError(str(exc).replace(f"trace[0].{name}", f"'{name}'", 1)) from None


def _str_dict(value: Any, where: str) -> dict[str, str]:
    _check(isinstance(value, dict), f"'{where}' must be an object, got {_describe(value)}")
    for k, v in value.items():
        _check(_is_str(v), f"{where}.{k} must be a string, got {_describe(v)}")
    return dict(value)


def _str_list(value: Any, where: str) -> list[str]:
    _check(isinstance(value, list), f"'{where}' must be a list, got {_describe(value)}")
    for i, v in enumerate(value):
        _check(_is_str(v), f"{where}[{i}] must be a string, got {_describe(v)}")
    return list(value)


# ---------------------------------------------------------------------------------------------- small helpers
