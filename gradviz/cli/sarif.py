"""Findings as a SARIF 2.1.0 log for code scanning: one rule per finding kind, repository-relative paths, messages
linking their related locations (`[saved here](1)`), stable fingerprints, accepted findings as suppressed results."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..analysis.evidence import evidence_summary
from ..analysis.findings import Finding, FindingKind, Severity
from ..analysis.names import Namer
from ..model import EventKind, Location, Trace
from ..paths import relative, root_uri, source_root, uri_of
from ..text import clean

if TYPE_CHECKING:
    from .suppress import Suppressed

__all__ = ["SARIF_SCHEMA", "merge_results", "sarif_document", "sarif_results", "script_notifications"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}

_SHORT = {
    FindingKind.CUT_EDGE: "Gradient path cut by .detach() / .data / .detach_()",
    FindingKind.DEAD_PARAMETER: "Parameter used in a loss never receives a gradient",
    FindingKind.POISONED_SAVED_TENSOR: "Saved tensor modified in place: backward raises",
    FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR: "Saved tensor changed behind autograd's back: gradients silently wrong",
    FindingKind.DETACH_INPLACE_SAVED: "detach_() on a tensor saved for backward: backward raises",
    FindingKind.UPDATE_WITHOUT_GRADIENT: "Parameter updated in place without a gradient",
    FindingKind.GRAPH_KEPT_ALIVE: "Value with autograd history stored across steps: every step's graph stays alive",
    FindingKind.BACKWARD_THROUGH_FREED_GRAPH: "Backward through a graph an earlier backward freed",
}

_EVENT_WORDS = {
    EventKind.BACKWARD: "backward here",
    EventKind.INPLACE_WRITE: "written in place here",
    EventKind.DATA_GET: "`.data` taken here",
    EventKind.DATA_SET: "`.data` reassigned here",
    EventKind.DETACH: "detached here",
    EventKind.DETACH_: "detached in place here",
    EventKind.OPTIMIZER_STEP: "optimizer step here",
    EventKind.REQUIRES_GRAD_: "`requires_grad_` here",
}

_SAVED_KINDS = (
    FindingKind.POISONED_SAVED_TENSOR,
    FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR,
    FindingKind.DETACH_INPLACE_SAVED,
)


def sarif_document(
    findings: list[Finding],
    trace: Trace,
    *,
    version: str,
    namer: Namer | None = None,
    rules: dict[FindingKind, tuple[str, str]],
    exit_code: int | None = None,
    internal_error: str | None = None,
    suppressed: Sequence[Suppressed] = (),
    results: list[dict[str, Any]] | None = None,
    notifications: Iterable[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The log: `results` and `notifications` when given (every rank's, merged under torchrun), else made from
    `findings`, `suppressed` and the trace's own error. `internal_error`: gradviz itself failed, so the log is
    incomplete (executionSuccessful false). `namer`: as for `sarif_results`."""
    root = source_root()
    invocation: dict[str, Any] = {"executionSuccessful": internal_error is None}
    if exit_code is not None:
        invocation["exitCode"] = exit_code
    told = list(script_notifications(trace) if notifications is None else notifications)
    if internal_error is not None:
        told.append({"level": "error", "message": {"text": clean(f"internal error in gradviz: {internal_error}")}})
    if told:
        invocation["toolExecutionNotifications"] = told
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "gradviz",
                "version": version,
                "semanticVersion": version,
                "informationUri": "https://pypi.org/project/torch-gradviz/",
                "rules": [_rule(kind, rules[kind]) for kind in FindingKind],
            }
        },
        "originalUriBaseIds": {"%SRCROOT%": {"uri": root_uri(root)}},
        "invocations": [invocation],
        "results": sarif_results(findings, trace, suppressed=suppressed, namer=namer) if results is None else results,
        "columnKind": "unicodeCodePoints",
    }
    window = trace.window
    if window is not None and window.closed:  # only part of the run was traced: which, and what was traced again
        run["properties"] = {"window": {
            "unit": window.unit, "limit": window.limit, "traced": window.traced, "total": window.total,
            "description": window.describe(), "coverage": clean(window.coverage()),
            "rearmed": [
                {"step": entry.step, "reason": entry.reason, "kind": entry.kind, "line": entry.line,
                 "file": clean(relative(entry.file)) if entry.file else None, "label": entry.label()}
                for entry in window.rearmed
            ],
        }}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def script_notifications(trace: Trace, *, who: str = "the script") -> list[dict[str, Any]]:
    """The script's own error: not a finding of a rule, but the reader of the log must know the run stopped; and the
    threads whose torch calls are not in the trace (the log covers less than the run)."""
    told: list[dict[str, Any]] = []
    unrecorded = trace.unrecorded_threads_summary()
    if unrecorded:
        told.append({"level": "warning", "message": {"text": clean(f"{who}: {unrecorded}")}})
    record = trace.exception
    if record is None or trace.error is None or _clean_exit(trace.error):
        return told
    notification: dict[str, Any] = {
        "level": "error",
        "message": {"text": clean(f"{who} raised {record.type}: {record.message}")},
    }
    if record.location is not None:
        notification["locations"] = [_location(record.location.file, record.location.line)]
    return [notification, *told]


