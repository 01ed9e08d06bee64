"""The trace model: plain, JSON-serialisable records of what autograd and memory did (no torch objects)."""

from __future__ import annotations

import builtins
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypedDict

from .text import in_thread

#: Version of the JSON format written by :meth:`Trace.to_json`. Bumped on any incompatible change (2: columns).
FORMAT_VERSION = 2
FORMAT_NAME = "gradviz-trace"
#: Default for `Trace.load(max_bytes=...)`: about 140,000 traced steps of a small MLP (3.6 KB a step). A larger
#: file is refused before it is read, so a wrong path (`/dev/zero`, a dataset) fails at once, not after filling memory.
DEFAULT_MAX_BYTES = 512 * 2**20


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
    buffer: str | None = None  # qualified nn.Module buffer name (`model.bn.running_mean`)

    @property
    def label(self) -> str:
        """The program's name (parameter, then variable), else what and where: never the recorder's id.
        Views and messages name tensors through `gradviz.analysis.names.Namer`, which also knows expressions."""
        if self.parameter or self.buffer or self.names:
            return self.parameter or self.buffer or self.names[0]
        shape = "[" + ", ".join(str(n) for n in self.shape) + "]"
        return f"{shape} tensor made at line {self.created.line}" if self.created else f"unnamed {shape} tensor"


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
    packed: bool = False  # saved through a saved_tensors_hooks pack hook: autograd checks no version at backward


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
    # where the program called `checkpoint(..., use_reentrant=True)`, for a call made inside its forward (which
    # PyTorch runs without gradient tracking): the line that explains a gradient that never arrives
    checkpoint_line: int | None = None
    checkpoint_file: str | None = None


@dataclass(slots=True)
class VersionChange:
    """A tensor's version before and after a write (equal when the write went unnoticed)."""

    tensor: str
    before: int | None
    after: int | None


class ErrorInfo(TypedDict):
    """An exception as a backward() raised it."""

    type: str
    message: str


class EventData(TypedDict, total=False):
    """What an event keeps in `data`, per key (docs/trace-format.md, "Events", says which kind holds which; the trace
    file's checks, tracefile/checks.py, check the ids). Every read and write of an event's data is type-checked
    against this one vocabulary."""

    # data_get, detach (and the cut pass's re-wraps, never in a file): the source's node, its flag, the expression
    source_grad_fn: str | None
    source_requires_grad: bool
    expression: str
    rewrap: str  # (analysis only: the op that re-wrapped a detached tensor, `nn.Parameter(...)`)
    # data_set: the storages before and after, the bytes it covers now
    old_storage: str | None
    new_storage: str | None
    byte_range: list[int]  # [start, stop) (inplace_write: the bytes written)
    # detach_: `source_grad_fn` above, and its error when it raised (a string: "RuntimeError: ...")
    # requires_grad_
    requires_grad: bool
    # inplace_write
    storage: str | None
    counter: str | None
    grad_fn: str | None  # the written tensor's new grad_fn
    module: str | None  # the module it happened inside (its qualified name) and the module as constructed
    module_call: str
    unversioned: bool  # a batch norm changed its running statistics without moving their version
    readers: list[str]  # the nodes that read them at backward (for an unversioned write)
    backward: int  # a write by a custom Function's backward: that backward's seq, the node running, nodes to read it
    backward_node: str
    read_later: list[str]
    verify_kept: int  # --verify: the bytes kept to compare with
    # backward
    api: str  # "Tensor.backward", "autograd.backward", "autograd.grad"
    roots: list[str]
    reached_nodes: list[str]
    reached_leaves: list[str]
    inputs: list[str] | None
    retain_graph: bool
    create_graph: bool
    nested_leaves: list[str]
    outcome: str  # "ok" or "error" (optimizer_step: "error" only)
    error: ErrorInfo | str  # backward: {type, message}; detach_: "Type: message"
    verify: dict[str, Any]  # --verify's record (analysis/verify.py reads it)
    thread: str  # backward, optimizer_step: the thread it ran in, where not the main one
    # optimizer_step
    optimizer: str
    optimizer_id: str
    changed: list[str]
    grads: dict[str, str]
    grad_given: list[str]
    grad_given_at: list[Any]  # [file, line, code]
    # exception
    type: str
    message: str


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
    data: EventData = field(default_factory=lambda: EventData())  # kind-specific details

    def written(self) -> list[VersionChange]:
        """The changes of the tensors whose bytes this event wrote. An in-place call lists exactly those (a tensor
        whose version stayed put there had its bytes changed unnoticed, through an alias with its own counter); an
        optimizer step lists every parameter it holds, also those it skipped for want of a gradient: only the ones
        whose version moved were written."""
        if self.kind is EventKind.INPLACE_WRITE:
            return list(self.versions)
        if self.kind is EventKind.OPTIMIZER_STEP:
            return [v for v in self.versions if v.before != v.after]
        return []


