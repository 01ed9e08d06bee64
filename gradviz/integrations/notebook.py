"""Jupyter front end: the `%%gradviz` cell magic (`%load_ext gradviz`); the only module that imports IPython."""

from __future__ import annotations

import ast
import dataclasses
import html
import re
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..cli.options import Options
from ..cli.runner_options import OptionsError, check_suffix
from ..cli.window_options import WindowOptionsError
from ..model import LENT

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..analysis.findings import Finding
    from ..model import Trace
    from ..render.diagram import Diagram

__all__ = ["count_phrase", "findings_table", "gradviz_cell", "load_ipython_extension", "run_cell_traced"]


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """Called by `%load_ext gradviz`: register the `%%gradviz` cell magic."""
    # (IPython types this decorated method by its decorator's signature)
    ipython.register_magic_function(_magic, magic_kind="cell", magic_name="gradviz")  # type: ignore[call-arg, arg-type]


def _magic(line: str, cell: str) -> None:
    """Trace the cell and display what autograd and memory did below it.

    Usage: %%gradviz [-o OUT] [--view graph|memory|timeline|report|graph-memory] [--max-nodes N]
                     [--depth N|all] [--collapse-modules] [--no-show-saved] [--steps N | --stop-after N]
                     [--verify]

    Variables the cell defines stay in the notebook. If the cell raises, the diagram (showing the state
    at the failure and the finding that explains it) is displayed first, then the error.
    """
    __tracebackhide__ = True  # noqa: F841 - IPython leaves this frame out of tracebacks
    from IPython import get_ipython
    from IPython.core.error import UsageError

    shell = get_ipython()
    try:
        options = Options.from_magic_line(line)
        for output in options.output:
            check_suffix(_path(output))
        options.window()
    except (OptionsError, WindowOptionsError) as exc:
        raise UsageError(str(exc)) from None
    gradviz_cell(shell, cell, options)


def gradviz_cell(shell: InteractiveShell, cell: str, options: Options) -> Trace:
    """Run `cell` traced in the notebook's namespace, display the diagram, then re-raise the cell's error."""
    __tracebackhide__ = True  # noqa: F841
    from IPython.display import display

    # the step window, and --verify: measure how wrong silently corrupted gradients are
    trace, value, error = run_cell_traced(shell, cell, **options.tracer_kwargs())
    findings = _diagnose(trace)
    diagram = _render(trace, findings, options)
    if value is not None and not cell.rstrip().endswith(";"):  # a trailing `;` silences the value, as in IPython
        display(value)
    display(_shown(diagram))
    if findings:  # the findings' text under the picture, folded: the picture comes first
        display(_FindingsBelow(findings, trace.file_labels))
    for output in options.output:  # the magic's -o is given once
        _save(diagram, output)
    if error is not None:
        raise error.with_traceback(_from_cell(error.__traceback__))
    return trace


def run_cell_traced(shell: InteractiveShell, cell: str, **window: Any) -> tuple[Trace, Any, BaseException | None]:
    """Execute `cell` in the user namespace under `gradviz.trace()`: the trace, the value of a final
    expression, and the exception the cell raised (recorded in the trace, returned, not raised).
    `window`: `steps`, `stop_after` and `verify`, as for `gradviz.trace` (a cell stopped there raises nothing)."""
    from ..tracer import trace as tracing
    from ..tracer.window import WindowStop

    filename, module, last = _compile_cell(shell, cell)
    namespace = shell.user_ns
    context = tracing(**window)
    trace = context.__enter__()
    value: Any = None
    error: BaseException | None = None
    exc_info: tuple[Any, Any, Any] = (None, None, None)
    try:
        exec(module, namespace)
        if last is not None:
            value = eval(last, namespace)
    except BaseException as exc:  # noqa: BLE001 - the cell's error, shown after the diagram
        exc_info = (type(exc), exc, exc.__traceback__)
        error = None if isinstance(exc, WindowStop) else exc  # --stop-after ended the cell, as asked
    # `trace` names tensors after the variables of the frame that closes it: close it from a frame whose
    # locals are the notebook's namespace, so `out` and `c` get their names
    closer = {"__gradviz_exit__": context.__exit__, "__gradviz_exc_info__": exc_info}
    exec("__gradviz_exit__(*__gradviz_exc_info__)", closer, namespace)
    trace.sources.setdefault(filename, "".join(_cached_lines(filename)))
    return trace, value, error


