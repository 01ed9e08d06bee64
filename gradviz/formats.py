"""How findings are written for people and machines: text (as `gradviz check` prints), JSON, SARIF 2.1.0, GitHub."""

from __future__ import annotations

import io
import json
import linecache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .analysis.findings import Finding, FindingKind, Severity
from .model import EventKind, Location, Trace
from .terminal import shown

if TYPE_CHECKING:
    from rich.console import Console

#: The choices of `gradviz check --format`; the first is the default.
FORMATS = ("text", "json", "sarif", "github")

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

#: Per kind: what happened, and the fix. The same words as README's table "What each finding means".
RULES: dict[FindingKind, tuple[str, str]] = {
    FindingKind.CUT_EDGE: (
        "a tensor in an autograd graph is detached (`.detach()`, `.data`, `.detach_()`) and what is computed from it "
        "reaches a loss you call `backward()` on; gradients stop at that line",
        "keep it where the cut is intended (GAN discriminator step, truncated BPTT, target network); otherwise remove "
        "it. Logging (`loss.detach().item()`) is not a cut",
    ),
    FindingKind.DEAD_PARAMETER: (
        "a parameter took part in computing a loss, but no backward in the run gave it a gradient: every path was cut",
        "remove the cut, or freeze it explicitly with `requires_grad_(False)`",
    ),
    FindingKind.POISONED_SAVED_TENSOR: (
        "a tensor autograd saved was written in place through an alias sharing its version counter (itself, a view, "
        "a `.detach()` result, an optimizer step): backward raises",
        "`.clone()` before the write, use the out-of-place op, or write after backward",
    ),
    FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR: (
        "a saved tensor's bytes changed through an alias with its own version counter (a `.data` result), or its "
        "`.data` was reassigned while the graph was live: backward succeeds with wrong gradients",
        "use `.detach()` (so PyTorch catches it) and `.clone()`; update under `torch.no_grad()` after backward",
    ),
    FindingKind.DETACH_INPLACE_SAVED: (
        '`.detach_()` on a tensor a node saved as an input: backward raises "Trying to use a saved tensor that has '
        'been detached in-place"',
        "use the out-of-place `x = x.detach()`",
    ),
    FindingKind.UPDATE_WITHOUT_GRADIENT: (
        'an optimizer step, or an in-place update outside `torch.optim` (`p.data.mul_` weight decay in a wrapper, '
        '`p.mul_` under `no_grad`, `p.copy_`), moved a trained parameter that no gradient reached since its last update '
        '(zeros left by `zero_grad(set_to_none=False)` plus momentum or weight decay): detach does not stop parameter '
        'updates. EMA target networks, outside every optimizer, stay silent',
        '`zero_grad(set_to_none=True)`, update only parameters with a gradient, or leave frozen parameters out of the '
        'optimizer',
    ),
    FindingKind.GRAPH_KEPT_ALIVE: (
        'a value with autograd history is stored where it outlives the step (`total_loss += loss`, `losses.append(loss)`, '
        '`val_loss = val_loss + crit(out, y)` without `no_grad`): the graphs of every step stay alive; the message gives '
        "steps held, nodes, bytes of saved tensors and growth per step. The loop variable holding the last step's graph, "
        'and losses summed for one later backward, are not reported',
        '`.item()` / `float()` for statistics, `.detach()` to keep the tensor, `torch.no_grad()` / '
        '`torch.inference_mode()` for evaluation',
    ),
    FindingKind.BACKWARD_THROUGH_FREED_GRAPH: (
        'a backward runs into a graph an earlier backward freed, usually a recurrent state carried into the next chunk '
        'without `.detach()`; `line` is where the new graph is built on the freed one. Predicted as a warning when the '
        'script never reaches that backward',
        'detach the carried state at each chunk start (truncated BPTT); `retain_graph=True` is almost never the fix',
    ),
}

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

_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_GITHUB_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


# ---------------------------------------------------------------------------------------------- paths
def where(file: str | None, line: int | None) -> str:
    """`train.py:24` (relative to the current folder), `?` when the place is unknown."""
    if not file:
        return "?"
    return f"{shown(file)}:{line}" if line else shown(file)


