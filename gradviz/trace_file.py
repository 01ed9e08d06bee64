"""The trace file: the versioned JSON format of docs/trace-format.md, written as columns, checked in full on load."""

from __future__ import annotations

import copy
import enum
import itertools
import json
import operator
import os
import re
import stat
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from .model import (
    DEFAULT_MAX_BYTES,
    FORMAT_NAME,
    FORMAT_VERSION,
    Event,
    ExceptionRecord,
    Location,
    NodeRecord,
    OpRecord,
    StorageRecord,
    TensorRecord,
    Trace,
    VersionCounterRecord,
)
from . import collector
from .model import LENT
from .trace_checks import (
    check_event_data,
    check_extras,
    check_references,
    is_json_plain,
)
from .trace_checks import check as _check
from .trace_checks import describe as _describe
from .trace_checks import is_bool as _is_bool
from .trace_checks import is_int as _is_int
from .trace_checks import is_str as _is_str
from .trace_checks import short as _short

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
_TABLES: tuple[tuple[str, type], ...] = (
    ("tensors", TensorRecord),
    ("storages", StorageRecord),
    ("version_counters", VersionCounterRecord),
    ("nodes", NodeRecord),
    ("ops", OpRecord),
    ("events", Event),
)
# Trace fields written by name above; any other (plain: int, str, bool, lists and dicts of them) is written and
# read as it is, checked against its annotation, so adding a field to Trace needs no change here
_NAMED = {
    "torch_version", "script", *(name for name, _ in _TABLES), "exception", "sources", "file_labels",
    "internal_errors",
}  # fmt: skip
_NOT_SAVED = {"error"}  # the live exception: never written


def _plain_fields() -> list[tuple[str, Any]]:
    return [(n, h) for n, h in _field_hints(Trace) if n not in _NAMED and n not in _NOT_SAVED]


_TOP_LEVEL = {"format", "format_version", "locations", *_NAMED, *EXTRA_FIELDS}
_CHUNK = 1 << 20


class _Missing:
    """Stands for a field a version-1 record left out (told apart from null)."""

    def __repr__(self) -> str:
        return "missing"


_ABSENT = _Missing()


# ============================================================================================== writing
def to_document(trace: Trace) -> dict[str, Any]:
    """The trace as one JSON-ready dict (format version 2): each list of records stored as one list per field."""
    locations: dict[Location, int] = {}
    tables = {name: _columns(cls, _records(trace, name), locations) for name, cls in _TABLES}
    exception = _exception_out(trace.exception, locations) if trace.exception else None
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "torch_version": trace.torch_version,
        "script": trace.script,
        "locations": [[loc.file, loc.line, loc.code] for loc in locations],
        **tables,
        "exception": exception,
        "sources": dict(trace.sources),
        "file_labels": dict(trace.file_labels),
        "internal_errors": list(trace.internal_errors),
        **{name: _plain_out(getattr(trace, name), hint) for name, hint in _plain_fields()},
    }


def _plain_out(value: Any, hint: Any) -> Any:
    """A top-level field added later: a small record (the step window) as an object of its fields, else a copy."""
    if value is not None and _is_record(_strip_optional(hint)):
        # (its own small records, a window's re-armed steps, as rows of values like the tables' nested records)
        return {name: copy.deepcopy(_encode_column([getattr(value, name)], h, {})[0]) for name, h in _field_hints(type(value))}
    return copy.deepcopy(value)


def dumps(document: dict[str, Any], *, indent: int | None = None) -> str:
    # compact separators: a long trace is mostly ids and small numbers, where ", " costs a tenth of the file
    separators = (",", ":") if indent is None else None
    return json.dumps(document, indent=indent, ensure_ascii=False, separators=separators)


def _records(trace: Trace, name: str) -> list[Any]:
    value = getattr(trace, name)
    return list(value.values()) if isinstance(value, dict) else value


