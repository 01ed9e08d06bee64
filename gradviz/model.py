"""The trace model: plain, JSON-serialisable records of what autograd and memory did (no torch objects)."""

from __future__ import annotations

import builtins
import enum
import json
import types
import typing
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

#: Version of the JSON format written by :meth:`Trace.to_json`. Bumped on any incompatible change.
FORMAT_VERSION = 1
FORMAT_NAME = "gradviz-trace"


class EventKind(str, enum.Enum):
    """What happened at one point of the program (a closed vocabulary)."""

    DATA_GET = "data_get"  # c = x.data: a new tensor on x's storage with its own version counter
    DATA_SET = "data_set"  # x.data = y: x now lives in y's storage
    DETACH = "detach"  # d = x.detach(): same storage, same version counter
    DETACH_ = "detach_"  # x.detach_(): x itself leaves the graph
    REQUIRES_GRAD_ = "requires_grad_"
    INPLACE_WRITE = "inplace_write"  # any call that moved a version counter
    BACKWARD = "backward"
    OPTIMIZER_STEP = "optimizer_step"
    EXCEPTION = "exception"


@dataclass(frozen=True, slots=True)
class Location:
    """A place in the user's source: file, 1-based line, and the text of that line."""

    file: str
    line: int
    code: str = ""

    def short(self) -> str:
        return f"{Path(self.file).name}:{self.line}"


@dataclass(slots=True)
class TensorRecord:
    """One tensor object the program made or touched, as it was when first seen."""

    id: str
    shape: list[int]
    dtype: str
    device: str
    requires_grad: bool
    is_leaf: bool
    grad_fn: str | None  # node id
    storage: str | None  # storage id; None for tensors without storage (sparse, nested)
    byte_range: tuple[int, int] | None  # [start, stop) within the storage
    version_counter: str | None  # None for inference-mode tensors
    version: int | None  # version when first seen
    origin: str  # "op", "input", "data", "detach", "view", "saved", "parameter"
    seq: int  # position in program order when first seen
    names: list[str] = field(default_factory=list)
    parameter: str | None = None  # qualified nn.Module parameter name
    source: str | None = None  # the tensor this one aliases (for data/detach/view)
    op: str | None = None  # the call that produced it
    created: Location | None = None
    is_inference: bool = False
    freed: int | None = None  # seq at which the program dropped it; None if alive when the trace ended

    @property
    def label(self) -> str:
        """The best human name: parameter name, then variable name, then id."""
        return self.parameter or (self.names[0] if self.names else self.id)


@dataclass(slots=True)
class StorageRecord:
    """One block of memory (an untyped storage)."""

    id: str
    device: str
    nbytes: int
    data_ptr: int
    dtype: str  # dtype of the first tensor seen in it


@dataclass(slots=True)
class VersionCounterRecord:
    """One version counter and the tensors that share it."""

    id: str
    tensors: list[str] = field(default_factory=list)
    created_by: str = "new"  # how it came to exist: "new" (fresh tensor), "data" (x.data), "inferred"


@dataclass(slots=True)
class SavedTensorRecord:
    """A tensor an autograd node saved for backward, and its version at save time."""

    name: str  # attribute name without the `_saved_` prefix: "result", "self", "mat1"
    tensor: str | None  # tensor id; None when the node saved nothing under that name
    saved_version: int | None
    is_output: bool = False  # the node saved its own output (tanh, exp, sigmoid)
    original: bool = False  # the saved tensor is the same tensor object as `tensor` (leaves, inputs)


@dataclass(slots=True)
class NodeRecord:
    """One autograd node (grad_fn)."""

    id: str
    name: str  # TanhBackward0, AccumulateGrad
    next: list[str | None]  # next node ids in input order; None for inputs that need no grad
    seq: int
    variable: str | None = None  # the leaf an AccumulateGrad feeds
    saved: list[SavedTensorRecord] = field(default_factory=list)
    output: str | None = None  # the tensor whose grad_fn this is
    module: str | None = None  # qualified name of the nn.Module running when the node was made
    created: Location | None = None


