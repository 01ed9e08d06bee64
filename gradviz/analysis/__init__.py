"""Analysis: from a trace (plain data, no torch) to findings about cut edges, dead parameters, saved tensors, updates
without gradient and graph lifetimes; `diagnose` runs every pass, one module per family of kinds."""

from __future__ import annotations

from .. import collector
from ..model import EventKind, Trace
from .collection import Diagnosis, Findings
from .context import Context
from .cuts import cut_edge_findings, cuts
from .dead_parameters import dead_parameter_findings
from .findings import EVIDENCE_LIMIT, Finding, FindingKind, Severity
from .freed_graph import backward_through_freed_graph_findings
from .graphs import Dataflow, autograd_graph, dataflow_graph
from .kept_alive import graph_kept_alive_findings, kept_alive
from .lifetime import Lifetimes, lifetimes
from .saved_tensors import saved_tensor_findings
from .steps import thread_of
from .updates import manual_update_findings, update_without_gradient_findings

__all__ = [
    "Dataflow", "Diagnosis", "Finding", "FindingKind", "Findings", "Severity", "autograd_graph", "dataflow_graph",
    "diagnose", "diagnosis",
]


def diagnose(trace: Trace) -> Findings:
    """All findings for `trace`, one per kind, line and parameter, ordered by severity, then file and line (a list
    that displays itself as a table in a notebook)."""
    return diagnosis(trace).findings


def diagnosis(trace: Trace) -> Diagnosis:
    """`diagnose(trace)`, with the lifetimes and the names it computed on the way (the views reuse both)."""
    with collector.paused():  # the passes only build indexes and findings: no full collections over the trace
        life = lifetimes(trace)
        ctx = Context.of(trace)
        found = Findings(_diagnose(trace, life, ctx), file_labels=trace.file_labels)
        return Diagnosis(found, life, ctx.facts.namer)


def _diagnose(trace: Trace, life: Lifetimes | None = None, ctx: Context | None = None) -> list[Finding]:
    ctx = Context.of(trace) if ctx is None else ctx
    found = list(cuts(ctx))
    dead = dead_parameter_findings(ctx, found)
    findings = (
        cut_edge_findings(ctx, found)
        + dead
        + saved_tensor_findings(ctx)
        + update_without_gradient_findings(ctx)
    )
    life = lifetimes(trace) if life is None else life
    kept = kept_alive(trace, life)
    findings += graph_kept_alive_findings(trace, life, kept) + backward_through_freed_graph_findings(trace, life)
    findings += manual_update_findings(trace, {tid for finding in dead for tid in finding.tensors})
    _name_threads(trace, findings)
    return sorted(_merge_repeats(findings), key=Finding.sort_key)


def _name_threads(trace: Trace, findings: list[Finding]) -> None:
    """Each finding whose backward ran in another thread of the program names that thread (the tracing thread's
    are unnamed): two threads running the same code tell `line 12` apart by it."""
    threads = {e.seq: thread_of(e) for e in trace.events if e.kind == EventKind.BACKWARD}
    for finding in findings:
        if finding.affected_backward is not None:
            finding.thread = threads.get(finding.affected_backward)


def _merge_repeats(findings: list[Finding]) -> list[Finding]:
    """A loop repeats the same mistake at the same line: report it once, counting the repeats."""
    merged: dict[tuple[object, ...], Finding] = {}
    for finding in findings:
        # (two threads running the same code make the same mistake at one line: each its own finding, naming it)
        key = (finding.kind, finding.file, finding.line, finding.parameter, finding.thread)
        first = merged.get(key)
        if first is None:
            merged[key] = finding
            continue
        first.count += 1
        first.evidence.extend(finding.evidence[: max(EVIDENCE_LIMIT - len(first.evidence), 0)])
        if first.affected_backward is None and finding.affected_backward is not None:
            first.affected_backward = finding.affected_backward
        if finding.measured is not None:  # --verify: the worst of the repeats, naming the steps measured
            if first.measured is None:
                first.measured, first.message = finding.measured, finding.message
            else:
                worse = finding if finding.measured.badness() > first.measured.badness() else first
                sentence = (worse.measured or finding.measured).sentence()
                combined = first.measured.merge(finding.measured)
                first.message = worse.message.replace(sentence, combined.sentence())
                first.measured = combined
    return list(merged.values())
