"""How findings are written for people and machines: text (as `gradviz check` prints), JSON, SARIF 2.1.0 (through
gradviz.sarif), GitHub workflow commands."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..analysis.findings import Finding, FindingKind, Severity
from ..model import Trace
from ..paths import relative, source_lines
from ..text import clean, for_terminal, in_thread
from .terminal import shown

if TYPE_CHECKING:
    from rich.console import Console

    from ..analysis.names import Namer
    from .suppress import Suppressed

#: The choices of `gradviz check --format`; the first is the default.
FORMATS = ("text", "json", "sarif", "github")

#: Per kind: what happened, and the fix. The same words as README's table "What each finding means".
RULES: dict[FindingKind, tuple[str, str]] = {
    FindingKind.CUT_EDGE: (
        'a tensor in an autograd graph is cut (`.detach()`, `.data`, `.detach_()` (also of a base whose earlier view '
        'feeds the loss, once either is written in place), a re-wrap: `torch.tensor(t)`, `t.new_tensor(t)`, '
        "`Variable(t.data)`, `torch.from_numpy(t.data.numpy())`, or a parameter's own `self.weight.data` in "
        '`forward`) and what is computed from it reaches a loss you call `backward()` on. Not a cut: a copy of a '
        "parameter kept while it trains (`copy.deepcopy(w).requires_grad_(False)`, `p.data.clone()` as a teacher, "
        "EMA or regulariser's reference, read after the parameter moved), and `.data` read only for its size, dtype "
        'or device (`w.data.new_zeros(...)`, `torch.zeros_like(w.data)`, `x.data.size(0)`): no gradient of a trained '
        'parameter runs through them',
        'keep it where the cut is intended (GAN discriminator step, truncated BPTT, a teacher or target network); '
        'otherwise remove it. Logging (`loss.detach().item()`) is not a cut',
    ),
    FindingKind.DEAD_PARAMETER: (
        'parameters the program trains took part in computing a loss, but no backward in the run gave them a '
        'gradient: every path was cut (or ran under `no_grad`; inside `checkpoint(..., use_reentrant=True)`, '
        "reported at the `checkpoint` call, whose inputs do not require grad, with PyTorch's own warning quoted). "
        'One finding per cause, naming its '
        'parameters grouped by module (`backbone.0: weight, bias; backbone.2: weight, bias`); past three modules, '
        'modules alike but for their numbers as one pattern, counted (a 12-layer LoRA: "24 parameters in 12 modules '
        '(`model.*: lora_A, lora_B` for * in 0-11)"); JSON\'s `parameters` lists the full names. A model no '
        'optimizer holds (a teacher) is frozen on purpose',
        'remove the cut (under a reentrant checkpoint: `use_reentrant=False`), or freeze it explicitly with `requires_grad_(False)`',
    ),
    FindingKind.POISONED_SAVED_TENSOR: (
        'a tensor autograd saved was written in place through an alias sharing its version counter (itself, a view, '
        'a `.detach()` result, an optimizer step), also where the write missed its bytes (another row of the base a '
        'saved row is a view of: autograd counts versions, not bytes): backward raises; the message says where '
        '(`inside model.forward`, the module, the line)',
        '`.clone()` before the write, use the out-of-place op, or write after backward',
    ),
    FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR: (
        "a saved tensor's bytes changed through an alias with its own version counter (a `.data` result, a view or "
        '`.detach()` of one), or its `.data` was reassigned while the graph was live, or a batch norm in train mode '
        'updated the running statistics a graph made in eval mode saved: backward succeeds with wrong gradients',
        'use `.detach()` (so PyTorch catches it) and `.clone()`; update under `torch.no_grad()` after backward',
    ),
    FindingKind.DETACH_INPLACE_SAVED: (
        '`.detach_()` on a tensor a node saved as an input: backward raises "Trying to use a saved tensor that has '
        'been detached in-place"',
        'use the out-of-place `x = x.detach()`',
    ),
    FindingKind.UPDATE_WITHOUT_GRADIENT: (
        'an optimizer step, or an in-place update outside `torch.optim` (`p.data.mul_` weight decay in a wrapper, '
        '`p.mul_` under `no_grad`, `p.copy_`), moved a trained parameter that no gradient reached since its last '
        'update (zeros left by `zero_grad(set_to_none=False)` plus momentum or weight decay): detach does not stop '
        "parameter updates. A parameter's initialisation (a model built after an earlier backward: a sweep, k-fold) "
        'is not an update; a gradient written by FSDP2 (a sharded DTensor), by a backward nested in a reentrant '
        'checkpoint, or by the program itself (`p.grad = g` from `torch.func.grad`) is a gradient; EMA target '
        'networks, outside every optimizer, stay silent. A custom `step()` that gives a parameter without `.grad` '
        'one itself (`p.grad = torch.zeros_like(p)` for frozen parameters) is reported at that line, and only when '
        'the update then moved its values',
        '`zero_grad(set_to_none=True)`, update only parameters with a gradient, or leave frozen parameters out of '
        'the optimizer',
    ),
    FindingKind.GRAPH_KEPT_ALIVE: (
        'a value with autograd history is stored where it outlives the step (`total_loss += loss`, '
        '`losses.append(loss)`, `val_loss = val_loss + crit(out, y)` without `no_grad`): the graphs of every step stay '
        'alive; the message gives steps held, nodes, bytes of saved tensors and growth per step. After the step window '
        'the list (or dict) holding the traced values is looked into at the end for more of their kind the untraced '
        'steps stored (`val_history` with one validation batch traced and three at the end: 3 steps, 2 of them '
        "untraced; `untraced` in the JSON evidence). The loop variable holding the last step's graph, a value detached "
        'in place (`h.detach_()`: it holds no graph any more, for this finding and for '
        '`backward_through_freed_graph`), losses summed for one later backward, and a gradient taken with '
        "`create_graph=True` (MAML's inner step, a gradient penalty: part of a loss, not a step) are not reported",
        '`.item()` / `float()` for statistics, `.detach()` to keep the tensor, `torch.no_grad()` / '
        '`torch.inference_mode()` for evaluation',
    ),
    FindingKind.BACKWARD_THROUGH_FREED_GRAPH: (
        'a backward runs into a graph an earlier backward freed, usually a recurrent state carried into the next chunk '
        'without `.detach()`; `line` is where the new graph is built on the freed one. Predicted as a warning when a '
        'state is carried into a new graph after the freeing but the script never reaches that backward; nothing for a '
        'value built before the freeing, on a side branch the freeing backward passed by (`probs = logits.softmax(-1)` '
        'beside the loss, read for metrics): no backward of the program reaches it; if one does, it is an error whose '
        'fix is one backward of both or `retain_graph=True` on the first. Not reported either: a value built on a loss '
        'that `backward()` or `autograd.grad` already started from (`total_loss = total_loss + loss * n`, '
        "`losses.append(loss / k)`), or that loss itself (MAML's inner loss): its backward would reach the freed graph "
        'only by backpropagating that loss a second time, which is bookkeeping (`graph_kept_alive` says what keeping '
        'it costs)',
        'detach the carried state at each chunk start (truncated BPTT); `retain_graph=True` is almost never the fix',
    ),
}

_GITHUB_COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


# ---------------------------------------------------------------------------------------------- paths
def where(file: str | None, line: int | None) -> str:
    """`train.py:24` (relative to the current folder), `?` when the place is unknown."""
    if not file:
        return "?"
    return f"{shown(file)}:{line}" if line else shown(file)


# ---------------------------------------------------------------------------------------------- text
def _line_of(file: str | None, line: int | None) -> str:
    """Line `line` of `file` as the program wrote it; "" when it cannot be read (see `source_lines`)."""
    lines = source_lines(file) if file and line else []
    return lines[line - 1] if line and 0 < line <= len(lines) else ""


def print_findings(console: Console, findings: list[Finding], *, labels: dict[int, str] | None = None) -> None:
    """Each finding as `gradviz check` prints it: severity, file:line, kind, the source line, message, fix.
    `labels`: text to show after the kind of some findings, by index (`rank 0, 1` under torchrun)."""
    from rich.text import Text

    safe = for_terminal  # file names, source lines and messages come from the program: no ESC, no `::error`
    for index, finding in enumerate(findings):
        head = Text()
        head.append(finding.severity.value, style=SEVERITY_STYLE[finding.severity.value])
        head.append(f"  {where(finding.file, finding.line)}  ")
        head.append(finding.kind.value, style="bold")
        if finding.parameter:
            head.append(f"  ({safe(finding.parameter)})")
        if finding.thread is not None:
            head.append(f"  {safe(in_thread(finding.thread))}")
        if labels and index in labels:
            head.append(f"  [{labels[index]}]")
        console.print(head)
        code = finding.code or _line_of(finding.file, finding.line)
        if code.strip():
            console.print(Text(f"  {finding.line:>5} | {safe(code.strip())}", style="dim"))
        console.print(Text(safe(f"  {finding.message}")))
        if finding.fix:
            console.print(Text.assemble(("  fix: ", "green"), safe(finding.fix)))
        console.print()


def print_suppressed(console: Console, suppressed: Sequence[Suppressed]) -> None:
    """`--show-suppressed`: each accepted finding, with what accepted it."""
    from rich.text import Text

    for accepted in suppressed:
        finding = accepted.finding
        line = Text("suppressed", style="dim")
        line.append(f"  {where(finding.file, finding.line)}  ")
        line.append(finding.kind.value, style="bold")
        line.append(f"  by {for_terminal(accepted.reason)}: {for_terminal(first_sentence(finding.message))}")
        console.print(line)


def first_sentence(message: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else ""
    match = re.match(r"(.+?[.!?])\s+(?=[A-Z`\"'(])", first)
    return match.group(1) if match else first



def findings_text(findings: list[Finding]) -> str:
    """The same text as `print_findings`, without colour, as a string (for pytest's failure reports)."""
    from rich.console import Console

    buffer = io.StringIO()
    # force_jupyter=False: inside a notebook rich would display each line as a cell output instead of writing it
    print_findings(Console(file=buffer, color_system=None, highlight=False, soft_wrap=True, force_jupyter=False), findings)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------- SARIF
def sarif_document(findings: list[Finding], trace: Trace, *, version: str, **options: Any) -> dict[str, Any]:
    """A SARIF 2.1.0 log of `findings` (see gradviz.sarif): the rules' texts are README's table, RULES."""
    from .sarif import sarif_document as document

    return document(findings, trace, version=version, rules=RULES, **options)


def ci_text(format: str, findings: list[Finding], trace: Trace, *, version: str, exit_code: int,
            internal_error: str | None = None, suppressed: Sequence[Suppressed] = (), namer: Namer | None = None) -> str:
    """What `--format sarif` (one SARIF 2.1.0 log) or `--format github` (one workflow command per finding) prints."""
    if format == "sarif":
        document = sarif_document(findings, trace, version=version, exit_code=exit_code, internal_error=internal_error,
                                  suppressed=suppressed, namer=namer)
        return dumps(document)
    return "".join(line + "\n" for line in github_commands(findings, trace))


# ---------------------------------------------------------------------------------------------- JSON
def finding_dict(finding: Finding) -> dict[str, Any]:
    """A finding as `--json` writes it: its file relative to the repository root (git root, else here)."""
    data = finding.to_dict()
    if finding.file:
        data["file"] = clean(relative(finding.file))
    return data


# ---------------------------------------------------------------------------------------------- GitHub
def github_commands(
    findings: list[Finding], trace: Trace | None, *, labels: dict[int, str] | None = None, who: str = "the script"
) -> list[str]:
    """One workflow command per finding (`::error file=train.py,line=24,title=...::message`), GitHub's escaping,
    paths relative to the repository root. `labels`: text added to some findings' titles, by index (`rank 1`)."""
    lines = []
    for index, finding in enumerate(findings):
        title = finding.kind.value + (f" {in_thread(finding.thread)}" if finding.thread is not None else "")
        title += f" ({labels[index]})" if labels and index in labels else ""
        properties = {"file": _github_path(finding.file), "line": finding.line, "title": title}
        text = finding.message if not finding.fix else f"{finding.message}\nfix: {finding.fix}"
        lines.append(_command(_GITHUB_COMMAND[finding.severity], properties, text))
    window = trace.window if trace is not None else None
    if window is not None and window.closed:  # what the findings cover, and each step traced again after the window
        lines.append(github_notice("notice", f"gradviz: {window.describe()}"))
        for entry, said in zip(window.rearmed, window.describe_rearmed()):
            lines.append(_command("notice", {"file": _github_path(entry.file), "line": entry.line if entry.file else None,
                                             "title": f"gradviz: {entry.label()}"}, said))
        lines += [github_notice("notice", f"gradviz: {said}") for said in window.describe_unwatched()]
    exception = trace.exception if trace is not None else None
    if trace is not None and exception is not None and trace.error is not None and not _clean_exit(trace.error):
        location = exception.location
        lines.append(script_error_command(exception.type, exception.message, location.file if location else None,
                                          location.line if location else None, who=who))
    unrecorded = trace.unrecorded_threads_summary() if trace is not None else None
    if unrecorded:  # the run's coverage: never a silent pass
        lines.append(github_notice("warning", f"gradviz: {who}: {unrecorded}"))
    return lines


def script_error_command(type: str, message: str, file: str | None, line: int | None, *, who: str = "the script") -> str:
    """`::error file=...,title=the script raised RuntimeError::message`."""
    properties = {"file": _github_path(file), "line": line if file else None, "title": f"{who} raised {type}"}
    return _command("error", properties, message or type)


def github_notice(level: str, message: str) -> str:
    """A workflow command without a place (`::warning::gradviz: no result from rank 1`)."""
    return _command(level, {}, message)


def _github_path(file: str | None) -> str | None:
    # GitHub names files by their UTF-8 path: an undecodable byte is shown as \xfe (it names no file there)
    return for_terminal(relative(file)) if file else None


def _command(name: str, properties: dict[str, Any], message: str) -> str:
    given = ",".join(f"{key}={_escape_property(str(value))}" for key, value in properties.items() if value is not None)
    return f"::{name} {given}::{_escape_data(message)}" if given else f"::{name}::{_escape_data(message)}"


def _escape_data(text: str) -> str:
    # the escaping GitHub's runner undoes (actions/toolkit's command.ts): % first, so no escape is escaped twice;
    # other control characters (ESC...) and lone surrogates as visible escapes
    text = clean(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return for_terminal(text)


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _clean_exit(error: BaseException) -> bool:
    return isinstance(error, SystemExit) and error.code in (None, 0)


def dumps(document: dict[str, Any]) -> str:
    """JSON text as the command prints it: indented, UTF-8 kept (lone surrogates as JSON escapes), one newline at
    the end."""
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # an undecodable file name: \udcfe is valid JSON, the raw surrogate is not UTF-8
        return json.dumps(document, indent=2, ensure_ascii=True) + "\n"
    return text
