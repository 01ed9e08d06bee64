"""Findings: what the analysis passes conclude about a trace (a closed vocabulary of kinds)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
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
        )