# ---------------------------------------------------------------------------------------------- text
def print_findings(console: Console, findings: list[Finding], *, labels: dict[int, str] | None = None) -> None:
    """Each finding as `gradviz check` prints it: severity, file:line, kind, the source line, message, fix.
    `labels`: text to show after the kind of some findings, by index (`rank 0, 1` under torchrun)."""
    from rich.text import Text

    for index, finding in enumerate(findings):
        head = Text()
        head.append(finding.severity.value, style=SEVERITY_STYLE[finding.severity.value])
        head.append(f"  {where(finding.file, finding.line)}  ")
        head.append(finding.kind.value, style="bold")
        if finding.parameter:
            head.append(f"  ({finding.parameter})")
        if labels and index in labels:
            head.append(f"  [{labels[index]}]")
        console.print(head)
        code = finding.code or (linecache.getline(finding.file, finding.line) if finding.file and finding.line else "")
        if code.strip():
            console.print(Text(f"  {finding.line:>5} | {code.strip()}", style="dim"))
        console.print(Text(f"  {finding.message}"))
        if finding.fix:
            console.print(Text.assemble(("  fix: ", "green"), finding.fix))
        console.print()


def findings_text(findings: list[Finding]) -> str:
    """The same text as `print_findings`, without colour, as a string (for pytest's failure reports)."""
    from rich.console import Console

    buffer = io.StringIO()
    # force_jupyter=False: inside a notebook rich would display each line as a cell output instead of writing it
    print_findings(Console(file=buffer, color_system=None, highlight=False, soft_wrap=True, force_jupyter=False), findings)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------- SARIF
def sarif_document(
    findings: list[Finding],
    trace: Trace,
    *,
    version: str,
    exit_code: int | None = None,
    internal_error: str | None = None,
) -> dict[str, Any]:
    """A SARIF 2.1.0 log as code-scanning services read it: one rule per finding kind, file paths relative to the
    current folder (uriBaseId %SRCROOT%), the other lines involved (the save, the write, the backward) as related
    locations. `internal_error`: gradviz itself failed, so the log is incomplete (executionSuccessful false)."""
    kinds = list(FindingKind)
    invocation: dict[str, Any] = {"executionSuccessful": internal_error is None}
    if exit_code is not None:
        invocation["exitCode"] = exit_code
    notifications: list[dict[str, Any]] = []
    if trace.exception is not None and trace.error is not None and not _clean_exit(trace.error):
        # the script's own error: not a finding of a rule, but the reader of the log must know the run stopped
        notification: dict[str, Any] = {
            "level": "error",
            "message": {"text": f"the script raised {trace.exception.type}: {trace.exception.message}"},
        }
        if trace.exception.location is not None:
            notification["locations"] = [_location(trace.exception.location.file, trace.exception.location.line)]
        notifications.append(notification)
    if internal_error is not None:
        notifications.append({"level": "error", "message": {"text": f"internal error in gradviz: {internal_error}"}})
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "gradviz",
                "version": version,
                "semanticVersion": version,
                "rules": [_rule(kind) for kind in kinds],
            }
        },
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
        "invocations": [invocation],
        "results": [_result(finding, trace, kinds.index(finding.kind)) for finding in findings],
        "columnKind": "unicodeCodePoints",
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def _clean_exit(error: BaseException) -> bool:
    return isinstance(error, SystemExit) and error.code in (None, 0)


def _rule(kind: FindingKind) -> dict[str, Any]:
    happened, fix = RULES[kind]
    level = _SARIF_LEVEL[kind.severity]
    return {
        "id": kind.value,
        "name": "".join(part.capitalize() for part in kind.value.split("_")),
        "shortDescription": {"text": _SHORT[kind]},
        "fullDescription": {"text": _sentence(happened)},
        "help": {
            "text": f"What happened: {_sentence(happened)}\nFix: {_sentence(fix)}",
            "markdown": f"**What happened:** {_sentence(happened)}\n\n**Fix:** {_sentence(fix)}",
        },
        "defaultConfiguration": {"level": level},
        "properties": {"tags": ["pytorch", "autograd", "correctness"], "problem.severity": kind.severity.value},
    }


