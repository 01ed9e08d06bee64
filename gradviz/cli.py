"""The `gradviz` command: `render` draws what a script did, `check` reports what went wrong."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from . import __version__
from .runner_options import (
    OptionsError,
    ScriptError,
    add_render_options,
    check_script,
    check_suffix,
    exit_code,
    format_script_error,
    output_path,
    render_kwargs,
    run_script,
    stdout_to_stderr,
)

if TYPE_CHECKING:
    from rich.console import Console

    from .analysis.findings import Finding
    from .model import Trace

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(Exception):
    """Something the user can fix (missing script, bad output path...): one line on stderr, exit 2."""


# ---------------------------------------------------------------------------------------------- commands
@dataclass(frozen=True)
class Command:
    """One subcommand: how to add its arguments and how to run it (returns the exit status)."""

    help: str
    description: str
    epilog: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _add_script(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", help="the Python script to run, as `python SCRIPT ARGS...` would")
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="no progress display and no informational lines; errors still print"
    )


def _add_render_arguments(parser: argparse.ArgumentParser) -> None:
    _add_script(parser)
    add_render_options(parser)


def _add_check_arguments(parser: argparse.ArgumentParser) -> None:
    _add_script(parser)
    parser.add_argument(
        "--json", action="store_true", help="print exactly one JSON document on stdout (the script's own output goes to stderr)"
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too, not only on errors")


_RENDER_EPILOG = """\
examples:
  gradviz render train.py                      writes train.gradviz.svg here
  gradviz render train.py -o graph.png         the format follows the suffix: .svg .png .pdf .dot .json .html
  gradviz render train.py --view memory        storages, aliases and version counters
  gradviz render train.py --view report        an HTML page with every view and the findings (train.gradviz.html)
  gradviz render train.py --max-nodes 200      summarise beyond 200 nodes, for big graphs
  gradviz render train.py --collapse-modules   one box per nn.Module call
  gradviz render train.py --no-show-saved      hide saved tensors
  gradviz render train.py -q -- --epochs 1     arguments after -- go to the script

