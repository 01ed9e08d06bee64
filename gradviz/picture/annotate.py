"""Turn findings into what the graph view marks: coloured saved tensors and leaves, cut edges, protected nodes."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..analysis.evidence import alias_expression, consumer_node
from ..analysis.findings import CutEvidence, FindingKind, LifetimeEvidence, SavedTensorEvidence, version_text
from ..analysis.names import Namer
from .palette import MARK_OF_KIND, Mark

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..analysis.findings import Finding
    from ..analysis.verify import GradientError
    from ..model import Trace

__all__ = ["Annotations", "Cut", "Note", "alias_expression", "annotate", "consumer_node", "saved_lines"]


@dataclass
class Note:
    """How to draw one tensor: its mark, an optional better name, and lines of explanation."""

    style: Mark
    lines: list[str] = field(default_factory=list)
    name: str | None = None


@dataclass
class Cut:
    """A gradient path cut by `.detach()` or `.data`: from the node that made the value to the node that used it."""

    source: str | None  # autograd node that produced the detached tensor
    target: str | None  # autograd node of the first op that used the alias with grad; None if never used so
    alias: str | None  # the detached tensor
    label: str


@dataclass
class Annotations:
    saved: dict[tuple[str, str], Note] = field(default_factory=dict)  # (node id, saved name) -> note
    leaves: dict[str, Note] = field(default_factory=dict)  # tensor id -> note
    cuts: list[Cut] = field(default_factory=list)
    protected: set[str] = field(default_factory=set)  # node ids that simplification must keep visible
    # nodes of findings that repeat more often than the evidence kept (EVIDENCE_LIMIT): which steps they are in is
    # not known in full, so a roll names no steps for them
    partial: set[str] = field(default_factory=set)
    holders: dict[str, Note] = field(default_factory=dict)  # node id -> a value keeping its graph alive / freed


def annotate(
    trace: Trace, findings: list[Finding], namer: Namer | None = None, step_of: Mapping[str, int] | None = None
) -> Annotations:
    """What each finding marks in the graph view, read from the evidence the analysis attached to it. `step_of`:
    autograd node -> the number of its step, when the run has several: a saved tensor's versions then name the step
    they are of (`v39, step 20`), since the drawing of a roll shows one step's node for all and the text states the
    first occurrence's versions."""
    notes = Annotations()
    step_of = step_of or {}
    namer = Namer(trace) if namer is None else namer
    acc_of: dict[str, list[str]] = defaultdict(list)  # leaf tensor -> its AccumulateGrad nodes
    for node in trace.nodes.values():
        if node.variable is not None:
            acc_of[node.variable].append(node.id)
    for finding in findings:
        kind = finding.kind
        notes.protected.update(n for n in finding.nodes if n in trace.nodes)
        if kind in _SAVED_KINDS:
            # every occurrence the analysis kept: a loop repeating the write in each step is marked in each step
            kept = [saved for saved in finding.evidence if isinstance(saved, SavedTensorEvidence)]
            for saved in kept:
                own = _own_gradient(trace, finding, [e.node for e in kept if e.write_event == saved.write_event])
                _mark_saved(trace, finding, saved, namer, notes, step_of.get(saved.node), own)
            if finding.count > len(kept):
                notes.partial.update(saved.node for saved in kept)
        elif kind in (FindingKind.DEAD_PARAMETER, FindingKind.UPDATE_WITHOUT_GRADIENT):
            # a dead_parameter finding names every parameter its cause starves: each gets its own note
            dead = kind is FindingKind.DEAD_PARAMETER
            marked = finding.tensors if dead else finding.tensors[:1]
            for tid in marked or ([] if finding.parameter is None else _by_parameter(trace, finding.parameter)):
                if tid not in trace.tensors:
                    continue
                if dead:
                    note = Note(Mark.DEAD, ["no gradient"], trace.tensors[tid].parameter or finding.parameter)
                else:
                    where = f" at line {finding.line}" if finding.line else ""
                    note = Note(Mark.UPDATED, [f"updated{where} without a gradient"], finding.parameter)
                if tid not in notes.leaves or dead:
                    notes.leaves[tid] = note
                notes.protected.update(acc_of.get(tid, []))
        elif kind in (FindingKind.GRAPH_KEPT_ALIVE, FindingKind.BACKWARD_THROUGH_FREED_GRAPH):
            _mark_lifetime(trace, finding, namer, notes)
        elif kind is FindingKind.CUT_EDGE:
            # one cut per occurrence the analysis kept (a loop detaching at one line: up to EVIDENCE_LIMIT)
            for evidence in finding.evidence:
                if not isinstance(evidence, CutEvidence):
                    continue
                line = f"  line {evidence.line}" if evidence.line else ""
                label = f"\N{BLACK SCISSORS} {evidence.alias_expression}{line}"
                use = evidence.use if evidence.use in trace.nodes else None
                notes.cuts.append(Cut(evidence.source_node, use, evidence.alias, label))
                notes.protected.update(n for n in (evidence.source_node, use) if n is not None)
    return notes


