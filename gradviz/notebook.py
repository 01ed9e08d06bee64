"""Jupyter front end: the `%%gradviz` cell magic (`%load_ext gradviz`); the only module that imports IPython."""

from __future__ import annotations

import ast
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .runner_options import OptionsError, check_suffix, parse_magic_line, render_kwargs
from .window_options import WindowOptionsError, window_kwargs

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from .model import Trace
    from .render.diagram import Diagram

__all__ = ["gradviz_cell", "load_ipython_extension", "run_cell_traced"]


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """Called by `%load_ext gradviz`: register the `%%gradviz` cell magic."""
    ipython.register_magic_function(_magic, magic_kind="cell", magic_name="gradviz")


def _magic(line: str, cell: str) -> None:
    """Trace the cell and display what autograd and memory did below it.

    Usage: %%gradviz [-o OUT] [--view graph|memory|timeline|report|graph-memory] [--max-nodes N]
                     [--depth N|all] [--collapse-modules] [--no-show-saved] [--steps N | --stop-after N]

    Variables the cell defines stay in the notebook. If the cell raises, the diagram (showing the state
    at the failure and the finding that explains it) is displayed first, then the error.
    """
    __tracebackhide__ = True  # noqa: F841 - IPython leaves this frame out of tracebacks
    from IPython import get_ipython
    from IPython.core.error import UsageError

    shell = get_ipython()
    try:
        options = parse_magic_line(line)
        if options.output:
            check_suffix(_path(options.output))
        window_kwargs(options)
    except (OptionsError, WindowOptionsError) as exc:
        raise UsageError(str(exc)) from None
    gradviz_cell(shell, cell, options)


def gradviz_cell(shell: InteractiveShell, cell: str, options: Any) -> Trace:
    """Run `cell` traced in the notebook's namespace, display the diagram, then re-raise the cell's error."""
    __tracebackhide__ = True  # noqa: F841
    from IPython.display import display

    window = window_kwargs(options) if hasattr(options, "steps") else {}
    trace, value, error = run_cell_traced(shell, cell, **window)
    diagram = _render(trace, options)
    if value is not None and not cell.rstrip().endswith(";"):  # a trailing `;` silences the value, as in IPython
        display(value)
    display(_shown(diagram))
    if options.output:
        _save(diagram, options.output)
    if error is not None:
        raise error.with_traceback(_from_cell(error.__traceback__))
    return trace


def run_cell_traced(shell: InteractiveShell, cell: str, **window: Any) -> tuple[Trace, Any, BaseException | None]:
    """Execute `cell` in the user namespace under `gradviz.trace()`: the trace, the value of a final
    expression, and the exception the cell raised (recorded in the trace, returned, not raised).
    `window`: `steps` and `stop_after`, as for `gradviz.trace` (a cell stopped there raises nothing)."""
    from .tracer import trace as tracing
    from .tracer.window import WindowStop

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
    except BaseException as exc:  # the cell's error, shown after the diagram
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
    filename = shell.compile.cache(source, shell.execution_count, raw_code=source)
    tree = ast.parse(source, filename)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = shell.compile(ast.Expression(tree.body.pop().value), filename, "eval")
    module = shell.compile(tree, filename, "exec")
    return filename, module, last


def _render(trace: Trace, options: Any) -> Diagram:
    from .analysis import diagnose
    from .render import render

    return render(trace, findings=list(diagnose(trace)), **render_kwargs(options))


def _shown(diagram: Diagram) -> Any:
    """The graph view (the default) is shown as the explorer, with the static picture beside it in the output."""
    if diagram.view != "graph":
        return diagram
    from .explorer.inline import Explorer

    return Explorer(diagram)


def _from_cell(tb: TracebackType | None) -> TracebackType | None:
    """The traceback as the cell alone would have raised it: without gradviz's frames and the tracer's detour."""
    from .tracer.exceptions import script_frames

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

    from .render.diagram import GraphvizNotFound

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
