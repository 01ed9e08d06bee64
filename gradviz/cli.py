"""The `gradviz` command: `render` draws what a script did, `check` reports what went wrong."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .run import (
    Program,
    ScriptError,
    check_program,
    exit_status,
    load_trace,
    program_of,
    report_program_error,
    run_program,
    stdout_to_stderr,
)
from .formats import FORMATS, print_findings
from .text import safe_str
from .runner_options import OptionsError, add_render_options, check_suffix, output_paths, render_kwargs
from .window_options import DEFAULT_CHECK_STEPS, WindowOptionsError, add_window_options, window_kwargs
from .terminal import (
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    Progress,
    can_encode,
    error as _error,
    internal_error as _internal_error,
    prepare_streams,
    rank_prefix,
    shown as _shown,
    stdout_console as _stdout_console,
)

if TYPE_CHECKING:
    from rich.console import Console

    from .analysis.findings import Finding
    from .model import Trace
    from .ranks import Rank
    from .tracer.runner import HardExitHandler, ProgramRun

__all__ = ["COMMANDS", "EXIT_FINDINGS", "EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]


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
    parser.add_argument(
        "script",
        nargs="?",
        metavar="SCRIPT|TRACE.json",
        help="the Python script to run, as `python SCRIPT ARGS...` would; or a trace saved with -o FILE.json, "
        "read without running anything",
    )
    parser.add_argument(
        "-m",
        dest="module",
        metavar="MODULE",
        help="run a module as `python -m MODULE ARGS...` would (sys.argv[0], __main__, __spec__, relative imports)",
    )
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="no progress display and no informational lines; errors still print"
    )


def _add_render_arguments(parser: argparse.ArgumentParser) -> None:
    _add_script(parser)
    add_render_options(parser, many_outputs=True)
    add_window_options(parser)


def _add_check_arguments(parser: argparse.ArgumentParser) -> None:
    _add_script(parser)
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default); json: one JSON document; sarif: a SARIF 2.1.0 log for code scanning; github: workflow "
        "commands that annotate a pull request. Except for text, stdout holds only that output and the script's own "
        "output goes to stderr",
    )
    parser.add_argument("--json", action="store_true", help="short for --format json")
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too, not only on errors")
    add_window_options(parser, default=DEFAULT_CHECK_STEPS)


_RENDER_EPILOG = """\
examples:
  gradviz render train.py                      writes train.gradviz.svg here
  gradviz render train.py -o graph.png         the format follows the suffix: .svg .png .pdf .dot .json .html
  gradviz render train.py --view memory        storages, aliases and version counters
  gradviz render train.py --view report        an HTML page with every view and the findings (train.gradviz.html)
  gradviz render train.py --view graph-memory -o mem.png   bytes held by live autograd graphs, step by step
  gradviz render train.py --max-nodes 200      summarise beyond 200 nodes, for big graphs
  gradviz render train.py --depth 1            one box per child module of each model (--depth all: every op)
  gradviz render train.py --no-show-saved      hide saved tensors
  gradviz render train.py --steps 3            trace the first 3 optimizer steps, run the rest untraced
  gradviz render train.py --stop-after 3       trace 3 steps, then end the script there
  gradviz render train.py -q -- --epochs 1     arguments after -- go to the script
  gradviz render train.py -o a.svg -o b.html -o run.json   several outputs from one run (.json: the trace)
  gradviz render run.json --view memory        draw a saved trace again, without running anything
  gradviz render -m pkg.train -- --epochs 1    run a module as `python -m pkg.train --epochs 1` would
  torchrun --nproc_per_node=2 -m gradviz render train.py
                                               every rank writes train.rank<N>.gradviz.svg; rank 0 prints
                                               a summary of all ranks ({rank} in -o places the number)