def _compile_cell(shell: InteractiveShell, cell: str) -> tuple[str, Any, Any]:
    """Compile the cell body so that line N in findings and tracebacks is line N of the cell as shown,
    counting the `%%gradviz` line; a final expression is compiled apart so its value can be displayed."""
    source = "\n" + shell.transform_cell(cell)  # line 1 is the %%gradviz line
    filename = shell.compile.cache(source, _cell_number(shell), raw_code=source)
    tree = ast.parse(source, filename)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        # (compile() takes a tree where IPython's stub says str)
        last = shell.compile(ast.Expression(tree.body.pop().value), filename, "eval")  # type: ignore[arg-type]
    module = shell.compile(tree, filename, "exec")
    return filename, module, last


def _cell_number(shell: InteractiveShell) -> int:
    """The number of the cell running the magic, `In [6]`: the cell's own code is on the stack under a file name
    IPython maps to it. (`shell.execution_count` is already the next cell's number while a cell runs.)"""
    import sys

    namer = getattr(shell.compile, "format_code_name", None)
    frame = sys._getframe(1)
    while frame is not None and namer is not None:
        try:
            named = namer(frame.f_code.co_filename)
        except Exception:  # noqa: BLE001 - an IPython that names code differently: fall back below
            named = None
        if named:
            match = re.fullmatch(r"In\s*\[(\d+)\]", named[1])
            if match:
                return int(match.group(1))
        frame = frame.f_back  # type: ignore[assignment]  # (None ends the loop)
    return max(int(shell.execution_count) - 1, 1)


def _diagnose(trace: Trace) -> list[Finding]:
    from ..analysis import diagnose

    return list(diagnose(trace))


def _render(trace: Trace, findings: list[Finding], options: Options) -> Diagram:
    from ..render import render

    return render(trace, findings=findings, **options.render_kwargs())


# ---------------------------------------------------------------------------------------------- findings displays
_SEVERITY_COLOUR = {"error": "#c62828", "warning": "#b26a00", "info": "#00838f"}
# lines break between words, a word longer than the line only where it must (Jupyter's own CSS breaks `pre` and
# table text anywhere: `word-break: break-all`, mid-word)
_WRAP = "word-break:normal;overflow-wrap:break-word"
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def _html_text(text: str, *, code: str = "<code>") -> str:
    """A message's text as HTML: escaped, its Markdown code spans (`out.data`) as <code>, without the backticks."""
    return _CODE_SPAN.sub(lambda match: f"{code}{match.group(1)}</code>", html.escape(text))


def count_phrase(findings: Sequence[Finding]) -> str:
    """`1 finding (1 error)`, `3 findings (1 error, 2 warnings)`, `no findings`."""
    if not findings:
        return "no findings"
    counts = {level: sum(f.severity.value == level for f in findings) for level in ("error", "warning", "info")}
    parts = [f"{n} {level}{'' if n == 1 or level == 'info' else 's'}" for level, n in counts.items() if n]
    return f"{len(findings)} finding{'' if len(findings) == 1 else 's'} ({', '.join(parts)})"


def _labelled(findings: Sequence[Finding], file_labels: dict[str, str]) -> list[Finding]:
    """The findings with each cell's file named as IPython names the cell (`In[6]`), not the kernel's temporary file."""
    return [dataclasses.replace(f, file=file_labels.get(f.file, f.file)) if f.file else f for f in findings]


def findings_plain_text(findings: Sequence[Finding], *, file_labels: dict[str, str] | None = None) -> str:
    """The findings as `gradviz check` prints them (severity, cell or file:line, kind, source line, message, fix)."""
    from ..cli.formats import findings_text

    if not findings:
        return "gradviz: no findings"
    return f"gradviz: {count_phrase(findings)}\n\n" + findings_text(_labelled(findings, file_labels or {})).rstrip()


