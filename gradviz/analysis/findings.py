"""Findings: what the analysis passes conclude about a trace (a closed vocabulary of kinds)."""

from __future__ import annotations

import enum
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from .verify import Measurement


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]


class FindingKind(str, enum.Enum):
    CUT_EDGE = "cut_edge"
    DEAD_PARAMETER = "dead_parameter"
    POISONED_SAVED_TENSOR = "poisoned_saved_tensor"
    SILENTLY_CORRUPTED_SAVED_TENSOR = "silently_corrupted_saved_tensor"
    DETACH_INPLACE_SAVED = "detach_inplace_saved"
    UPDATE_WITHOUT_GRADIENT = "update_without_gradient"
    GRAPH_KEPT_ALIVE = "graph_kept_alive"
    BACKWARD_THROUGH_FREED_GRAPH = "backward_through_freed_graph"

    @property
    def severity(self) -> Severity:
        return _SEVERITY[self]


_SEVERITY = {
    FindingKind.CUT_EDGE: Severity.INFO,
    FindingKind.DEAD_PARAMETER: Severity.WARNING,
    FindingKind.POISONED_SAVED_TENSOR: Severity.ERROR,
    FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR: Severity.ERROR,
    FindingKind.DETACH_INPLACE_SAVED: Severity.ERROR,
    FindingKind.UPDATE_WITHOUT_GRADIENT: Severity.WARNING,
    FindingKind.GRAPH_KEPT_ALIVE: Severity.WARNING,
    FindingKind.BACKWARD_THROUGH_FREED_GRAPH: Severity.ERROR,
}


#: How every medium writes a version nobody recorded (a node made before tracing began, a counter never read).
UNKNOWN_VERSION = "v?"


def version_text(version: int | None) -> str:
    """`v3`, or UNKNOWN_VERSION: the one spelling of a version in text, labels, the page and SARIF."""
    return UNKNOWN_VERSION if version is None else f"v{version}"


@dataclass(frozen=True)
class SavedTensorEvidence:
    """What a saved-tensor finding rests on: which node saved which tensor at which version, and the write (or
    `.data =` / `detach_()`) that changed it since."""

    node: str  # the autograd node that saved it
    saved_name: str  # its name on the node (`result`, `self`, `other`...)
    tensor: str  # the saved tensor
    saved_version: int | None  # its version when the node saved it
    version_now: int | None  # its version after the write (unchanged for a write through `.data`)
    write_event: int | None  # seq of the event that changed it
    write_line: int | None
    writer: str | None = None  # the tensor the write went through (the saved tensor itself, a view, an alias)
    writer_alias: str | None = None  # how the writer came to share memory: `c = out.detach()`; None if it is no alias
    shared_counter: bool = False  # the writer shares the saved tensor's version counter (autograd will notice)

    type = "saved_tensor"


@dataclass(frozen=True)
class CutEvidence:
    """What a cut edge rests on: the node that made the value, the alias taken of it, the first use downstream."""

    source_node: str | None  # the autograd node whose output was cut off (None: a leaf)
    alias: str | None  # the tensor the alias made (`x.detach()`'s result)
    alias_expression: str  # `x.detach()`, `out.data`, `torch.tensor(...)`
    use: str | None  # the autograd node of the first op downstream that used the alias; None if none did
    alias_event: int | None = None  # seq of the event that made the alias
    line: int | None = None

    type = "cut"


@dataclass(frozen=True)
class LifetimeEvidence:
    """What a lifetime finding rests on: who holds the graph, and how much it grows each step."""

    holder: str | None  # the tensor that keeps the graph alive, or the new node built on a freed one
    holder_name: str | None  # how the program names it (`losses`, `total`)
    node: str | None  # the graph node it holds (kept alive) or that was freed (freed graph)
    growth_per_step: int | None = None  # bytes the held graphs grow each step
    steps: int | None = None  # how many steps' graphs it holds
    unit: str = "step"  # what one of those is: "step" (across backward calls) or "iteration" (of a loop none ran)
    # of `steps`, the graphs of steps not traced, counted in the list (or other container) holding the traced ones
    # when the program ended (trace.untraced_kin); their nodes and bytes are not in the trace
    untraced: int = 0

    type = "lifetime"


Evidence = SavedTensorEvidence | CutEvidence | LifetimeEvidence
_EVIDENCE_TYPES: dict[str, Any] = {cls.type: cls for cls in (SavedTensorEvidence, CutEvidence, LifetimeEvidence)}


def evidence_to_dict(evidence: Evidence) -> dict[str, Any]:
    """The evidence as JSON: its fields, `type` first."""
    return {"type": evidence.type, **{f.name: getattr(evidence, f.name) for f in fields(evidence)}}