def sarif_results(
    findings: list[Finding], trace: Trace, *, suppressed: Sequence[Suppressed] = (), namer: Namer | None = None
) -> list[dict[str, Any]]:
    """One result per finding, then one per accepted finding carrying its suppression (code scanning closes those).
    `namer`: the names the diagnosis gave (a `Diagnosis` holds them); only hand-made findings without
    one have the trace named here."""
    kinds = list(FindingKind)
    namer = namer or Namer(trace)
    results = [_result(finding, trace, kinds.index(finding.kind), namer) for finding in findings]
    for accepted in suppressed:
        result = _result(accepted.finding, trace, kinds.index(accepted.finding.kind), namer)
        result["suppressions"] = [
            {"kind": "inSource" if accepted.in_source else "external", "justification": clean(accepted.reason)}
        ]
        results.append(result)
    return results


def merge_results(per_rank: Sequence[tuple[int, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    """Every rank's results as one list: the same finding on several ranks once, `properties.ranks` naming them."""
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for rank, results in per_rank:
        for result in results:
            location = (result.get("locations") or [{}])[0].get("physicalLocation", {})
            key = (
                result.get("ruleId"),
                location.get("artifactLocation", {}).get("uri"),
                location.get("region", {}).get("startLine"),
                result.get("properties", {}).get("parameter"),
                bool(result.get("suppressions")),
            )
            if key not in merged:
                merged[key] = {**result, "properties": {**result.get("properties", {}), "ranks": []}}
            merged[key]["properties"]["ranks"].append(rank)
    return list(merged.values())


# ---------------------------------------------------------------------------------------------- pieces
def _clean_exit(error: BaseException) -> bool:
    return isinstance(error, SystemExit) and error.code in (None, 0)


def _rule(kind: FindingKind, texts: tuple[str, str]) -> dict[str, Any]:
    happened, fix = texts
    return {
        "id": kind.value,
        "name": "".join(part.capitalize() for part in kind.value.split("_")),
        "shortDescription": {"text": _SHORT[kind]},
        "fullDescription": {"text": _plain(_sentence(happened))},
        "help": {
            "text": _plain(f"What happened: {_sentence(happened)}\nFix: {_sentence(fix)}"),
            "markdown": f"**What happened:** {_sentence(happened)}\n\n**Fix:** {_sentence(fix)}",
        },
        "defaultConfiguration": {"level": _LEVEL[kind.severity]},
        "properties": {"tags": ["pytorch", "autograd", "correctness"], "problem.severity": kind.severity.value},
    }


def _sentence(text: str) -> str:
    text = text.strip()
    return text[0].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


def _plain(markdown: str) -> str:
    """SARIF's `text` is plain: the Markdown code spans our messages use lose their backticks."""
    return markdown.replace("`", "")


def _link_text(text: str) -> str:
    """Plain text where `[...](n)` means a link: literal brackets escaped (SARIF 2.1.0, 3.11.6)."""
    return re.sub(r"([\[\]\\])", r"\\\1", text)


def _result(finding: Finding, trace: Trace, rule_index: int, namer: Namer) -> dict[str, Any]:
    related = _related(finding, trace)
    links = ", ".join(f"[{_link_text(_plain(loc['message']['text']))}]({loc['id']})" for loc in related)
    message = clean(finding.message)
    fix = clean(finding.fix)
    text = _link_text(_plain(message)) + (f" ({links})" if links else "") + (f"\nFix: {_link_text(_plain(fix))}" if fix else "")
    markdown_links = ", ".join(f"[{_markdown_escape(loc['message']['text'])}]({loc['id']})" for loc in related)
    markdown = message + (f" ({markdown_links})" if markdown_links else "") + (f"\n\n**Fix:** {fix}" if fix else "")
    result: dict[str, Any] = {
        "ruleId": finding.kind.value,
        "ruleIndex": rule_index,
        "level": _LEVEL[finding.severity],
        "message": {"text": text, "markdown": markdown},
    }
    file = finding.file or trace.script
    if file:
        result["locations"] = [_location(file, finding.line, finding.code)]
    if related:
        result["relatedLocations"] = related
    result["partialFingerprints"] = {"gradviz/v1": _fingerprint(finding, file)}
    if finding.count > 1:
        result["occurrenceCount"] = finding.count
    properties: dict[str, Any] = {}
    if finding.parameter:
        properties["parameter"] = clean(finding.parameter)
    if finding.thread is not None:
        properties["thread"] = clean(finding.thread)
    if finding.evidence:  # the facts the message states, as data (the first occurrence's)
        summary = evidence_summary(finding.evidence[0], namer)
        properties["evidence"] = {k: clean(v) if isinstance(v, str) else v for k, v in summary.items()}
    if finding.measured is not None:  # --verify: how wrong the gradients came out
        properties["measured"] = finding.measured.to_dict()
    if properties:
        result["properties"] = properties
    return result


def _markdown_escape(text: str) -> str:
    return text.replace("[", "\\[").replace("]", "\\]")


def _fingerprint(finding: Finding, file: str | None) -> str:
    """Stable while lines move: the kind, the repository-relative file, the reported line's text (not its number),
    the parameter. Code scanning matches alerts across commits with it."""
    parts = [finding.kind.value, relative(file) if file else "", " ".join(finding.code.split()), finding.parameter or ""]
    digest = hashlib.sha256("\0".join(clean(part) for part in parts).encode("utf-8")).hexdigest()
    return f"{digest[:32]}:1"


def _location(file: str, line: int | None, code: str = "", *, message: str | None = None, index: int | None = None) -> dict[str, Any]:
    uri, inside = uri_of(file)
    artifact: dict[str, Any] = {"uri": uri, "uriBaseId": "%SRCROOT%"} if inside else {"uri": uri}
    physical: dict[str, Any] = {"artifactLocation": artifact}
    if line:
        region: dict[str, Any] = {"startLine": line}
        if code.strip():
            region["snippet"] = {"text": clean(code.rstrip("\n"))}
        physical["region"] = region
    location: dict[str, Any] = {"physicalLocation": physical}
    if index is not None:
        location["id"] = index
    if message:
        location["message"] = {"text": _plain(message), "markdown": message}
    return location


def _related(finding: Finding, trace: Trace) -> list[dict[str, Any]]:
    """The other source lines a finding involves, each once, numbered from 1 (the message links to them): where
    the node that saved the tensor was made, the writes and detaches, the backward."""
    places: list[tuple[Location, str]] = []
    for node_id in finding.nodes:
        node = trace.nodes.get(node_id)
        if node is not None and node.created is not None:
            what = f"saved for backward by {node.name} here" if finding.kind in _SAVED_KINDS else f"{node.name} made here"
            places.append((node.created, what))
    by_seq = {event.seq: event for event in trace.events} if finding.events else {}
    for seq in finding.events:
        event = by_seq.get(seq)
        if event is not None and event.location is not None:
            places.append((event.location, _EVENT_WORDS.get(event.kind, event.kind.value.replace("_", " "))))
    related: list[dict[str, Any]] = []
    seen = {(finding.file, finding.line)}
    for location, what in places:
        key = (location.file, location.line)
        if key in seen:
            continue
        seen.add(key)
        related.append(_location(location.file, location.line, location.code, message=what, index=len(related) + 1))
    return related