@dataclass(slots=True)
class RearmedStep:
    """A step after the window traced again (in full, as one inside it) because the sentinel saw something new."""

    step: int  # steps (or backward calls) done when the new thing happened: recording began again after step `step`
    reason: str  # what was new: "new code", "requires_grad turned on", "a new optimizer", ...
    kind: str  # what the step is, for labels: "validation", "unfreezing", "new code", ...
    file: str | None = None  # where the new thing happened
    line: int | None = None
    start: int = 0  # seq at which recording began again
    end: int | None = None  # seq at which it stopped (None: recording went on to the end of the run)

    def label(self) -> str:
        """`validation after step 1,500`."""
        return f"{self.kind} after step {self.step:,}"

    def covers(self, seq: int) -> bool:
        """Whether what happened at `seq` was recorded by this re-armed recording."""
        return self.start <= seq and (self.end is None or seq <= self.end)


@dataclass(slots=True)
class WindowRecord:
    """The step window (`--steps N`): which part of the run was traced, and how long the run went on."""

    unit: str  # "step": optimizer steps (of the first optimizer stepped); "backward": backward() calls
    limit: int  # N, as asked
    traced: int  # steps (or backward calls) inside the window
    closed: bool = False  # the window ended before the program did; recording stopped there
    closed_at: int | None = None  # seq at which recording stopped
    total: int | None = None  # steps in the whole run (window included), when counted; None when unknown
    at_least: int | None = None  # a lower bound on the whole run's count, when `total` is unknown
    stopped: bool = False  # the program was ended at the window's end (`--stop-after`)
    # steps traced again after the window because they ran something the window never saw (the sentinel), in order
    rearmed: list[RearmedStep] = field(default_factory=list)
    # the program's other threads whose recording stopped (their own window closed, or the tracing thread's) -> the
    # steps each made after that (0: backward calls, not counted): the sentinel watches the tracing thread only, so
    # those ran unwatched (said by coverage())
    unwatched: dict[str, int] = field(default_factory=dict)

    def describe_rearmed(self) -> list[str]:
        """`traced again after step 1,500: new code at line 88 (validation)`, one line per re-armed step."""
        unit = "step" if self.unit == "step" else "backward call"
        lines = []
        for entry in self.rearmed:
            where = f" at line {entry.line}" if entry.line is not None else ""
            kind = f" ({entry.kind})" if entry.kind != entry.reason else ""  # not "new code at line 45 (new code)"
            lines.append(f"traced again after {unit} {entry.step:,}: {entry.reason}{where}{kind}")
        return lines

    def untraced_steps(self) -> bool:
        """Whether steps of the run ran untraced (after the window, between the steps traced again): counts of what
        the run keeps to its end are then lower bounds, since a line traced may have run untraced too."""
        return self.closed and not self.stopped

    def coverage(self) -> str:
        """What the findings and views of the run cover, in one line: describe() and each step traced again after the
        window (`steps 1-100 of 300 traced; traced again after step 150: new code at line 40 (validation)`)."""
        return "; ".join([self.describe(), *self.describe_rearmed(), *self.describe_unwatched()])

    def describe_unwatched(self) -> list[str]:
        """`in thread 'B', the 25 steps after recording stopped there ran unwatched (the sentinel watches the tracing
        thread only)`."""
        lines = []
        for thread, after in self.unwatched.items():
            what = f"the {after:,} steps" if after > 1 else ("the step" if after == 1 else "the backward calls")
            lines.append(f"{in_thread(thread)}, {what} after recording stopped there ran unwatched (the sentinel "
                         "watches the tracing thread only)")
        return lines

    def describe(self) -> str:
        """`steps 1-10 of 6,000 traced`, `backward calls 1-10 of 11+ traced`, `all 4 steps traced`."""
        units = "steps" if self.unit == "step" else "backward calls"
        if not self.closed:
            return f"all {self.traced:,} {units if self.traced != 1 else units[:-1]} traced"
        span = f"{units} 1-{self.traced}" if self.traced != 1 else f"{units[:-1]} 1"
        if self.stopped:
            return f"{span} traced, then the program was stopped there (--stop-after)"
        if self.total is not None:
            return f"{span} of {self.total:,} traced"
        return f"{span} of {self.at_least or self.traced:,}+ traced"


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
            except TypeError:  # a built-in that wants other arguments (UnicodeDecodeError...)
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
    internal_errors: list[str] = field(default_factory=list)  # gradviz's own failures while recording (first 20)
    internal_error_count: int = 0  # how many calls gradviz could not record, all of them
    window: WindowRecord | None = None  # the step window, when only the start of the run was traced
    ended: int | None = None  # seq when the program stopped running: what dies after it died with the program
    # what referred to some tensors alive at the end (tracer/lifetime.py): tensor id -> "names" (only the program's
    # variables) or "objects" (a list, a dict, an instance attribute...); tensors not asked about are absent
    held_at_end: dict[str, str] = field(default_factory=dict)
    # when the run went on untraced after the step window: tensor id -> how many more tensors of its kind (same
    # grad_fn type, a graph the recorder never saw) the container holding it held at the end (tracer/lifetime.py)
    untraced_kin: dict[str, int] = field(default_factory=dict)
    # values let go of where recording stopped (the window's end, a re-armed step's end) and freed before the program
    # ended: tensor id -> the seq where they were let go of (tracer/lifetime.py). Alive at the end of what was
    # recorded (each stands for its line's values in the steps not traced), but not all at once
    gone_untraced: dict[str, int] = field(default_factory=dict)
    # traced with --verify: the gradient error of each silent write to a saved tensor measured at its backward
    # (backward events' data["verify"], tracer/verify.py)
    verified: bool = False
    # the program's threads that ran its code while tracing without the recorder in them (started before tracing, or
    # outside `threading`): their torch calls are not in the trace ("thread 'loader' (started before tracing)")
    unrecorded_threads: list[str] = field(default_factory=list)

    # ----------------------------------------------------------------- queries
    def internal_error_summary(self) -> str | None:
        """"gradviz could not record 5 calls: Tensor.add: RuntimeError: ...", or None when it recorded everything."""
        count = max(self.internal_error_count, len(self.internal_errors))
        if not count:
            return None
        first = self.internal_errors[0] if self.internal_errors else "no details kept"
        return f"gradviz could not record {count} call{'s' if count != 1 else ''}: {first}"

    def unrecorded_threads_summary(self) -> str | None:
        """"1 thread ran unrecorded: thread 'loader' (started before tracing)", or None when every thread that ran
        the program's code while tracing was recorded."""
        threads = self.unrecorded_threads
        if not threads:
            return None
        count = f"{len(threads)} thread{'s' if len(threads) != 1 else ''}"
        return f"{count} ran unrecorded (torch calls there are not in the trace): {', '.join(threads)}"

    def tensor(self, name_or_id: str) -> TensorRecord:
        """A tensor by id (`t3`), variable name (`out`) or parameter name (`model.layer1.weight`, or the attribute
        path alone, `layer1.weight`, when only one model has it)."""
        if name_or_id in self.tensors:
            return self.tensors[name_or_id]
        matches = [t for t in self.tensors.values() if name_or_id in (t.parameter, t.buffer) or name_or_id in t.names]
        if not matches:
            tail = "." + name_or_id
            matches = [t for t in self.tensors.values() if t.parameter is not None and t.parameter.endswith(tail)]
            if len(matches) > 1:
                names = ", ".join(sorted(t.parameter or "" for t in matches))
                raise KeyError(f"{name_or_id!r} names several parameters in this trace: {names}")
        if not matches:
            raise KeyError(f"no tensor named {name_or_id!r} in this trace")
        return matches[0]

    def run_steps(self) -> dict[int, int]:
        """Backward event seq -> the number, in the whole run, of the step it ends, for the steps the sentinel traced
        again after the window: recording began again after step `RearmedStep.step`, so its first backward is step
        `step + 1` (counted in the window's unit: optimizer steps, or backward calls without an optimizer), not the
        next after the window's N. Steps inside the window are numbered as traced (1..N): no entry here. The one
        place every view reads a re-armed step's number from."""
        window = self.window
        if window is None or not window.rearmed:
            return {}
        # the window counts the steps of the optimizer stepped first (a GAN's D and G step once each per step)
        first = next((e.data.get("optimizer_id") for e in self.events if e.kind is EventKind.OPTIMIZER_STEP), None)
        out: dict[int, int] = {}
        for entry in window.rearmed:
            done = entry.step
            for event in self.events:
                if not entry.covers(event.seq):
                    continue
                if event.kind is EventKind.BACKWARD:
                    out[event.seq] = done + 1
                    if window.unit != "step":
                        done += 1
                elif (event.kind is EventKind.OPTIMIZER_STEP and window.unit == "step"
                      and event.data.get("optimizer_id") == first and event.data.get("outcome") is None):
                    done += 1
        return out

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
        """A notebook's display: whatever the notebook front end registered (gradviz/integrations/notebook.py: the explorer)."""
        if LENT.display is None:
            return {"text/plain": repr(self)}
        return LENT.display(self, include, exclude)

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

    # ------------------------------------------------------------------ JSON (gradviz/tracefile/write.py)
    def to_dict(self) -> dict[str, Any]:
        """The trace as the JSON-ready document of docs/trace-format.md (a copy: changing it leaves the trace alone)."""
        return _persistence().to_dict(self)

    def to_json(self, path: str | Path | None = None, *, indent: int | None = None) -> str:
        """The trace as JSON text (format: docs/trace-format.md); also written to `path` if given."""
        return _persistence().to_json(self, path, indent=indent)

    @classmethod
    def from_dict(cls, data: Any) -> Trace:
        """A trace from a parsed document (as `to_dict` returns); ValueError naming what is wrong. The trace keeps
        no reference to `data`."""
        return _persistence().from_dict(data)

    @classmethod
    def load(cls, source: str | Path, *, max_bytes: int | None = DEFAULT_MAX_BYTES) -> Trace:
        """Load a trace written by :meth:`to_json`. Raises ValueError naming what is wrong in a bad file.

        `max_bytes`: refuse a larger file before reading it (default 512 MiB, or the environment variable
        GRADVIZ_MAX_TRACE_SIZE, e.g. `2G`, for command-line use; None: no limit). Loading never executes anything."""
        return _persistence().load(source, max_bytes=max_bytes)

    @classmethod
    def loads(cls, text: str, *, origin: str = "<string>") -> Trace:
        """A trace from JSON text; ValueError starting with `origin` when it is not a valid trace."""
        return _persistence().loads(text, origin=origin)