@dataclass(slots=True)
class OpRecord:
    """One top-level torch call: the dataflow from input tensors to output tensors."""

    seq: int
    name: str
    inputs: list[str]
    outputs: list[str]
    line: int | None = None
    file: str | None = None


@dataclass(slots=True)
class VersionChange:
    """A tensor's version before and after a write (equal when the write went unnoticed)."""

    tensor: str
    before: int | None
    after: int | None


@dataclass(slots=True)
class Event:
    """One recorded event, in program order."""

    seq: int
    kind: EventKind
    location: Location | None
    tensor: str | None = None  # the tensor acted on (written, detached, backward root)
    result: str | None = None  # the tensor produced (the `.data` / `.detach()` alias)
    op: str | None = None  # the call that caused it
    versions: list[VersionChange] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)  # kind-specific details


@dataclass(slots=True)
class ExceptionRecord:
    """An exception that escaped the traced program, as data: the live exception is never kept, since its
    traceback holds the raising frames' locals and the script's globals."""

    type: str
    message: str
    location: Location | None = None
    module: str | None = None  # the exception class's module: "builtins" for RuntimeError, KeyError...
    exit_code: int = 1  # the status `python script.py` ends with because of it
    traceback: str = ""  # what Python prints on stderr when it ends a program (gradviz's frames left out)

    def rebuild(self) -> BaseException:
        """An exception equal in type and message where that can be done without running program code:
        built-in exceptions (KeyError, RuntimeError, SystemExit...) are rebuilt as themselves, any other as a
        ProgramError naming the original type."""
        if self.type == "SystemExit":
            code: int | str | None = self.exit_code if self.message == str(self.exit_code) else self.message
            return SystemExit(code)
        builtin = getattr(builtins, self.type, None) if self.module == "builtins" else None
        if isinstance(builtin, type) and issubclass(builtin, BaseException):
            try:
                return builtin(self.message)
            except Exception:  # a built-in that wants other arguments (UnicodeDecodeError...)
                pass
        return ProgramError(self)


class ProgramError(Exception):
    """The traced program raised an exception that cannot be rebuilt as itself (its class is the program's)."""

    def __init__(self, record: ExceptionRecord) -> None:
        super().__init__(f"{record.type}: {record.message}" if record.message else record.type)
        self.record = record