def _columns(cls: type, records: list[Any], locations: dict[Location, int]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for name, hint in _field_hints(cls):
        values = list(map(operator.attrgetter(name), records))
        out[name] = _encode_column(values, hint, locations)
    return out


def _encode_column(values: list[Any], hint: Any, locations: dict[Location, int]) -> list[Any]:
    base = _strip_optional(hint)
    if base is Location:
        return [None if v is None else _location_index(v, locations) for v in values]
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return [None if v is None else v.value for v in values]
    if typing.get_origin(base) is tuple:  # byte ranges: JSON has no tuples, and to_dict's copy must load again
        return [None if v is None else list(v) for v in values]
    if typing.get_origin(base) is list and _is_record(typing.get_args(base)[0]):
        item_fields = [n for n, _ in _field_hints(typing.get_args(base)[0])]
        return [[[getattr(item, n) for n in item_fields] for item in v] for v in values]
    return values  # str, int, bool, lists of them, tuples, dicts: JSON already


def _location_index(loc: Location, locations: dict[Location, int]) -> int:
    index = locations.get(loc)
    if index is None:
        index = locations[loc] = len(locations)
    return index


def _exception_out(record: ExceptionRecord, locations: dict[Location, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, hint in _field_hints(ExceptionRecord):
        value = getattr(record, name)
        out[name] = _location_index(value, locations) if _strip_optional(hint) is Location and value else value
    return out


# ============================================================================================== reading
#: The environment variable that raises (or lowers) the size limit where the command line loads a trace.
LIMIT_VARIABLE = "GRADVIZ_MAX_TRACE_SIZE"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str) -> int:
    """`800M`, `2G`, `1.5G`, `100000` (bytes; K/M/G/T are powers of 1024) -> bytes; ValueError otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", text)
    if not match:
        raise ValueError(f"not a size: {text!r} (write it as bytes, or with K, M, G: 800M, 2G)")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def limit_from_environment() -> int:
    """The size limit: GRADVIZ_MAX_TRACE_SIZE when set, else DEFAULT_MAX_BYTES."""
    raw = os.environ.get(LIMIT_VARIABLE)
    if raw is None or not raw.strip():
        return DEFAULT_MAX_BYTES
    try:
        return parse_size(raw)
    except ValueError as exc:
        raise ValueError(f"{LIMIT_VARIABLE}: {exc}") from None


def read_text(path: str | Path, *, max_bytes: int | None = DEFAULT_MAX_BYTES) -> str:
    """The file's text, refusing (ValueError) one that is too big, binary, or not UTF-8, before reading it all."""
    shown = str(path)
    chunks: list[bytes] = []
    size = 0
    try:
        # stat first: opening a FIFO blocks until a writer comes, a device never ends, and a file over the limit
        # is refused by its size, before a byte of it is read
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise ValueError(f"cannot read trace file {shown!r}: it is a folder, not a trace file")
        if not stat.S_ISREG(info.st_mode):
            kind = "a FIFO (named pipe)" if stat.S_ISFIFO(info.st_mode) else (
                "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "a socket or other special file")
            raise ValueError(f"cannot read trace file {shown!r}: not a regular file ({kind})")
        if max_bytes is not None and info.st_size > max_bytes:
            raise ValueError(_too_big(shown, max_bytes))
        with open(path, "rb") as stream:
            while True:
                # read in chunks all the same: the file may grow while it is read
                chunk = stream.read(_CHUNK)
                if not chunk:
                    break
                if not chunks and not chunk.lstrip().startswith(b"{"):
                    raise ValueError(f"{shown} is not a gradviz trace: it does not start with a JSON object ('{{')")
                if b"\x00" in chunk:
                    raise ValueError(f"{shown} is not a gradviz trace: it holds binary data (NUL bytes)")
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise ValueError(_too_big(shown, max_bytes))
                chunks.append(chunk)
    except OSError as exc:
        raise ValueError(f"cannot read trace file {shown!r}: {exc.strerror or exc}") from None
    data = b"".join(chunks)
    chunks.clear()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{shown} is not a gradviz trace: not UTF-8 text") from None


def _too_big(shown: str, max_bytes: int) -> str:
    return (
        f"{shown} is larger than the limit of {_size(max_bytes)} for a trace file; if it is one, raise "
        f"the limit: {LIMIT_VARIABLE}=2G on the command line, Trace.load(path, max_bytes=...) in Python"
    )


def parse(text: str, origin: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{origin} is not a gradviz trace: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise ValueError(f"{origin} is not a gradviz trace: nested too deeply") from None


def from_document(data: Any) -> Trace:
    """Build a Trace from a parsed document of any readable version; ValueError naming the first bad field.

    Consumes `data`: its lists of records are dropped from it as they are built."""
    _check(isinstance(data, dict), "top level must be a JSON object")
    if "format" not in data and isinstance(data.get("trace"), dict) and set(data) <= {"view", "trace", "findings"}:
        data = data["trace"]  # `gradviz render -o x.json` before format 2 wrapped the trace: {view, trace, findings}
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
    _check(not missing, f"{_quoted(missing)} {'is' if len(missing) == 1 else 'are'} missing "
                        f"(required in format version {version}; docs/trace-format.md lists the optional fields)")
    plain = _plain_fields()
    unknown = set(data) - _TOP_LEVEL - {name for name, _ in plain}
    _check(not unknown, f"unknown field(s) {sorted(unknown)} at the top level")
    for key in ("torch_version", "script"):
        _check(data.get(key) is None or isinstance(data[key], str), f"'{key}' must be a string or null")
    check_extras(data)
    if version == 1:
        locations: list[Location] = []
        tables = {name: _v1_columns(cls, data.get(name, []), name, locations) for name, cls in _TABLES}
        raw_exception = data.get("exception")
        if isinstance(raw_exception, dict) and isinstance(raw_exception.get("location"), dict):
            where = _v1_location(raw_exception["location"], "exception.location", locations)
            raw_exception = dict(raw_exception, location=where)
    else:
        locations = _locations(data["locations"])
        tables = {}
        for name, _ in _TABLES:
            raw = data.get(name, {})
            _check(isinstance(raw, dict), f"'{name}' must be an object of columns, got {_describe(raw)}")
            tables[name] = raw
        raw_exception = data.get("exception")
    built = {}
    for name, cls in _TABLES:
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
        **{name: _plain_value(data[name], hint, name) for name, hint in plain if name in data},
    )
    check_references(trace)
    check_event_data(trace)
    return trace


# ---------------------------------------------------------------------------------------------- building records
def _build(cls: type, columns: dict[str, Any], table: str, locations: list[Location]) -> list[Any]:
    hints = _field_hints(cls)
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
            default = _default(cls, name)
            _check(default is not MISSING or length == 0, f"{table}.{name} is missing")
            args.append([default() if callable(default) else default for _ in range(length)])
    return list(map(cls, *args)) if args else []


def _build_one(cls: type, raw: Any, where: str, locations: list[Location]) -> Any:
    _check(isinstance(raw, dict), f"{where} must be an object, got {_describe(raw)}")
    hints = dict(_field_hints(cls))
    unknown = set(raw) - set(hints)
    _check(not unknown, f"{where} has unknown field(s) {sorted(unknown)}")
    columns = {name: [value] for name, value in raw.items()}
    if not columns:  # an empty object: a record of defaults, if every field has one
        missing = [name for name in hints if _default(cls, name) is MISSING]
        _check(not missing, f"{where}.{missing[0] if missing else ''} is missing")
        return cls()
    return _build(cls, columns, where, locations)[0]


_NONE = type(None)


def _decode_column(values: list[Any], hint: Any, table: str, name: str, locations: list[Location]) -> list[Any]:
    """Check one column against its field's type and build the typed values; ValueError naming the first bad one.

    Each check first looks at the set of value types (one pass in C), and walks the values one by one only to
    name the bad one: loading a long trace is dominated by these checks."""
    optional = _is_optional(hint)
    base = _strip_optional(hint)
    where = f"{table}[{{}}].{name}"
    allowed_none = {_NONE} if optional else set()

    def each(ok: Callable[[Any], bool], what: str) -> None:
        for i, v in enumerate(values):
            if not ((optional and v is None) or ok(v)):
                raise ValueError(f"{where.format(i)} {what}, got {_describe(v)}")

    def types_are(*kinds: type) -> bool:
        return set(map(type, values)) <= {*kinds, *allowed_none}

    if base is str:
        if not types_are(str):
            each(_is_str, "must be a string")
        if name in _INTERNED:  # a few distinct values repeated in every record: one string object each
            return [v if v is None else sys.intern(v) for v in values] if optional else list(map(sys.intern, values))
        return values
    if base is int:
        if not types_are(int):
            each(_is_int, "must be an integer")
        return values
    if base is bool:
        if not types_are(bool):
            each(_is_bool, "must be true or false")
        return values
    if base is Location:
        count = len(locations)
        present = [v for v in values if v is not None] if optional else values
        if not (types_are(int) and (not present or (min(present) >= 0 and max(present) < count))):
            each(lambda v: _is_int(v) and 0 <= v < count, f"must be an index into 'locations' (0 to {count - 1})")
        return [None if v is None else locations[v] for v in values] if optional else [locations[v] for v in values]
    if isinstance(base, type) and issubclass(base, enum.Enum):
        choices = {m.value: m for m in base}
        for i, v in enumerate(values):
            if not (optional and v is None) and (not isinstance(v, str) or v not in choices):
                raise ValueError(f"{where.format(i)} must be one of {', '.join(map(repr, choices))}, got {_short(v)}")
        return [None if v is None else choices[v] for v in values]
    origin = typing.get_origin(base)
    if origin is tuple:  # byte ranges: [start, stop)
        each(lambda v: isinstance(v, list) and len(v) == 2 and _is_int(v[0]) and _is_int(v[1]) and 0 <= v[0] <= v[1],
             "must be a list of 2 values [start, stop) with 0 <= start <= stop")  # fmt: skip
        return [None if v is None else (v[0], v[1]) for v in values]
    if origin is list:
        (item,) = typing.get_args(base)
        if _is_record(item):
            return _nested_column(item, values, table, name, locations)
        if not types_are(list):
            each(lambda v: isinstance(v, list), "must be a list")
        item_types = {_strip_optional(item)} | ({_NONE} if _is_optional(item) else set())
        if not set(map(type, itertools.chain.from_iterable(values))) <= item_types:
            for i, v in enumerate(values):
                for j, x in enumerate(v):
                    if type(x) not in item_types:
                        raise ValueError(f"{where.format(i)}[{j}] has the wrong type ({_describe(x)})")
        return values
    if origin is dict:  # Event.data: kind-specific, checked once the whole trace is built
        if not types_are(dict):
            each(lambda v: isinstance(v, dict), "must be an object")
        return values
    raise ValueError(f"{table}.{name}: cannot read a value of type {hint!r}")  # a field added without a reader


def _nested_column(cls: type, values: list[Any], table: str, name: str, locations: list[Location]) -> list[Any]:
    """A column whose values are lists of small records (saved tensors, version changes), each stored as
    [field, field, ...]: all items checked and built at once, column by column, then handed back per record."""
    hints = _field_hints(cls)
    width = len(hints)
    defaults = [_default(cls, n) for n, _ in hints]
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
    hints = _field_hints(cls)
    names = {name for name, _ in hints}
    index: dict[tuple[str, int, str], int] = {}
    columns: dict[str, list[Any]] = {name: [] for name, _ in hints}
    for i, record in enumerate(raw):
        _check(isinstance(record, dict), f"{table}[{i}] must be an object, got {_describe(record)}")
        unknown = set(record) - names
        _check(not unknown, f"{table}[{i}] has unknown field(s) {sorted(unknown)}")
        for name, hint in hints:
            value = record.get(name, _ABSENT)
            if value is _ABSENT:
                default = _default(cls, name)
                _check(default is not MISSING, f"{table}[{i}] is missing the field {name!r}")
                value = default() if callable(default) else default
            elif _strip_optional(hint) is Location and value is not None:
                value = _v1_location(value, f"{table}[{i}].{name}", locations, index)
            elif (nested := _nested_type(hint)) is not None:
                value = _v1_nested(nested, value, f"{table}[{i}].{name}")
            columns[name].append(value)
    return columns


def _v1_location(raw: Any, where: str, locations: list[Location], index: dict | None = None) -> int:
    _check(isinstance(raw, dict), f"{where} must be an object, got {_describe(raw)}")
    unknown = set(raw) - {"file", "line", "code"}
    _check(not unknown, f"{where} has unknown field(s) {sorted(unknown)}")
    file, line, code = raw.get("file", _ABSENT), raw.get("line", _ABSENT), raw.get("code", "")
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
    hints = _field_hints(cls)
    out = []
    for j, item in enumerate(raw):
        _check(isinstance(item, dict), f"{where}[{j}] must be an object, got {_describe(item)}")
        unknown = set(item) - {n for n, _ in hints}
        _check(not unknown, f"{where}[{j}] has unknown field(s) {sorted(unknown)}")
        row = []
        for name, _ in hints:
            value = item.get(name, _ABSENT)
            if value is _ABSENT:
                default = _default(cls, name)
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
    record = _strip_optional(hint)
    if _is_record(record):
        if value is None and _is_optional(hint):
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
_HINTS: dict[type, list[tuple[str, Any]]] = {}
# columns whose few distinct values repeat in every record: one string object each, not one per record
_INTERNED = {"dtype", "device", "origin", "op", "name", "module", "created_by", "file"}


def _field_hints(cls: type) -> list[tuple[str, Any]]:
    hints = _HINTS.get(cls)
    if hints is None:
        types_of = typing.get_type_hints(cls)
        hints = _HINTS[cls] = [(f.name, types_of[f.name]) for f in fields(cls) if f.init]
    return hints


def _default(cls: type, name: str) -> Any:
    for f in fields(cls):
        if f.name == name:
            if f.default is not MISSING:
                return f.default
            if f.default_factory is not MISSING:
                return f.default_factory
    return MISSING


def _is_optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _strip_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return options[0] if len(options) == 1 else hint
    return hint


def _nested_type(hint: Any) -> type | None:
    """The small record type of a `list[SavedTensorRecord]`-like field, else None."""
    base = _strip_optional(hint)
    if typing.get_origin(base) is list and _is_record(typing.get_args(base)[0]):
        return typing.get_args(base)[0]
    return None


def _is_record(hint: Any) -> bool:
    return isinstance(hint, type) and hasattr(hint, "__dataclass_fields__")


def _quoted(names: list[str]) -> str:
    return ", ".join(f"'{name}'" for name in names)


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n} bytes"



# ---------------------------------------------------------------- the Trace methods' bodies (model.Persistence)
def trace_to_dict(trace: Trace) -> dict[str, Any]:
    """`Trace.to_dict`: a copy of the document, so changing it leaves the trace alone."""
    return copy.deepcopy(to_document(trace))


def trace_to_json(trace: Trace, path: str | Path | None = None, *, indent: int | None = None) -> str:
    """`Trace.to_json`: the JSON text, also written to `path` if given."""
    # the document shares lists with the records: fine here, it is turned into text at once
    with collector.paused():
        text = dumps(to_document(trace), indent=indent)
    if path is not None:
        # encoded before the file is opened, so a failure leaves no half-written file; a lone surrogate (an
        # undecodable file name) is written as its JSON escape `\udcff`, which loads back as the same text
        Path(path).write_bytes(text.encode("utf-8", "backslashreplace"))
    return text


def trace_from_dict(data: Any) -> Trace:
    """`Trace.from_dict`: the trace keeps no reference to `data`."""
    with collector.paused():
        return from_document(copy.deepcopy(data))


def load(source: str | Path, *, max_bytes: int | None = DEFAULT_MAX_BYTES) -> Trace:
    """`Trace.load`: read, check the size limit (DEFAULT_MAX_BYTES means: the environment's, else the default)."""
    limit = limit_from_environment() if max_bytes == DEFAULT_MAX_BYTES else max_bytes
    return loads(read_text(source, max_bytes=limit), origin=str(source))


def loads(text: str, *, origin: str = "<string>") -> Trace:
    """`Trace.loads`: ValueError starting with `origin` when the text is not a valid trace."""
    with collector.paused():
        data = parse(text, origin)
        try:
            return from_document(data)
        except ValueError as exc:
            raise ValueError(f"{origin}: {exc}") from None


class _Persistence:
    to_dict = staticmethod(trace_to_dict)
    to_json = staticmethod(trace_to_json)
    from_dict = staticmethod(trace_from_dict)
    load = staticmethod(load)
    loads = staticmethod(loads)


LENT.persistence = _Persistence()