class Persistence(Protocol):
    """JSON in and out of a trace: gradviz/tracefile/write.py's functions, which the `Trace` methods above call."""

    def to_dict(self, trace: Trace) -> dict[str, Any]: ...
    def to_json(self, trace: Trace, path: str | Path | None, *, indent: int | None) -> str: ...
    def from_dict(self, data: Any) -> Trace: ...
    def load(self, source: str | Path, *, max_bytes: int | None) -> Trace: ...
    def loads(self, text: str, *, origin: str) -> Trace: ...


@dataclass(slots=True)
class Lent:
    """What the layers above lend the plain data, so that it imports none of them: the trace's persistence (set by
    gradviz/tracefile/write.py when it is imported) and the notebook displays of a trace and of `diagnose()`'s findings
    (set by gradviz/integrations/notebook.py). Importing `gradviz` imports both, so a `Trace` always has them."""

    persistence: Persistence | None = None
    display: Callable[[Trace, Any, Any], dict[str, Any]] | None = None  # (trace, include, exclude) -> MIME bundle
    findings_html: Callable[[Any, dict[str, str]], str] | None = None  # (findings, file labels) -> HTML table
    findings_text: Callable[[Any, dict[str, str]], str] | None = None  # (findings, file labels) -> text


LENT = Lent()


def _persistence() -> Persistence:
    if LENT.persistence is None:  # only when gradviz.model was loaded without its package
        raise RuntimeError("gradviz.tracefile is not imported: `import gradviz` first")
    return LENT.persistence