The script runs as `python train.py --epochs 1` would. If it raises, the diagram is still written
(showing the state at the failure) and the script's error is printed; the exit status is then 1
(a SystemExit keeps the script's code). Exit status 2: the script cannot be run or an option is wrong.
"""

_CHECK_EPILOG = """\
examples:
  gradviz check train.py                       findings with severity, file:line, source line, message, fix
  gradviz check train.py --json > found.json   one JSON document: {"gradviz", "script", "exception", "findings"}
  gradviz check train.py --format sarif        a SARIF 2.1.0 log on stdout, for code scanning (GitHub, GitLab...)
  gradviz check train.py --format github       GitHub workflow commands: annotations on the pull request
  gradviz check train.py --strict              fail on warnings (dead parameters...) too
  gradviz check train.py --steps 10            trace the first 10 optimizer steps, run the rest at full speed
  gradviz check train.py --stop-after 10       a quick check: end the script after 10 steps
  gradviz check train.py --steps all           trace the whole run (default: the first 100 steps)
  gradviz check train.py -- --epochs 1         arguments after -- go to the script
  gradviz check -m pkg.train -- --epochs 1     run a module as `python -m pkg.train` would
  gradviz check run.json                       check a trace saved with `gradviz render ... -o run.json`
  torchrun --nproc_per_node=2 -m gradviz check train.py --json
                                               rank 0 prints one document with every rank's findings

If the script ends with os._exit(), the findings are still printed before the process ends.

The step window: after N optimizer steps (N backward() calls where no optimizer steps) gradviz stops
recording and takes its hooks off; the script runs on unchanged and its later steps are only counted
("steps 1-100 of 6,000 traced"). With --stop-after the script ends there, with exit status 0.
exit status: 0 no error finding and the script ran clean; 1 an error finding (--strict: or a warning)
or the script raised; 2 the script cannot be run (missing, not Python, syntax error, bad options).
"""

#: The subcommands, in the order `gradviz --help` lists them. Another front end adds itself with one entry.
COMMANDS: dict[str, Command] = {
    "render": Command(
        help="run a script under the tracer and draw what autograd and memory did",
        description="Run SCRIPT (or -m MODULE) under the tracer, or read a saved TRACE.json, and write an annotated "
        "diagram of its autograd graph and memory.",
        epilog=_RENDER_EPILOG,
        add_arguments=_add_render_arguments,
        run=lambda options: run_render(options),
    ),
    "check": Command(
        help="run a script under the tracer and report cut edges, dead parameters and corrupted saved tensors",
        description="Run SCRIPT (or -m MODULE) under the tracer, or read a saved TRACE.json, and print what went wrong "
        "(or will) with its gradients.",
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
            usage="%(prog)s (SCRIPT | -m MODULE | TRACE.json) [options] [-- ARGS...]" if name in ("render", "check") else None,
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
    except (UsageError, OptionsError, ScriptError, WindowOptionsError) as exc:
        _error(safe_str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except Exception as exc:  # a bug in gradviz: one line, not a traceback
        return _internal_error(exc)


# ---------------------------------------------------------------------------------------------- the program
def _program(options: argparse.Namespace) -> Program:
    program = program_of(options.script, options.module, options.script_args)
    check_program(program)
    return program


def _obtain(
    program: Program,
    progress: Progress,
    on_hard_exit: HardExitHandler,
    *,
    json_stdout: bool = False,
    window: dict[str, Any] | None = None,
) -> tuple[Trace, ProgramRun | None]:
    """Run the program under the tracer (within the step `window`), or read the saved trace (nothing runs)."""
    if program.kind == "trace":
        return load_trace(program), None
    progress.note(f"running {_shown(program.target) if program.kind == 'script' else program.shown} under the tracer")
    if not json_stdout:
        run = run_program(program, on_hard_exit=on_hard_exit, **(window or {}))
        _note_stop(run.trace, program)
        return run.trace, run
    with stdout_to_stderr() as redirect:

        def hard_exit(trace: Trace, code: int) -> int:
            redirect.restore()  # our JSON document goes to the real stdout
            return on_hard_exit(trace, code)

        run = run_program(program, on_hard_exit=hard_exit, **(window or {}))
    _note_stop(run.trace, program)
    return run.trace, run


def _window_of(options: argparse.Namespace, program: Program) -> dict[str, Any]:
    """--steps / --stop-after (bad values: WindowOptionsError); a saved trace runs nothing, so none applies."""
    window = window_kwargs(options)
    if program.kind == "trace":
        if options.steps is not None or options.stop_after is not None:
            raise UsageError(f"{program.target!r} is a saved trace: nothing runs, so --steps and --stop-after do not apply")
        return {}
    return window


def _note_stop(trace: Trace, program: Program) -> None:
    record = trace.window
    if record is not None and record.stopped:
        what = "steps" if record.unit == "step" else "backward() calls"
        name = _shown(program.target) if program.kind == "script" else program.shown
        _error(f"stopped {name} after {record.traced} traced {what} (--stop-after); exit status as if it had ended normally")


# ---------------------------------------------------------------------------------------------- render
def run_render(options: argparse.Namespace) -> int:
    from .ranks import current_rank

    program = program_of(options.script, options.module, options.script_args)
    rank = current_rank()
    outs = output_paths(options, program.stem, rank=rank.rank if rank else None)
    for out in outs:  # before anything runs: a long training run must not end in "cannot write"
        _check_writable(out)
        check_suffix(out, shown=_shown(out))
    check_program(program)
    window = _window_of(options, program)
    progress = Progress(quiet=options.quiet)
    started = time.time()

    def finish(trace: Trace, run: ProgramRun | None) -> int:
        return _finish_render(trace, run, program, options, outs, progress, rank=rank, started=started)

    trace, run = _obtain(program, progress, lambda trace, code: finish(trace, None), window=window)
    return finish(trace, run)


def _finish_render(
    trace: Trace,
    run: ProgramRun | None,
    program: Program,
    options: argparse.Namespace,
    outs: list[Path],
    progress: Progress,
    *,
    rank: Rank | None,
    started: float,
) -> int:
    prepare_streams()
    findings, analysis_error = _diagnose(trace, progress)
    _warn_if_empty(trace, program)
    written: list[Path] = []
    problems: list[UsageError] = []
    for out in outs:
        try:
            written.append(_write_diagram(trace, findings, out, options, progress))
        except UsageError as exc:  # dot missing or the file unwritable: the findings are still worth showing
            problems.append(exc)
        except Exception as exc:
            trace_file = out.with_name(out.stem + ".trace.json")
            with contextlib.suppress(Exception):
                trace.to_json(trace_file)
                _error(f"wrote the trace to {_shown(trace_file)}")
            return _internal_error(exc)
    if not options.quiet:
        console = _stdout_console()
        for path in written:
            console.print(f"{rank_prefix()}gradviz: wrote {_shown(path)}", highlight=False, markup=False)
        if trace.window is not None and trace.window.closed:
            console.print(f"{rank_prefix()}gradviz: {trace.window.describe()}", highlight=False, markup=False)
        if rank is None:  # under torchrun, rank 0 prints the findings of all ranks at once
            for finding in findings:
                _print_summary(console, finding)
    report_program_error(run, trace)
    status = exit_status(trace)
    if rank is not None:
        _merge_ranks(rank, trace, findings, written, started, quiet=options.quiet, json_document=None,
                     full_report=False)
    for problem in problems:
        _error(safe_str(problem))
    if problems:
        return EXIT_USAGE
    if analysis_error is not None:
        return _internal_error(analysis_error)
    return status


def _write_diagram(trace: Trace, findings: list[Finding], out: Path, options: argparse.Namespace, progress: Progress) -> Path:
    from .render import render
    from .render.diagram import INSTALL_ADVICE, GraphvizNotFound

    with progress.spinner(f"laying out the {options.view} view"):
        try:
            diagram = render(trace, findings=findings, **render_kwargs(options))
            diagram.save(out)
        except GraphvizNotFound as exc:
            dot_file = getattr(exc, "dot_path", None) or out.with_suffix(".dot")
            raise UsageError(
                f"Graphviz's `dot` program was not found, so {_shown(out)} could not be drawn; "
                f"wrote the DOT source to {_shown(dot_file)} instead. {INSTALL_ADVICE}"
            ) from None
        except OSError as exc:
            raise UsageError(f"cannot write {_shown(out)}: {exc.strerror or exc}") from None
        except ValueError as exc:  # unknown suffix, caught earlier unless render knows fewer formats
            raise UsageError(safe_str(exc)) from None
    if not options.quiet:
        for message in diagram.messages:  # which module depth the graph view chose, and how to change it
            _stdout_console().print(f"{rank_prefix()}{message}", highlight=False, markup=False)
    return out


def _print_summary(console: Console, finding: Finding, ranks: str = "") -> None:
    from rich.text import Text

    text = Text("" if ranks else rank_prefix())  # the merged summary of all ranks names them itself
    text.append(f"{finding.severity.value:<8}", style=_STYLE[finding.severity.value])
    text.append(f"{_where(finding.file, finding.line)}  ")
    text.append(finding.kind.value, style="bold")
    if ranks:
        text.append(f"  ({ranks})")
    text.append(f": {_first_sentence(finding.message)}")
    console.print(text)


# ---------------------------------------------------------------------------------------------- check
def run_check(options: argparse.Namespace) -> int:
    from .ranks import current_rank

    program = _program(options)
    window = _window_of(options, program)
    rank = current_rank()
    options.json = options.json or options.format == "json"  # --json: the short form of --format json
    machine = options.json or options.format in ("sarif", "github")  # stdout holds only that output
    progress = Progress(quiet=options.quiet or machine)
    started = time.time()

    def finish(trace: Trace, run: ProgramRun | None, hard_exit: int | None = None) -> int:
        return _finish_check(trace, run, program, options, progress, rank=rank, started=started, hard_exit=hard_exit)

    trace, run = _obtain(
        program, progress, lambda trace, code: finish(trace, None, code), json_stdout=machine, window=window
    )
    return finish(trace, run)


def _finish_check(
    trace: Trace,
    run: ProgramRun | None,
    program: Program,
    options: argparse.Namespace,
    progress: Progress,
    *,
    rank: Rank | None,
    started: float,
    hard_exit: int | None = None,
) -> int:
    prepare_streams()
    findings, analysis_error = _diagnose(trace, progress)
    _warn_if_empty(trace, program)
    exception = _script_exception(trace)
    document: dict[str, Any] | None = None
    if options.json:
        document = {
            "gradviz": __version__,
            "script": program.target if program.kind != "module" else trace.script,
            "exception": exception,
            "findings": [f.to_dict() for f in findings],
        }
        if program.kind == "module":
            document["module"] = program.target
        if trace.window is not None and trace.window.closed:  # only part of the run was traced: say which
            document["window"] = {**_window_dict(trace), "description": trace.window.describe()}
        if analysis_error is not None:
            document["internal_error"] = f"{type(analysis_error).__name__}: {safe_str(analysis_error)}"
        if rank is None:
            _print_json(document)
    elif options.format in ("sarif", "github"):
        pass  # written below, once the exit status (which SARIF records) is known
    elif rank is None:
        _print_report(findings, program, trace, quiet=options.quiet)
    elif not options.quiet:  # under torchrun, rank 0 prints the findings of all ranks at once
        _stdout_console().print(_tally_line(findings, program, trace), highlight=False, markup=False)
    if analysis_error is not None:
        if options.format in ("sarif", "github") and (rank is None or rank.rank == 0):
            _print_ci_output(options.format, findings, trace, EXIT_INTERNAL, analysis_error)
        return _internal_error(analysis_error)
    if options.format == "text":
        report_program_error(run, trace)
    if hard_exit is not None:  # os._exit(code): the process ends with the program's code, or 1 for an error finding
        status = hard_exit
    else:
        status = min(exit_status(trace), EXIT_FINDINGS)
    worst = {f.severity.value for f in findings}
    failing = "error" in worst or (options.strict and "warning" in worst)
    if rank is not None:
        merged = _merge_ranks(
            rank, trace, findings, [], started, quiet=options.quiet, json_document=document,
            strict=options.strict, full_report=True,
        )
        failing = failing or merged
    if failing:
        status = EXIT_FINDINGS if hard_exit is not None else max(status, EXIT_FINDINGS)
    if options.format in ("sarif", "github") and (rank is None or rank.rank == 0):
        _print_ci_output(options.format, findings, trace, status, None)
    return status


def _print_ci_output(format: str, findings: list[Finding], trace: Trace, status: int, problem: Exception | None) -> None:
    """`--format sarif` (one SARIF 2.1.0 log) or `--format github` (one workflow command per finding) on stdout."""
    from . import formats

    if format == "sarif":
        internal = f"{type(problem).__name__}: {safe_str(problem)}" if problem is not None else None
        document = formats.sarif_document(findings, trace, version=__version__, exit_code=status, internal_error=internal)
        text = formats.dumps(document)
    else:
        text = "".join(line + "\n" for line in formats.github_commands(findings, trace))
    with contextlib.suppress(Exception):
        sys.stdout.write(text)
        sys.stdout.flush()


def _print_json(document: dict[str, Any]) -> None:
    text = json.dumps(document, indent=2, ensure_ascii=False)
    if not can_encode(sys.stdout, text):  # an ASCII-only stdout (PYTHONIOENCODING=ascii): JSON's own escapes
        text = json.dumps(document, indent=2, ensure_ascii=True)
    with contextlib.suppress(Exception):
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def _script_exception(trace: Trace) -> dict[str, Any] | None:
    if trace.exception is None or trace.exception.exit_code == 0:
        return None
    location = trace.exception.location
    return {"type": trace.exception.type, "message": trace.exception.message, "line": location.line if location else None}


def _print_report(findings: list[Finding], program: Program, trace: Trace, *, quiet: bool, ranks: dict[int, str] | None = None) -> None:
    console = _stdout_console()
    print_findings(console, findings, labels=ranks)
    if not quiet and ranks is None:
        console.print(_tally_line(findings, program, trace), highlight=False, markup=False)


def _tally_line(findings: list[Finding], program: Program, trace: Trace) -> Any:
    from rich.text import Text

    counts = {level: sum(f.severity.value == level for f in findings) for level in ("error", "warning", "info")}
    tally = ", ".join(_plural(counts[level], level) for level in ("error", "warning", "info"))
    record = trace.exception
    status = exit_status(trace)
    if record is None or status == 0:
        ending = ""
    elif record.type in ("SystemExit", "os._exit"):
        ending = f"; the script exited with status {status}"
    else:
        at = f" at line {record.location.line}" if record.location else ""
        ending = f"; the script raised {record.type}{at}"
    unrecorded = trace.internal_error_summary()  # what gradviz missed is said, never a plain "no problems"
    if unrecorded:
        ending += f"; {unrecorded}"
    name = _shown(program.target) if program.kind != "module" else program.shown
    window = f" ({trace.window.describe()})" if trace.window is not None and trace.window.closed else ""
    if findings or ending:
        return Text(f"{rank_prefix()}{name}: {tally}{ending}{window}")
    return Text(f"{rank_prefix()}{name}: no problems found{window}", style="green")


def _window_dict(trace: Trace) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(trace.window) if trace.window is not None else {}


_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


# ---------------------------------------------------------------------------------------------- torchrun ranks
def _merge_ranks(
    rank: Rank,
    trace: Trace,
    findings: list[Finding],
    written: list[Path],
    started: float,
    *,
    quiet: bool,
    json_document: dict[str, Any] | None,
    strict: bool = False,
    full_report: bool,
) -> bool:
    """Every rank leaves its result for rank 0, which prints one summary of all ranks (one JSON document with
    --json). True on rank 0 when another rank has a finding that fails the check."""
    from .ranks import gather, publish, release

    own = {
        "findings": [f.to_dict() for f in findings],
        "exception": _script_exception(trace),
        "exit_status": exit_status(trace),
        "written": [str(p) for p in written],
    }
    if rank.rank != 0:
        publish(rank, own)
        return False
    results, missing = gather(rank, own, since=started)
    try:
        return _print_merged(rank, results, missing, trace, quiet=quiet, json_document=json_document, strict=strict,
                             full_report=full_report)
    finally:
        release(rank)


def _print_merged(
    rank: Rank,
    results: list[dict[str, Any]],
    missing: list[int],
    trace: Trace,
    *,
    quiet: bool,
    json_document: dict[str, Any] | None,
    strict: bool,
    full_report: bool,
) -> bool:
    from .analysis.findings import Finding as FindingRecord

    merged: dict[tuple[Any, ...], tuple[dict[str, Any], list[int]]] = {}
    for result in results:
        for data in result.get("findings", []):
            key = (data.get("kind"), data.get("file"), data.get("line"), data.get("parameter"))
            merged.setdefault(key, (data, []))[1].append(result["rank"])
    failing = any(
        data.get("severity") == "error" or (strict and data.get("severity") == "warning") for data, _ in merged.values()
    )
    if json_document is not None:
        document = dict(json_document)
        document["world_size"] = rank.world_size
        document["ranks"] = [
            {"rank": r["rank"], "exception": r.get("exception"), "exit_status": r.get("exit_status")} for r in results
        ] + [{"rank": r, "missing": True} for r in missing]
        document["findings"] = [{**data, "ranks": ranks} for data, ranks in merged.values()]
        _print_json(document)
        return failing
    if quiet and not merged and not missing:
        return failing
    console = _stdout_console()
    per_rank = "; ".join(
        f"rank {r['rank']}: " + ", ".join(
            _plural(sum(f.get("severity") == level for f in r.get("findings", [])), level) for level in ("error", "warning", "info")
        ) + (f", exited {r['exit_status']}" if r.get("exit_status") else "")
        for r in results
    )
    console.print(f"gradviz: all {rank.world_size} ranks: {per_rank}", highlight=False, markup=False)
    if missing:
        _error("no result from rank(s) " + ", ".join(map(str, missing)) + " (crashed, or still running after the timeout)")
    merged_findings = [FindingRecord.from_dict(data) for data, _ in merged.values()]
    labels = {i: ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks)) for i, (_, ranks) in enumerate(merged.values())}
    if full_report:
        _print_report(merged_findings, Program("script", trace.script or "?"), trace, quiet=True, ranks=labels)
    else:
        for i, finding in enumerate(merged_findings):
            _print_summary(console, finding, labels[i])
    return failing


# ---------------------------------------------------------------------------------------------- helpers
def _warn_if_empty(trace: Trace, program: Program) -> None:
    if not trace.tensors:
        name = _shown(program.target) if program.kind != "module" else program.shown
        _error(f"warning: {name} created no tensors, so there is nothing to draw or check")


def _diagnose(trace: Trace, progress: Progress) -> tuple[list[Finding], Exception | None]:
    """The findings, or none and the error when the analysis itself fails (the diagram is still drawn)."""
    from .analysis import diagnose

    with progress.spinner("analysing the trace"):
        try:
            return list(diagnose(trace)), None
        except Exception as exc:
            return [], exc


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