def evidence_from_dict(data: Any) -> Evidence | None:
    """Evidence read back from JSON; None for a document without it (older files) or of an unknown type."""
    if not isinstance(data, dict) or data.get("type") not in _EVIDENCE_TYPES:
        return None
    cls = _EVIDENCE_TYPES[data["type"]]
    known = {f.name: data[f.name] for f in fields(cls) if f.name in data}
    missing = [f.name for f in fields(cls) if f.name not in known and f.default is MISSING]
    if missing:
        return None
    evidence: Evidence = cls(**known)
    return evidence


#: How many occurrences' evidence a merged finding keeps (a loop repeating one mistake 1,000 times keeps 20).
EVIDENCE_LIMIT = 20


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass
class Finding:
    """One diagnosis, pointing at a source line and at the trace records involved."""

    kind: FindingKind
    file: str | None
    line: int | None
    message: str
    fix: str
    parameter: str | None = None  # a dead_parameter finding: its parameters grouped by module (`model.0: weight, bias`)
    code: str = ""  # the text of the source line
    tensors: list[str] = field(default_factory=list)  # tensor ids involved, most important first
    nodes: list[str] = field(default_factory=list)  # autograd node ids involved
    events: list[int] = field(default_factory=list)  # event seqs involved
    # seq of the backward event this finding explains (it raised or returned wrong gradients); None if no
    # backward has run through the affected part of the graph yet ("will raise if backward is called")
    affected_backward: int | None = None
    count: int = 1  # how many times the program did this at this line (loops)
    # an error predicted for a backward the program never reached is a warning ("will raise if ...")
    predicted: bool = False
    # a prediction about a backward the program's own code does not run (a value it never backpropagates): info
    note: bool = False
    # the full name of every parameter the finding is about, in creation order (a cut starving a frozen backbone)
    parameters: list[str] = field(default_factory=list)
    # --verify: how wrong the gradients came out (analysis/verify.py); a write the backward does not read: info
    measured: Measurement | None = None
    # the facts the message states, as data every medium formats (saved tensors, cuts, lifetimes): one per
    # occurrence (a loop's repeats add theirs, up to EVIDENCE_LIMIT); empty for the kinds that have none yet and
    # for findings loaded from files written before evidence was recorded
    evidence: list[Evidence] = field(default_factory=list)
    # the program's thread that ran the backward this finding explains, where not the tracing thread (`worker#2`)
    thread: str | None = None

    @property
    def severity(self) -> Severity:
        if self.note or (self.measured is not None and self.measured.identical):
            return Severity.INFO
        if self.predicted and self.kind.severity is Severity.ERROR:
            return Severity.WARNING
        return self.kind.severity

    def sort_key(self) -> tuple[int, str, int, str]:
        return (self.severity.rank, self.file or "", self.line or 0, self.kind.value)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind.value,
            "severity": self.severity.value,
            "file": self.file,
            "line": self.line,
            "code": self.code,
            "message": self.message,
            "fix": self.fix,
        }
        if self.parameter is not None:
            out["parameter"] = self.parameter
        if self.parameters:
            out["parameters"] = list(self.parameters)
        out.update(
            tensors=list(self.tensors),
            nodes=list(self.nodes),
            events=list(self.events),
            affected_backward=self.affected_backward,
            count=self.count,
        )
        if self.predicted:
            out["predicted"] = True
        if self.note:
            out["note"] = True
        if self.measured is not None:
            out["measured"] = self.measured.to_dict()
        if self.evidence:
            out["evidence"] = [evidence_to_dict(e) for e in self.evidence]
        if self.thread is not None:
            out["thread"] = self.thread
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(
            kind=FindingKind(data["kind"]),
            file=data.get("file"),
            line=data.get("line"),
            message=data.get("message", ""),
            fix=data.get("fix", ""),
            parameter=data.get("parameter"),
            code=data.get("code", ""),
            tensors=list(data.get("tensors", [])),
            nodes=list(data.get("nodes", [])),
            events=list(data.get("events", [])),
            affected_backward=data.get("affected_backward"),
            count=int(data.get("count", 1)),
            predicted=bool(data.get("predicted", False)),
            note=bool(data.get("note", False)),
            parameters=list(data.get("parameters", [])),
            measured=Measurement.from_dict(data["measured"]) if isinstance(data.get("measured"), dict) else None,
            evidence=[e for e in map(evidence_from_dict, _list(data.get("evidence"))) if e is not None],
            thread=data["thread"] if isinstance(data.get("thread"), str) else None,
        )