@dataclass(slots=True)
class Trace:
    """Everything recorded while a program ran: tensors, storages, counters, nodes, ops, events."""

    tensors: dict[str, TensorRecord] = field(default_factory=dict)
    storages: dict[str, StorageRecord] = field(default_factory=dict)
    version_counters: dict[str, VersionCounterRecord] = field(default_factory=dict)
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    ops: list[OpRecord] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    exception: ExceptionRecord | None = None
    script: str | None = None
    sources: dict[str, str] = field(default_factory=dict)  # file -> text, for the files events point at
    file_labels: dict[str, str] = field(default_factory=dict)  # file -> how displays name it ("In[3]": notebook cell)
    torch_version: str | None = None
    internal_errors: list[str] = field(default_factory=list)  # gradviz's own failures while recording
    ended: int | None = None  # seq when the program stopped running: what dies after it died with the program

    # ----------------------------------------------------------------- queries
    def tensor(self, name_or_id: str) -> TensorRecord:
        """A tensor by id (`t3`), variable name (`out`) or parameter name (`layer1.weight`)."""
        if name_or_id in self.tensors:
            return self.tensors[name_or_id]
        matches = [t for t in self.tensors.values() if name_or_id == t.parameter or name_or_id in t.names]
        if not matches:
            raise KeyError(f"no tensor named {name_or_id!r} in this trace")
        return matches[0]

    def events_of(self, kind: EventKind | str) -> list[Event]:
        kind = EventKind(kind)
        return [e for e in self.events if e.kind is kind]

    def file_name(self, file: str) -> str:
        """How displays name `file`: `In[3]` for a notebook cell, else the file's name without its folder."""
        return self.file_labels.get(file) or Path(file).name

    def where(self, file: str | None, line: int | None) -> str:
        """`train.py:12`, `In[3]:2`; `?` when the place is unknown."""
        if file is None:
            return "?"
        return f"{self.file_name(file)}:{line}" if line is not None else self.file_name(file)

    def summary(self) -> str:
        """A few lines describing the trace, for terminals."""
        lines = [
            f"{len(self.tensors)} tensors, {len(self.storages)} storages, "
            f"{len(self.version_counters)} version counters, {len(self.nodes)} autograd nodes, "
            f"{len(self.ops)} calls, {len(self.events)} events"
        ]
        for e in self.events:
            if e.kind in (EventKind.INPLACE_WRITE, EventKind.BACKWARD) or e.kind.value.startswith(("data", "detach")):
                where = self.where(e.location.file, e.location.line) if e.location else "?"
                lines.append(f"  {where:<24} {e.kind.value:<14} {e.location.code.strip() if e.location else ''}")
        if self.exception:
            lines.append(f"  raised {self.exception.type}: {self.exception.message.splitlines()[0] if self.exception.message else ''}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<gradviz.Trace {len(self.tensors)} tensors, {len(self.nodes)} nodes, {len(self.events)} events>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from .render import render

        return render(self)._repr_mimebundle_(include=include, exclude=exclude)

    @property
    def error(self) -> BaseException | None:
        """The program's exception rebuilt from `exception` (see ExceptionRecord.rebuild), or None."""
        return self.exception.rebuild() if self.exception is not None else None

    def reraise(self) -> None:
        """Raise the program's exception, rebuilt from the record, if it raised one; its traceback text is in
        `exception.traceback`."""
        error = self.error
        if error is not None:
            raise error

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "torch_version": self.torch_version,
            "script": self.script,
            "tensors": [_plain(t) for t in self.tensors.values()],
            "storages": [_plain(s) for s in self.storages.values()],
            "version_counters": [_plain(v) for v in self.version_counters.values()],
            "nodes": [_plain(n) for n in self.nodes.values()],
            "ops": [_plain(o) for o in self.ops],
            "events": [_plain(e) for e in self.events],
            "exception": _plain(self.exception) if self.exception else None,
            "sources": dict(self.sources),
            "file_labels": dict(self.file_labels),
            "internal_errors": list(self.internal_errors),
            "ended": self.ended,
        }

    def to_json(self, path: str | Path | None = None, *, indent: int | None = None) -> str:
        """The trace as JSON text (format: docs/trace-format.md); also written to `path` if given."""
        text = json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)
        if path is not None:
            # encoded before the file is opened, so a failure leaves no half-written file; a lone surrogate (an
            # undecodable file name) is written as its JSON escape `\udcff`, which loads back as the same text
            Path(path).write_bytes(text.encode("utf-8", "backslashreplace"))
        return text

    @classmethod
    def from_dict(cls, data: Any) -> Trace:
        return _load(data)

    @classmethod
    def load(cls, source: str | Path) -> Trace:
        """Load a trace written by :meth:`to_json`. Raises ValueError naming what is wrong in a bad file."""
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read trace file {str(path)!r}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ValueError(f"{str(path)!r} is not a gradviz trace: not UTF-8 text") from None
        return cls.loads(text, origin=str(path))

    @classmethod
    def loads(cls, text: str, *, origin: str = "<string>") -> Trace:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{origin} is not a gradviz trace: invalid JSON ({exc.msg} at line {exc.lineno})") from None
        except RecursionError:
            raise ValueError(f"{origin} is not a gradviz trace: nested too deeply") from None
        try:
            return _load(data)
        except ValueError as exc:
            raise ValueError(f"{origin}: {exc}") from None