def _sentence(text: str) -> str:
    text = text.strip()
    return text[0].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


def _result(finding: Finding, trace: Trace, rule_index: int) -> dict[str, Any]:
    text = finding.message if not finding.fix else f"{finding.message}\nFix: {finding.fix}"
    result: dict[str, Any] = {
        "ruleId": finding.kind.value,
        "ruleIndex": rule_index,
        "level": _SARIF_LEVEL[finding.severity],
        "message": {"text": text},
    }
    file = finding.file or trace.script
    if file:
        result["locations"] = [_location(file, finding.line, finding.code)]
    related = _related(finding, trace)
    if related:
        result["relatedLocations"] = related
    if finding.count > 1:
        result["occurrenceCount"] = finding.count
    if finding.parameter:
        result["properties"] = {"parameter": finding.parameter}
    return result


def _location(file: str, line: int | None, code: str = "", *, message: str | None = None, index: int | None = None) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": _artifact(file)}
    if line:
        region: dict[str, Any] = {"startLine": line}
        if code.strip():
            region["snippet"] = {"text": code.rstrip("\n")}
        physical["region"] = region
    location: dict[str, Any] = {"physicalLocation": physical}
    if index is not None:
        location["id"] = index
    if message:
        location["message"] = {"text": message}
    return location


def _artifact(file: str) -> dict[str, Any]:
    path = Path(file).absolute()
    try:
        relative = path.relative_to(Path.cwd())
    except ValueError:  # outside the folder the scan runs in: an absolute URI
        return {"uri": path.as_uri()}
    return {"uri": quote(relative.as_posix()), "uriBaseId": "%SRCROOT%"}


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


def _related(finding: Finding, trace: Trace) -> list[dict[str, Any]]:
    """The other source lines a finding involves, each once: where the node that saved the tensor was made, the
    writes and detaches, the backward."""
    places: list[tuple[Location, str]] = []
    saved_kinds = (
        FindingKind.POISONED_SAVED_TENSOR,
        FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR,
        FindingKind.DETACH_INPLACE_SAVED,
    )
    for node_id in finding.nodes:
        node = trace.nodes.get(node_id)
        if node is not None and node.created is not None:
            what = f"saved for backward by {node.name} here" if finding.kind in saved_kinds else f"{node.name} made here"
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
        related.append(_location(location.file, location.line, location.code, message=what, index=len(related)))
    return related


# ---------------------------------------------------------------------------------------------- GitHub
def github_commands(findings: list[Finding], trace: Trace) -> list[str]:
    """One workflow command per finding (`::error file=train.py,line=24,title=...::message`), GitHub's escaping."""
    lines = []
    for finding in findings:
        properties = {"file": shown(finding.file) if finding.file else None, "line": finding.line, "title": finding.kind.value}
        text = finding.message if not finding.fix else f"{finding.message}\nfix: {finding.fix}"
        lines.append(_command(_GITHUB_COMMAND[finding.severity], properties, text))
    exception = trace.exception
    if exception is not None and trace.error is not None and not _clean_exit(trace.error):
        location = exception.location
        properties = {
            "file": shown(location.file) if location else None,
            "line": location.line if location else None,
            "title": f"the script raised {exception.type}",
        }
        lines.append(_command("error", properties, exception.message or exception.type))
    return lines


def _command(name: str, properties: dict[str, Any], message: str) -> str:
    given = ",".join(f"{key}={_escape_property(str(value))}" for key, value in properties.items() if value is not None)
    return f"::{name} {given}::{_escape_data(message)}" if given else f"::{name}::{_escape_data(message)}"


def _escape_data(text: str) -> str:
    # the escaping GitHub's runner undoes (actions/toolkit's command.ts): % first, so no escape is escaped twice
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def dumps(document: dict[str, Any]) -> str:
    """JSON text as the command prints it: indented, UTF-8 kept, one newline at the end."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