def _mark_lifetime(trace: Trace, finding: Finding, namer: Namer, notes: Annotations) -> None:
    """A value that keeps many steps' graphs alive, or a graph built on one backward already freed."""
    where = f"line {finding.line}" if finding.line else "?"
    evidence = next((e for e in finding.evidence if isinstance(e, LifetimeEvidence)), None)
    if finding.kind is FindingKind.GRAPH_KEPT_ALIVE:
        steps = evidence.steps if evidence is not None and evidence.steps is not None else finding.count
        unit = evidence.unit if evidence is not None else "step"  # the message's word: "graphs of 3 iterations"
        for tid, nid in zip(finding.tensors, finding.nodes):
            name = namer.tensor(tid) if tid in trace.tensors else None
            notes.holders[nid] = Note(Mark.KEPT, [f"keeps {steps} {unit}s' graphs alive", f"stored at {where}"], name)
    elif evidence is not None and evidence.node is not None:  # the freed node the new graph builds on
        notes.holders[evidence.node] = Note(Mark.FREED, ["graph freed by an earlier backward", f"reused at {where}"], None)


def _by_parameter(trace: Trace, name: str) -> list[str]:
    return [t.id for t in trace.tensors.values() if t.parameter == name][:1]


def _own_gradient(trace: Trace, finding: Finding, readers: list[str]) -> GradientError | None:
    """Of the gradients --verify found wrong, the one a write's readers (the nodes that saved what it changed) reach
    first in backward: block 1's `fc2` names `blocks.1.fc2.weight`, not the finding's worst (block 0's, reached only
    through block 1's input gradient). None: the finding's worst (nothing measured wrong, or none reached)."""
    measured = finding.measured
    if measured is None or measured.identical:
        return None
    wrong = {g.tensor: g for g in measured.gradients if not g.identical}
    seen = set(readers)
    layer = [n for n in readers if n in trace.nodes]
    while layer:
        reached = [wrong[node.variable] for node in (trace.nodes[n] for n in layer) if node.variable in wrong]
        if reached:
            return max(reached, key=lambda g: (g.max_rel is not None, g.max_rel or 0.0, g.max_abs or 0.0))
        after = []
        for nid in layer:
            for nxt in trace.nodes[nid].next:
                if nxt is not None and nxt not in seen and nxt in trace.nodes:
                    seen.add(nxt)
                    after.append(nxt)
        layer = after
    return None


def _mark_saved(trace: Trace, finding: Finding, evidence: SavedTensorEvidence, namer: Namer, notes: Annotations,
                step: int | None, own: GradientError | None = None) -> None:
    node = trace.nodes.get(evidence.node)
    if node is None:
        return
    targets = {evidence.tensor} | ({evidence.writer} if evidence.writer else set())
    for saved in node.saved:
        if saved.name == evidence.saved_name or (saved.tensor is not None and saved.tensor in targets):
            style = MARK_OF_KIND[finding.kind]
            if finding.measured is not None and finding.measured.identical:  # --verify: the write did no harm
                style = Mark.CORRUPTED_UNREAD
            notes.saved.setdefault((node.id, saved.name), Note(style, saved_lines(finding, evidence, namer, step=step, gradient=own)))
    notes.protected.add(node.id)


#: The kinds that mark a saved tensor (their marks: palette.MARK_OF_KIND).
_SAVED_KINDS = (FindingKind.POISONED_SAVED_TENSOR, FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR,
                FindingKind.DETACH_INPLACE_SAVED)


def saved_lines(finding: Finding, evidence: SavedTensorEvidence, namer: Namer, *, step: int | None = None,
                gradient: GradientError | None = None) -> list[str]:
    """The lines under a saved tensor in the graph view, from the finding's evidence; `step`: the step the evidence's
    node is in, named beside its versions when the run has several; `gradient`: the measured gradient to name (the
    node's own), else the finding's worst."""
    in_step = f", step {step}" if step is not None else ""
    if finding.kind is FindingKind.DETACH_INPLACE_SAVED:
        where = f" at line {evidence.write_line}" if evidence.write_line else ""
        return [f"detached in place{where}", "backward cannot use it"]
    line = evidence.write_line
    via = namer.tensor(evidence.writer) if evidence.writer and evidence.writer in namer.trace.tensors else None
    if finding.kind is FindingKind.POISONED_SAVED_TENSOR:
        text = [f"saved {version_text(evidence.saved_version)}, now {version_text(evidence.version_now)}"
                f"{f' (step {step})' if step is not None else ''},"]
        if line:
            text.append(f"written at line {line}" + (f" via {via}" if via else ""))
        else:
            text.append("written in place after it was saved" + (f" via {via}" if via else ""))
        if evidence.writer_alias:
            text.append(f"({evidence.writer_alias} shares the counter)")
        return text
    # silent: the bytes changed through an alias with its own version counter
    alias = evidence.writer_alias or via
    where = f", line {line}" if line else ""
    lines = [f"bytes changed via {alias}{where};" if alias else f"bytes changed{where};",
             f"version unchanged ({version_text(evidence.saved_version)}{in_step})"]
    if finding.measured is not None:  # --verify: how wrong the gradients came out
        lines.append(finding.measured.short(gradient))
    return lines