# ---------------------------------------------------------------------- (de)serialisation helpers
def _plain(obj: Any) -> Any:
    if obj is None:
        return None
    out = asdict(obj)
    out.pop("error", None)
    return _enums_to_values(out)


def _enums_to_values(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _enums_to_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_enums_to_values(v) for v in value]
    return value


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise ValueError(what)


def _describe(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _convert(value: Any, hint: Any, where: str) -> Any:
    """Check a JSON value against a field's type annotation and build the typed value; ValueError if it does not fit."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(value, option, where)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError(errors[0] if len(errors) == 1 else f"{where} has the wrong type ({_describe(value)})")
    if hint is Any:
        _check(_is_json_plain(value), f"{where} holds a value of unsupported type")
        return value
    if origin is list:
        _check(isinstance(value, list), f"{where} must be a list, got {_describe(value)}")
        (item,) = typing.get_args(hint)
        return [_convert(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:
        items = typing.get_args(hint)
        _check(
            isinstance(value, list) and len(value) == len(items),
            f"{where} must be a list of {len(items)} values, got {_describe(value)}",
        )
        return tuple(_convert(v, t, f"{where}[{i}]") for i, (v, t) in enumerate(zip(value, items)))
    if origin is dict:
        key_type, value_type = typing.get_args(hint)
        _check(isinstance(value, dict), f"{where} must be an object, got {_describe(value)}")
        return {k: _convert(v, value_type, f"{where}.{k}") for k, v in value.items()}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except (ValueError, TypeError):
            choices = ", ".join(repr(m.value) for m in hint)
            raise ValueError(f"{where} must be one of {choices}, got {value!r}") from None
    if isinstance(hint, type) and hasattr(hint, "__dataclass_fields__"):
        return _record(hint, value, where)
    if hint is bool:
        _check(isinstance(value, bool), f"{where} must be true or false, got {_describe(value)}")
        return value
    if hint is int:
        _check(isinstance(value, int) and not isinstance(value, bool), f"{where} must be an integer, got {_describe(value)}")
        return value
    if hint is float:
        _check(isinstance(value, (int, float)) and not isinstance(value, bool), f"{where} must be a number, got {_describe(value)}")
        return value
    if hint is str:
        _check(isinstance(value, str), f"{where} must be a string, got {_describe(value)}")
        return value
    raise ValueError(f"{where}: cannot read a value of type {hint!r}")


_HINTS: dict[type, dict[str, Any]] = {}


def _record(cls: type, raw: Any, where: str) -> Any:
    """Build dataclass `cls` from a JSON object, checking field names and types against its annotations."""
    _check(isinstance(raw, dict), f"{where} must be an object, got {_describe(raw)}")
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    names = {f.name for f in fields(cls) if f.name != "error"}
    unknown = set(raw) - names
    _check(not unknown, f"{where} has unknown field(s) {sorted(unknown)}")
    kwargs = {name: _convert(value, hints[name], f"{where}.{name}") for name, value in raw.items()}
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required field is missing
        raise ValueError(f"{where}: {exc}") from None


def _is_json_plain(value: Any, depth: int = 0) -> bool:
    if depth > 50:
        return False
    if isinstance(value, (str, int, float, bool, type(None))):
        return True
    if isinstance(value, list):
        return all(_is_json_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_plain(v, depth + 1) for k, v in value.items())
    return False


_TOP_LEVEL = {
    "format",
    "format_version",
    "torch_version",
    "script",
    "tensors",
    "storages",
    "version_counters",
    "nodes",
    "ops",
    "events",
    "exception",
    "sources",
    "file_labels",
    "internal_errors",
    "ended",
}


def _list_of(cls: type, data: dict[str, Any], key: str) -> list[Any]:
    raw = data.get(key, [])
    _check(isinstance(raw, list), f"'{key}' must be a list, got {_describe(raw)}")
    return [_record(cls, r, f"{key}[{i}]") for i, r in enumerate(raw)]


def _unique(records: list[Any], key: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for record in records:
        _check(record.id not in out, f"'{key}' holds id {record.id!r} twice")
        out[record.id] = record
    return out


def _load(data: Any) -> Trace:
    _check(isinstance(data, dict), "top level must be a JSON object")
    _check(data.get("format") == FORMAT_NAME, f"'format' must be {FORMAT_NAME!r}, got {data.get('format')!r}")
    version = data.get("format_version")
    _check(
        type(version) is int and version == FORMAT_VERSION,
        f"unsupported format_version {version!r} (this gradviz reads version {FORMAT_VERSION})",
    )
    unknown = set(data) - _TOP_LEVEL
    _check(not unknown, f"unknown field(s) {sorted(unknown)} at the top level")
    for key in ("torch_version", "script"):
        _check(data.get(key) is None or isinstance(data[key], str), f"'{key}' must be a string or null")
    exception = None
    if data.get("exception") is not None:
        exception = _record(ExceptionRecord, data["exception"], "exception")
    trace = Trace(
        tensors=_unique(_list_of(TensorRecord, data, "tensors"), "tensors"),
        storages=_unique(_list_of(StorageRecord, data, "storages"), "storages"),
        version_counters=_unique(_list_of(VersionCounterRecord, data, "version_counters"), "version_counters"),
        nodes=_unique(_list_of(NodeRecord, data, "nodes"), "nodes"),
        ops=_list_of(OpRecord, data, "ops"),
        events=_list_of(Event, data, "events"),
        exception=exception,
        script=data.get("script"),
        sources=_convert(data.get("sources", {}), dict[str, str], "sources"),
        file_labels=_convert(data.get("file_labels", {}), dict[str, str], "file_labels"),
        torch_version=data.get("torch_version"),
        internal_errors=_convert(data.get("internal_errors", []), list[str], "internal_errors"),
        ended=_convert(data.get("ended"), int | None, "ended"),
    )
    _check_references(trace)
    return trace


def _check_references(trace: Trace) -> None:
    """Every id a record points at must exist, so later passes never meet a dangling reference."""
    for t in trace.tensors.values():
        _check(t.grad_fn is None or t.grad_fn in trace.nodes, f"tensor {t.id} points at unknown node {t.grad_fn!r}")
        _check(t.storage is None or t.storage in trace.storages, f"tensor {t.id} points at unknown storage {t.storage!r}")
        _check(
            t.version_counter is None or t.version_counter in trace.version_counters,
            f"tensor {t.id} points at unknown version counter {t.version_counter!r}",
        )
    for n in trace.nodes.values():
        for nxt in n.next:
            _check(nxt is None or nxt in trace.nodes, f"node {n.id} points at unknown node {nxt!r}")
        for s in n.saved:
            _check(s.tensor is None or s.tensor in trace.tensors, f"node {n.id} saved unknown tensor {s.tensor!r}")
        _check(n.variable is None or n.variable in trace.tensors, f"node {n.id} feeds unknown tensor {n.variable!r}")
    for v in trace.version_counters.values():
        for tid in v.tensors:
            _check(tid in trace.tensors, f"version counter {v.id} lists unknown tensor {tid!r}")
    for op in trace.ops:
        for tid in op.inputs + op.outputs:
            _check(tid in trace.tensors, f"op {op.seq} ({op.name}) uses unknown tensor {tid!r}")
    for e in trace.events:
        for tid in (e.tensor, e.result):
            _check(tid is None or tid in trace.tensors, f"event {e.seq} ({e.kind.value}) names unknown tensor {tid!r}")
        for vc in e.versions:
            _check(vc.tensor in trace.tensors, f"event {e.seq} lists unknown tensor {vc.tensor!r}")