def findings_table(findings: Sequence[Finding], *, file_labels: dict[str, str] | None = None) -> str:
    """An HTML table of the findings: severity, where (cell or file:line, with the source line), kind, what happened,
    the fix."""
    if not findings:
        return "<p><b>gradviz</b>: no findings</p>"
    rows = []
    for finding in _labelled(findings, file_labels or {}):
        severity = finding.severity.value
        where = html.escape(f"{finding.file}:{finding.line}" if finding.file and finding.line else finding.file or "?")
        code = f"<br><code>{html.escape(finding.code.strip())}</code>" if finding.code.strip() else ""
        kind = html.escape(finding.kind.value) + (f"<br>({html.escape(finding.parameter)})" if finding.parameter else "")
        cell = f"text-align:left;{_WRAP}"
        rows.append(
            f'<tr><td style="color:{_SEVERITY_COLOUR[severity]};font-weight:bold;{_WRAP}">{severity}</td>'
            f'<td style="{cell}">{where}{code}</td><td style="{cell}"><code>{kind}</code></td>'
            f'<td style="{cell}">{_html_text(finding.message)}</td>'
            f'<td style="{cell}">{_html_text(finding.fix)}</td></tr>'
        )
    head = "".join(f'<th style="text-align:left">{h}</th>' for h in ("severity", "where", "kind", "what happened", "fix"))
    return (
        f'<table class="gradviz-findings"><caption style="text-align:left"><b>gradviz</b>: {count_phrase(findings)}'
        f"</caption><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


class _FindingsBelow:
    """What `%%gradviz` shows under its picture: the findings' text in a collapsible block (open when one is an
    error), plain text where the front end shows no HTML."""

    def __init__(self, findings: Sequence[Finding], file_labels: dict[str, str]) -> None:
        self.findings = list(findings)
        self.file_labels = dict(file_labels)

    def _repr_html_(self) -> str:
        from ..cli.formats import findings_text

        opened = " open" if any(f.severity.value == "error" for f in self.findings) else ""
        first = _labelled(self.findings[:1], self.file_labels)[0]
        where = f"{first.file}:{first.line}" if first.file and first.line else first.file or "?"
        summary = f"<b>gradviz</b>: {count_phrase(self.findings)}: {html.escape(where)} <code>{first.kind.value}</code>"
        if len(self.findings) > 1:
            summary += ", ..."
        # in monospaced text a code span stands out by a shade, as Jupyter draws inline code
        shaded = '<code style="background:rgba(127,127,127,0.15);border-radius:2px">'
        text = _html_text(findings_text(_labelled(self.findings, self.file_labels)).rstrip(), code=shaded)
        pre = f'<pre style="white-space:pre-wrap;{_WRAP}">{text}</pre>'
        return f'<details class="gradviz-findings"{opened}><summary>{summary}</summary>{pre}</details>'

    def __repr__(self) -> str:
        return findings_plain_text(self.findings, file_labels=self.file_labels)


def _shown(diagram: Diagram) -> Any:
    """The graph view (the default) is shown as the explorer, with the static picture beside it in the output."""
    if diagram.view != "graph":
        return diagram
    from ..explorer.inline import Explorer

    return Explorer(diagram)


def _from_cell(tb: TracebackType | None) -> TracebackType | None:
    """The traceback as the cell alone would have raised it: without gradviz's frames and the tracer's detour."""
    from ..tracer.exceptions import script_frames

    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    keep = script_frames([(t.tb_frame.f_code.co_filename, t.tb_frame.f_code.co_name) for t in entries])
    clean: TracebackType | None = None
    for entry, kept in zip(reversed(entries), reversed(keep)):
        if kept:
            clean = TracebackType(clean, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return clean


def _save(diagram: Diagram, name: str) -> None:
    """Save as -o asked; a failure is reported below the diagram and does not hide the cell's own error."""
    import sys

    from ..render.diagram import GraphvizNotFound

    try:
        diagram.save(_path(name))
    except (GraphvizNotFound, OSError, ValueError) as exc:
        print(f"gradviz: could not write {name!r}: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)


def _cached_lines(filename: str) -> list[str]:
    import linecache

    return linecache.getlines(filename)


def _path(name: str) -> Any:
    from pathlib import Path

    return Path(name).expanduser()


def _trace_display(trace: Trace, include: Any, exclude: Any) -> dict[str, Any]:
    """A trace shown in a notebook: the explorer, with the graph view's picture beside it."""
    from ..explorer.inline import Explorer
    from ..render import render

    return Explorer(render(trace))._repr_mimebundle_(include=include, exclude=exclude)


# the displays this front end lends to the plain data below it (the trace model and the analysis import no front end)
LENT.display = _trace_display
LENT.findings_html = lambda findings, labels: findings_table(findings, file_labels=labels)
LENT.findings_text = lambda findings, labels: findings_plain_text(findings, file_labels=labels)
