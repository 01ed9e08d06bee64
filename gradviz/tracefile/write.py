"""The trace file: the versioned JSON format of docs/trace-format.md, written as columns, checked in full on load."""

from __future__ import annotations

import copy
import enum
import json
import operator
import os
import re
import stat
import typing
from pathlib import Path
from typing import Any

from .. import collector
from ..model import (
    DEFAULT_MAX_BYTES,
    FORMAT_NAME,
    FORMAT_VERSION,
    LENT,
    ExceptionRecord,
    Location,
    Trace,
)
from .decode import from_document
from .fields import (
    TABLES,
    field_hints,
    is_record,
    plain_fields,
    size_text,
    strip_optional,
)

_CHUNK = 1 << 20


# ============================================================================================== writing
def to_document(trace: Trace) -> dict[str, Any]:
    """The trace as one JSON-ready dict (format version 2): each list of records stored as one list per field."""
    locations: dict[Location, int] = {}
    tables = {name: _columns(cls, _records(trace, name), locations) for name, cls in TABLES}
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
        **{name: _plain_out(getattr(trace, name), hint) for name, hint in plain_fields()},
    }


def _plain_out(value: Any, hint: Any) -> Any:
    """A top-level field added later: a small record (the step window) as an object of its fields, else a copy."""
    if value is not None and is_record(strip_optional(hint)):
        # (its own small records, a window's re-armed steps, as rows of values like the tables' nested records)
        return {name: copy.deepcopy(_encode_column([getattr(value, name)], h, {})[0]) for name, h in field_hints(type(value))}
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
    for name, hint in field_hints(cls):
        values = list(map(operator.attrgetter(name), records))
        out[name] = _encode_column(values, hint, locations)
    return out


def _encode_column(values: list[Any], hint: Any, locations: dict[Location, int]) -> list[Any]:
    base = strip_optional(hint)
    if base is Location:
        return [None if v is None else _location_index(v, locations) for v in values]
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return [None if v is None else v.value for v in values]
    if typing.get_origin(base) is tuple:  # byte ranges: JSON has no tuples, and to_dict's copy must load again
        return [None if v is None else list(v) for v in values]
    if typing.get_origin(base) is list and is_record(typing.get_args(base)[0]):
        item_fields = [n for n, _ in field_hints(typing.get_args(base)[0])]
        return [[[getattr(item, n) for n in item_fields] for item in v] for v in values]
    return values  # str, int, bool, lists of them, tuples, dicts: JSON already


def _location_index(loc: Location, locations: dict[Location, int]) -> int:
    index = locations.get(loc)
    if index is None:
        index = locations[loc] = len(locations)
    return index


def _exception_out(record: ExceptionRecord, locations: dict[Location, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, hint in field_hints(ExceptionRecord):
        value = getattr(record, name)
        out[name] = _location_index(value, locations) if strip_optional(hint) is Location and value else value
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
        f"{shown} is larger than the limit of {size_text(max_bytes)} for a trace file; if it is one, raise "
        f"the limit: {LIMIT_VARIABLE}=2G on the command line, Trace.load(path, max_bytes=...) in Python"
    )


def parse(text: str, origin: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{origin} is not a gradviz trace: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise ValueError(f"{origin} is not a gradviz trace: nested too deeply") from None


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