The script runs as `python train.py --epochs 1` would. If it raises, the diagram is still written
(showing the state at the failure) and the script's error is printed; the exit status is then 1
(a SystemExit keeps the script's code). Exit status 2: the script cannot be run or an option is wrong.
"""

_CHECK_EPILOG = """\
examples:
  gradviz check train.py                       findings with severity, file:line, source line, message, fix
  gradviz check train.py --json > found.json   one JSON document: {"gradviz", "script", "exception", "findings"}
  gradviz check train.py --strict              fail on warnings (dead parameters...) too
  gradviz check train.py -- --epochs 1         arguments after -- go to the script

exit status: 0 no error finding and the script ran clean; 1 an error finding (--strict: or a warning)
or the script raised; 2 the script cannot be run (missing, not Python, syntax error, bad options).
"""

#: The subcommands, in the order `gradviz --help` lists them. Another front end adds itself with one entry.
COMMANDS: dict[str, Command] = {
    "render": Command(
        help="run a script under the tracer and draw what autograd and memory did",
        description="Run SCRIPT under the tracer and write an annotated diagram of its autograd graph and memory.",
        epilog=_RENDER_EPILOG,
        add_arguments=_add_render_arguments,
        run=lambda options: run_render(options),
    ),
    "check": Command(
        help="run a script under the tracer and report cut edges, dead parameters and corrupted saved tensors",
        description="Run SCRIPT under the tracer and print what went wrong (or will) with its gradients.",
        epilog=_CHECK_EPILOG,
        add_arguments=_add_check_arguments,
        run=lambda options: run_check(options),
    ),
    "gallery": Command(
        help="build the example gallery: trace every plot_*.py, check its declared findings, draw it",
        description="Trace every SRC/plot_*.py, check the findings and exception its docstring declares, and write "
        "SVG/PNG diagrams, a page per example, OUT/index.html and SRC/README.md.",
        epilog="examples:\n  gradviz gallery\n  gradviz gallery gallery -o gallery/_build --force\n",
        add_arguments=lambda parser: _gallery().add_arguments(parser),
        run=lambda options: _gallery().run(options),
    ),
}


def _gallery() -> Any:
    from . import gallery  # the builder pulls in rendering: load it only for this command

    return gallery


def build_parser(prog: str = "gradviz") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="See what autograd and memory are really doing in a PyTorch program: "
        ".data vs .detach(), version counters, saved tensors, cut gradient paths.",
        epilog="examples:\n  gradviz render train.py -o graph.svg\n  gradviz check train.py --json\n\n"
        "Run `gradviz COMMAND --help` for a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gradviz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        child = sub.add_parser(
            name,
            help=command.help,
            description=command.description,
            epilog=command.epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            usage="%(prog)s SCRIPT [options] [-- SCRIPT_ARGS...]" if name in ("render", "check") else None,
        )
        command.add_arguments(child)
    return parser


def main(argv: list[str] | None = None, *, prog: str = "gradviz") -> int:
    """Entry point of `gradviz` and `python -m gradviz`; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # everything after the first `--` belongs to the script, whatever it looks like
    script_args: list[str] = []
    if "--" in argv[1:]:
        cut = argv.index("--", 1)
        argv, script_args = argv[:cut], argv[cut + 1 :]
    options = build_parser(prog).parse_args(argv)
    options.script_args = script_args
    try:
        return COMMANDS[options.command].run(options)
    except (UsageError, OptionsError, ScriptError) as exc:
        _error(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except Exception as exc:  # a bug in gradviz: one line, not a traceback
        return _internal_error(exc)


# ---------------------------------------------------------------------------------------------- render
def run_render(options: argparse.Namespace) -> int:
    out = output_path(options, options.script)
    _check_writable(out)
    check_suffix(out, shown=_shown(out))
    script = check_script(options.script)
    progress = Progress(quiet=options.quiet)
    trace = _run_traced(script, options.script_args, progress)
    findings, analysis_error = _diagnose(trace, progress)
    _warn_if_empty(trace, script)
    problem: UsageError | None = None
    try:
        written = _write_diagram(trace, findings, out, options, progress)
    except UsageError as exc:  # dot missing or the file unwritable: the findings are still worth showing
        written, problem = None, exc
    except Exception as exc:
        trace_file = out.with_name(out.stem + ".trace.json")
        with contextlib.suppress(Exception):
            trace.to_json(trace_file)
            _error(f"wrote the trace to {_shown(trace_file)}")
        return _internal_error(exc)
    if not options.quiet:
        console = _stdout_console()
        if written is not None:
            console.print(f"gradviz: wrote {_shown(written)}", highlight=False, markup=False)
        for finding in findings:
            _print_summary(console, finding)
    status = _finish_script(trace)
    if problem is not None:
        _error(str(problem))
        return EXIT_USAGE
    if analysis_error is not None:
        return _internal_error(analysis_error)
    return status


def _write_diagram(trace: Trace, findings: list[Finding], out: Path, options: argparse.Namespace, progress: Progress) -> Path:
    from .render import render
    from .render.diagram import INSTALL_ADVICE, GraphvizNotFound

    with progress.spinner(f"laying out the {options.view} view"):
        try:
            render(trace, findings=findings, **render_kwargs(options)).save(out)
        except GraphvizNotFound as exc:
            dot_file = getattr(exc, "dot_path", None) or out.with_suffix(".dot")
            raise UsageError(
                f"Graphviz's `dot` program was not found, so {_shown(out)} could not be drawn; "
                f"wrote the DOT source to {_shown(dot_file)} instead. {INSTALL_ADVICE}"
            ) from None
        except OSError as exc:
            raise UsageError(f"cannot write {_shown(out)}: {exc.strerror or exc}") from None
        except ValueError as exc:  # unknown suffix, caught earlier unless render knows fewer formats
            raise UsageError(str(exc)) from None
    return out


def _print_summary(console: Console, finding: Finding) -> None:
    from rich.text import Text

    text = Text()
    text.append(f"{finding.severity.value:<8}", style=_STYLE[finding.severity.value])
    text.append(f"{_where(finding.file, finding.line)}  ")
    text.append(finding.kind.value, style="bold")
    text.append(f": {_first_sentence(finding.message)}")
    console.print(text)


# ---------------------------------------------------------------------------------------------- check
def run_check(options: argparse.Namespace) -> int:
    script = check_script(options.script)
    progress = Progress(quiet=options.quiet or options.json)
    if options.json:
        with stdout_to_stderr():
            trace = _run_traced(script, options.script_args, progress)
    else:
        trace = _run_traced(script, options.script_args, progress)
    findings, analysis_error = _diagnose(trace, progress)
    _warn_if_empty(trace, script)
    exception = _script_exception(trace)
    if options.json:
        document: dict[str, Any] = {
            "gradviz": __version__,
            "script": options.script,
            "exception": exception,
            "findings": [f.to_dict() for f in findings],
        }
        if analysis_error is not None:
            document["internal_error"] = f"{type(analysis_error).__name__}: {analysis_error}"
        sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    else:
        _print_report(findings, script, trace, quiet=options.quiet)
    if analysis_error is not None:
        return _internal_error(analysis_error)
    status = _finish_script(trace, keep_code=False, show_traceback=not options.json)
    worst = {f.severity.value for f in findings}
    if "error" in worst or (options.strict and "warning" in worst):
        status = max(status, EXIT_FINDINGS)
    return status


def _script_exception(trace: Trace) -> dict[str, Any] | None:
    if trace.exception is None or exit_code(trace.error) == 0:
        return None
    location = trace.exception.location
    return {"type": trace.exception.type, "message": trace.exception.message, "line": location.line if location else None}


def _print_report(findings: list[Finding], script: Path, trace: Trace, *, quiet: bool) -> None:
    import linecache

    from rich.text import Text

    console = _stdout_console()
    for finding in findings:
        head = Text()
        head.append(finding.severity.value, style=_STYLE[finding.severity.value])
        head.append(f"  {_where(finding.file, finding.line)}  ")
        head.append(finding.kind.value, style="bold")
        if finding.parameter:
            head.append(f"  ({finding.parameter})")
        console.print(head)
        code = finding.code or (linecache.getline(finding.file, finding.line) if finding.file and finding.line else "")
        if code.strip():
            console.print(Text(f"  {finding.line:>5} | {code.strip()}", style="dim"))
        console.print(Text(f"  {finding.message}"))
        if finding.fix:
            console.print(Text.assemble(("  fix: ", "green"), finding.fix))
        console.print()
    if not quiet:
        counts = {level: sum(f.severity.value == level for f in findings) for level in ("error", "warning", "info")}
        tally = ", ".join(_plural(counts[level], level) for level in ("error", "warning", "info"))
        status = exit_code(trace.error)
        if trace.error is None or status == 0:
            ending = ""
        elif isinstance(trace.error, SystemExit):
            ending = f"; the script exited with status {status}"
        else:
            location = trace.exception.location if trace.exception else None
            at = f" at line {location.line}" if location else ""
            ending = f"; the script raised {type(trace.error).__name__}{at}"
        if findings or ending:
            console.print(f"{_shown(script)}: {tally}{ending}", highlight=False, markup=False)
        else:
            console.print(Text(f"{_shown(script)}: no problems found", style="green"))


_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


# ---------------------------------------------------------------------------------------------- the script
def _run_traced(script: Path, argv: list[str], progress: Progress) -> Trace:
    progress.note(f"running {_shown(script)} under the tracer")
    return run_script(script, argv)


def _warn_if_empty(trace: Trace, script: Path) -> None:
    if not trace.tensors:
        _error(f"warning: {_shown(script)} created no tensors, so there is nothing to draw or check")


def _diagnose(trace: Trace, progress: Progress) -> tuple[list[Finding], Exception | None]:
    """The findings, or none and the error when the analysis itself fails (the diagram is still drawn)."""
    from .analysis import diagnose

    with progress.spinner("analysing the trace"):
        try:
            return list(diagnose(trace)), None
        except Exception as exc:
            return [], exc


def _finish_script(trace: Trace, *, keep_code: bool = True, show_traceback: bool = True) -> int:
    """Print the script's error as Python would, and the status to exit with."""
    error = trace.error
    if error is None:
        return EXIT_OK
    if isinstance(error, SystemExit):
        if error.code is not None and not isinstance(error.code, int) and show_traceback:
            print(error.code, file=sys.stderr)  # sys.exit("message") prints the message, as Python does
        code = exit_code(error)
        return code if keep_code else min(code, EXIT_FINDINGS)
    if show_traceback:
        sys.stderr.write(format_script_error(error))
        sys.stderr.flush()
    return exit_code(error) if keep_code else EXIT_FINDINGS


# ---------------------------------------------------------------------------------------------- output helpers
class Progress:
    """What gradviz is doing, on stderr: only on a terminal and without --quiet."""

    def __init__(self, *, quiet: bool) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)
        self.enabled = not quiet and self.console.is_terminal

    def note(self, text: str) -> None:
        # a static line while the script runs: a live spinner would fight with the script's own output
        if self.enabled:
            self.console.print(f"gradviz: {text}...", style="dim", markup=False, soft_wrap=True)

    @contextlib.contextmanager
    def spinner(self, text: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        from rich.live import Live
        from rich.spinner import Spinner

        with Live(
            Spinner("dots", text=f"gradviz: {text}..."),
            console=self.console,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
            refresh_per_second=12.5,
        ):
            yield


def _stdout_console(file: TextIO | None = None) -> Console:
    from rich.console import Console

    return Console(file=file, highlight=False, soft_wrap=True)


def _error(message: str) -> None:
    print(f"gradviz: {message}", file=sys.stderr)


def _internal_error(exc: BaseException) -> int:
    first = str(exc).splitlines()[0] if str(exc) else ""
    _error(f"internal error: {type(exc).__name__}: {first}")
    if os.environ.get("GRADVIZ_DEBUG"):
        traceback.print_exception(exc, file=sys.stderr)
    else:
        _error("this is a bug in gradviz: please report it with the command you ran (GRADVIZ_DEBUG=1 shows the traceback)")
    return EXIT_INTERNAL


def _check_writable(out: Path) -> None:
    parent = out.parent
    if out.is_dir():
        raise UsageError(f"cannot write {_shown(out)}: it is a folder")
    if not parent.exists():
        raise UsageError(f"cannot write {_shown(out)}: folder {_shown(parent)} does not exist")
    if not parent.is_dir():
        raise UsageError(f"cannot write {_shown(out)}: {_shown(parent)} is not a folder")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise UsageError(f"cannot write {_shown(out)}: permission denied")


def _shown(path: str | os.PathLike[str]) -> str:
    """A path relative to the current folder when it is inside it, else absolute."""
    path = Path(path)
    with contextlib.suppress(ValueError):
        return str(path.absolute().relative_to(Path.cwd()))
    return str(path)


def _where(file: str | None, line: int | None) -> str:
    if not file:
        return "?"
    return f"{_shown(file)}:{line}" if line else _shown(file)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 or word == "info" else "s")


def _first_sentence(message: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else ""
    match = re.match(r"(.+?[.!?])\s+(?=[A-Z`\"'(])", first)
    return match.group(1) if match else first
