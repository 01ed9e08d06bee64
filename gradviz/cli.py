"""The `gradviz` command: `render` draws what a script did, `check` reports what went wrong."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
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
    refuse_input_as_output,
    report_program_error,
    run_program,
    stdout_to_stderr,
)
from .config import ConfigError, add_config_options
from .formats import FORMATS, finding_dict, print_findings
from .text import for_terminal, safe_str
from .runner_options import (
    OptionsError,
    add_render_options,
    add_verify_option,
    check_suffix,
    output_paths,
    render_kwargs,
    verify_kwargs,
)
from .window_options import DEFAULT_CHECK_STEPS, WindowOptionsError, add_window_options, window_kwargs
from .terminal import (
    COLOR_CHOICES,
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
    from .model import Trace, WindowRecord
    from .ranks import Rank
    from .render.picture import Picture
    from .suppress import Suppressed
    from .tracer.runner import HardExitHandler, ProgramRun

__all__ = ["COMMANDS", "EXIT_FINDINGS", "EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]


class UsageError(Exception):
    """Something the user can fix (missing script, bad output path...): one line on stderr, exit 2."""


#: The choices of --fail-on: the least severe finding that makes the exit status 1.
FAIL_ON = ("error", "warning", "never")


class _Parser(argparse.ArgumentParser):
    """argparse without silent abbreviations (`--col` is not `--collapse-modules`); `children` are the
    subcommands' parsers, so a misspelt option is reported with its subcommand's usage."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.children: dict[str, argparse.ArgumentParser] = {}


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
        "--quiet", "-q", action="store_true",
        help="no progress display and no informational lines (files written, the tally); findings and errors still print",
    )
    parser.add_argument(
        "--color", choices=COLOR_CHOICES, default="auto",
        help="colour in the findings and messages: auto (default: on a terminal, unless NO_COLOR is set), always, never",
    )
    parser.add_argument(
        "--progress", action="store_true",
        help="show progress on stderr (steps traced, time elapsed) even when stderr is not a terminal",
    )


def _add_fail_on(parser: argparse.ArgumentParser, *, default: str, strict: bool = False) -> None:
    parser.add_argument(
        "--fail-on", choices=FAIL_ON, default=None,
        help=f"exit 1 when a finding is at least this severe (default: {default}); never: the exit status is the "
        "script's own (0 for a saved trace)" + ("; --strict is --fail-on warning" if strict else ""),
    )
    parser.set_defaults(default_fail_on=default)


def _add_render_arguments(parser: argparse.ArgumentParser) -> None:
    _add_script(parser)
    add_render_options(parser, many_outputs=True)
    add_window_options(parser)
    add_verify_option(parser)
    add_config_options(parser)
    _add_fail_on(parser, default="never")


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
    _add_fail_on(parser, default="error", strict=True)
    add_window_options(parser, default=DEFAULT_CHECK_STEPS)
    add_verify_option(parser)
    add_config_options(parser)


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
  gradviz render train.py --verify             measure how wrong silently corrupted gradients are (shown in the note)
  gradviz render train.py -q -- --epochs 1     arguments after -- go to the script
  gradviz render train.py -o a.svg -o b.html -o run.json   several outputs from one run (.json: the trace)
  gradviz render run.json --view memory        draw a saved trace again, without running anything
  gradviz render train.py --fail-on error      exit 1 when there is an error finding (default: never)
  gradviz render -m pkg.train -- --epochs 1    run a module as `python -m pkg.train --epochs 1` would
  torchrun --nproc_per_node=2 -m gradviz render train.py
                                               every rank writes train.rank<N>.gradviz.svg; rank 0 prints
                                               a summary of all ranks ({rank} in -o places the number)

The script runs as `python train.py --epochs 1` would. If it raises, the diagram is still written
(showing the state at the failure) and the script's error is printed; the exit status is then 1
(a SystemExit keeps the script's code). A saved trace's recorded error is described in one line and
not raised again (exit status 0). --fail-on error|warning: exit 1 on such a finding too.
Exit status 2: the script cannot be run or an option is wrong.
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
  gradviz check train.py --verify              measure how wrong silently corrupted gradients are
  gradviz check train.py -- --epochs 1         arguments after -- go to the script
  gradviz check -m pkg.train -- --epochs 1     run a module as `python -m pkg.train` would
  gradviz check run.json                       check a trace saved with `gradviz render ... -o run.json`
  torchrun --nproc_per_node=2 -m gradviz check train.py --json
                                               rank 0 prints one document with every rank's findings

If the script ends with os._exit(), the findings are still printed before the process ends.

The step window: after N optimizer steps (N backward() calls where no optimizer steps) gradviz stops
recording and takes its hooks off; the script runs on unchanged and its later steps are only counted
("steps 1-100 of 6,000 traced"). With --stop-after the script ends there, with exit status 0.
exit status: 0 no error finding and the script ran clean; 1 an error finding (--strict, --fail-on warning:
or a warning) or the script raised; 2 the script cannot be run (missing, not Python, syntax error, bad options).
A saved trace's recorded error is described in one line, not raised again: only the findings set the status.
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


def build_parser(prog: str = "gradviz") -> _Parser:
    parser = _Parser(
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
            allow_abbrev=False,
        )
        command.add_arguments(child)
        parser.children[name] = child
    return parser


def _parse(parser: _Parser, argv: list[str]) -> argparse.Namespace:
    """Parse the command line; an unknown option is reported with its subcommand's usage and the closest options."""
    first = argv[0] if argv and not argv[0].startswith("-") else None
    if first is not None and first not in parser.children:
        close = difflib.get_close_matches(first, list(parser.children), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        parser.error(f"argument COMMAND: invalid choice: {first!r} (choose from {', '.join(map(repr, parser.children))}){hint}")
    options, extras = parser.parse_known_args(argv)
    if extras:
        child = parser.children.get(getattr(options, "command", None) or "", parser)
        child.error(_unknown_arguments(child, extras))
    return options


def _unknown_arguments(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """`unrecognized argument: --colapse-modules (did you mean --collapse-modules?)`, or where script arguments go."""
    known = [o for action in parser._actions for o in action.option_strings]
    parts = []
    for word in extras:
        if word.startswith("-") and len(word) > 1:
            name = word.split("=", 1)[0]
            candidates = [o for o in known if o.startswith(name) and o.startswith("--") and len(name) > 2]
            candidates += [o for o in difflib.get_close_matches(name, known, n=3, cutoff=0.6) if o not in candidates]
            hint = f" (did you mean {' or '.join(candidates[:3])}?)" if candidates else ""
            parts.append(f"{word}{hint}")
        else:
            parts.append(f"{word} (arguments for the script go after `--`: gradviz COMMAND SCRIPT -- ARGS...)")
    return f"unrecognized argument{'s' if len(parts) > 1 else ''}: " + "; ".join(parts)


def main(argv: list[str] | None = None, *, prog: str = "gradviz") -> int:
    """Entry point of `gradviz` and `python -m gradviz`; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # everything after the first `--` belongs to the script, whatever it looks like
    script_args: list[str] = []
    if "--" in argv[1:]:
        cut = argv.index("--", 1)
        argv, script_args = argv[:cut], argv[cut + 1 :]
    options = _parse(build_parser(prog), argv)
    options.script_args = script_args
    try:
        return COMMANDS[options.command].run(options)
    except (UsageError, OptionsError, ScriptError, WindowOptionsError, ConfigError) as exc:
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
    step: int | None = None,
) -> tuple[Trace, ProgramRun | None]:
    """Run the program under the tracer (within the step `window`), or read the saved trace (nothing runs).
    `step`: --step K, said at once when the window closes before backward call K."""
    if program.kind == "trace":
        return load_trace(program), None
    from .ranks import current_rank, stop_signal

    name = _shown(program.target) if program.kind == "script" else program.shown
    progress.note(f"running {name} under the tracer")
    watcher = progress.watch(name, step=step if window else None)
    on_start: Callable[[Trace, Any], None] | None = watcher.start if watcher is not None else None
    if current_rank() is not None:  # torchrun's SIGTERM when another rank fails must not lose this rank's findings
        stop_signal.install()
        watch = on_start

        def start_noted(trace: Trace, record: WindowRecord | None) -> None:
            stop_signal.running(trace)
            if watch is not None:
                watch(trace, record)

        on_start = start_noted

    def stop_watching(trace: Trace, code: int) -> int:
        if watcher is not None:
            watcher.stop()
        return on_hard_exit(trace, code)

    try:
        if not json_stdout:
            run = run_program(program, on_hard_exit=stop_watching, on_start=on_start, **(window or {}))
        else:
            with stdout_to_stderr() as redirect:

                def hard_exit(trace: Trace, code: int) -> int:
                    redirect.restore()  # our JSON document goes to the real stdout
                    return stop_watching(trace, code)

                run = run_program(program, on_hard_exit=hard_exit, on_start=on_start, **(window or {}))
    finally:
        stop_signal.running(None)
        if watcher is not None:
            watcher.stop()
    _note_stop(run.trace, program)
    return run.trace, run


def _window_of(options: argparse.Namespace, program: Program) -> dict[str, Any]:
    """--steps / --stop-after (bad values: WindowOptionsError); a saved trace runs nothing, so none applies."""
    window = window_kwargs(options)
    if program.kind == "trace":
        if options.steps is not None or options.stop_after is not None:
            raise UsageError(f"{program.target!r} is a saved trace: nothing runs, so --steps and --stop-after do not apply")
        if options.verify:
            raise UsageError(f"{program.target!r} is a saved trace: nothing runs, so --verify cannot measure (its "
                             "measurements, if it was traced with --verify, are in it)")
        return {}
    return {**window, **verify_kwargs(options)}


def _note_stop(trace: Trace, program: Program) -> None:
    record = trace.window
    if record is not None and record.stopped:
        what = "step" if record.unit == "step" else "backward() call"
        what += "s" if record.traced != 1 else ""
        name = _shown(program.target) if program.kind == "script" else program.shown
        _error(f"stopped {name} after {record.traced} traced {what} (--stop-after); exit status as if it had ended normally")


# ---------------------------------------------------------------------------------------------- render
def run_render(options: argparse.Namespace) -> int:
    from .ranks import current_rank

    program = program_of(options.script, options.module, options.script_args)
    rank = current_rank()
    outs = output_paths(options, program.stem, rank=rank.rank if rank else None)
    outs = _configure(options, program, outs)
    for out in outs:  # before anything runs: a long training run must not end in "cannot write"
        _check_writable(out)
        check_suffix(out, shown=_shown(out))
    check_program(program)
    refuse_input_as_output(program, outs)  # -o through a link to the script must not overwrite it
    window = _window_of(options, program)
    fail_on = _fail_on(options)
    progress = Progress(quiet=options.quiet, color=options.color, forced=options.progress)
    started = time.time()

    def finish(trace: Trace, run: ProgramRun | None) -> int:
        return _finish_render(trace, run, program, options, outs, progress, rank=rank, started=started, fail_on=fail_on)

    trace, run = _obtain(program, progress, lambda trace, code: finish(trace, None), window=window, step=options.step)
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
    fail_on: str,
) -> int:
    prepare_streams()
    _check_step(trace, program, options)
    findings, analysis_error = _diagnose(trace, progress)
    life = getattr(findings, "lifetimes", None)  # computed by the analysis, reused by the pictures
    findings, suppressed = _accept(findings, options)
    _warn_if_empty(trace, program)
    written: list[Path] = []
    problems: list[UsageError] = []
    said: set[str] = set()  # several outputs of one view make the same choice: say it once
    from .render.picture import Picture

    picture = Picture(trace, findings, life=life)  # what every output of this run is drawn from, derived once
    for out in outs:
        try:
            written.append(_write_diagram(trace, findings, out, options, progress, said, picture))
        except UsageError as exc:  # dot missing or the file unwritable: the findings are still worth showing
            problems.append(exc)
        except Exception as exc:
            trace_file = out.with_name(out.stem + ".trace.json")
            with contextlib.suppress(Exception):
                trace.to_json(trace_file)
                _error(f"wrote the trace to {_shown(trace_file)}")
            return _internal_error(exc)
    console = _stdout_console(color=options.color)
    if not options.quiet:
        for path in written:
            console.print(f"{rank_prefix()}gradviz: wrote {_shown(path)}", highlight=False, markup=False)
        if trace.window is not None and trace.window.closed:
            console.print(f"{rank_prefix()}gradviz: {trace.window.describe()}", highlight=False, markup=False)
            for line in trace.window.describe_rearmed():
                console.print(f"{rank_prefix()}gradviz: {line}", highlight=False, markup=False)
    if rank is None:  # the same text as `gradviz check`, never hidden by -q; under torchrun rank 0 prints all ranks
        print_findings(console, findings)
        _print_suppressed(console, suppressed, options, count=True)
    status = _report_ending(run, trace, program)
    failing = _fails(findings, fail_on)
    if rank is not None:
        merged = _merge_ranks(rank, trace, findings, written, started, quiet=options.quiet, json_document=None,
                              fail_on=fail_on, suppressed=suppressed, options=options)
        failing = failing or merged.failing
    if failing:
        status = max(status, EXIT_FINDINGS)
    for problem in problems:
        _error(safe_str(problem))
    if problems:
        return EXIT_USAGE
    if analysis_error is not None:
        return _internal_error(analysis_error)
    return status


def _write_diagram(
    trace: Trace, findings: list[Finding], out: Path, options: argparse.Namespace, progress: Progress, said: set[str],
    picture: Picture | None = None,
) -> Path:
    from .render import render
    from .render.diagram import INSTALL_ADVICE, GraphvizNotFound

    with progress.spinner(f"laying out the {options.view} view"):
        try:
            diagram = render(trace, findings=findings, picture=picture, **render_kwargs(options))
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
            if message not in said:
                said.add(message)
                _stdout_console(color=options.color).print(f"{rank_prefix()}{message}", highlight=False, markup=False)
    return out


# ---------------------------------------------------------------------------------------------- check
def run_check(options: argparse.Namespace) -> int:
    from .ranks import current_rank

    program = _program(options)
    _configure(options, program, [])
    window = _window_of(options, program)
    rank = current_rank()
    options.json = options.json or options.format == "json"  # --json: the short form of --format json
    machine = options.json or options.format in ("sarif", "github")  # stdout holds only that output
    fail_on = _fail_on(options)
    progress = Progress(quiet=options.quiet or machine, color=options.color, forced=options.progress)
    started = time.time()

    def finish(trace: Trace, run: ProgramRun | None, hard_exit: int | None = None) -> int:
        return _finish_check(trace, run, program, options, progress, rank=rank, started=started, hard_exit=hard_exit,
                             fail_on=fail_on)

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
    fail_on: str = "error",
) -> int:
    prepare_streams()
    findings, analysis_error = _diagnose(trace, progress)
    findings, suppressed = _accept(findings, options)
    _warn_if_empty(trace, program)
    exception = _script_exception(trace)
    document: dict[str, Any] | None = None
    if options.json:
        document = {
            "gradviz": __version__,
            "script": program.target if program.kind != "module" else trace.script,
            "exception": exception,
            "findings": [finding_dict(f) for f in findings],
        }
        if suppressed:
            document["suppressed"] = [{**finding_dict(s.finding), "suppressed_by": s.reason} for s in suppressed]
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
        _print_report(findings, program, trace, quiet=options.quiet, suppressed=suppressed, color=options.color)
        _print_suppressed(_stdout_console(color=options.color), suppressed, options)
    elif not options.quiet:  # under torchrun, rank 0 prints the findings of all ranks at once
        _stdout_console(color=options.color).print(
            _tally_line(findings, program, trace, suppressed=suppressed), highlight=False, markup=False
        )
    if analysis_error is not None:
        if options.format in ("sarif", "github") and (rank is None or rank.rank == 0):
            _print_ci_output(options.format, findings, trace, EXIT_INTERNAL, analysis_error, suppressed=suppressed)
        return _internal_error(analysis_error)
    if options.format == "text" or program.kind == "trace":
        ended = _report_ending(run, trace, program)
    else:
        ended = exit_status(trace)
    if hard_exit is not None:  # os._exit(code): the process ends with the program's code, or 1 for an error finding
        status = hard_exit
    else:
        status = min(ended, EXIT_FINDINGS)
    failing = _fails(findings, fail_on)
    if rank is not None:
        merged = _merge_ranks(
            rank, trace, findings, [], started, quiet=options.quiet, json_document=document,
            fail_on=fail_on, suppressed=suppressed, options=options,
        )
        failing = failing or merged.failing
    if failing:
        status = EXIT_FINDINGS if hard_exit is not None else max(status, EXIT_FINDINGS)
    if options.format in ("sarif", "github") and rank is None:
        _print_ci_output(options.format, findings, trace, status, None, suppressed=suppressed)
    elif options.format in ("sarif", "github") and rank is not None and rank.rank == 0:
        _print_ci_merged(options.format, merged, trace, status)
    return status


def _print_ci_output(
    format: str, findings: list[Finding], trace: Trace, status: int, problem: Exception | None, *,
    suppressed: list[Suppressed] | None = None,
) -> None:
    """`--format sarif` (one SARIF 2.1.0 log) or `--format github` (one workflow command per finding) on stdout."""
    from . import formats

    if format == "sarif":
        internal = f"{type(problem).__name__}: {safe_str(problem)}" if problem is not None else None
        document = formats.sarif_document(findings, trace, version=__version__, exit_code=status, internal_error=internal,
                                          suppressed=suppressed or [])
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


def _print_report(
    findings: list[Finding], program: Program, trace: Trace, *, quiet: bool, ranks: dict[int, str] | None = None,
    suppressed: list[Suppressed] | None = None,
    color: str = "auto",
) -> None:
    console = _stdout_console(color=color)
    print_findings(console, findings, labels=ranks)
    if not quiet and ranks is None:
        if trace.window is not None:  # steps the sentinel traced again after the window
            for line in trace.window.describe_rearmed():
                console.print(f"{rank_prefix()}gradviz: {line}", highlight=False, markup=False)
        console.print(_tally_line(findings, program, trace, suppressed=suppressed), highlight=False, markup=False)


def _tally_line(findings: list[Finding], program: Program, trace: Trace, *, suppressed: list[Suppressed] | None = None) -> Any:
    from rich.text import Text

    counts = {level: sum(f.severity.value == level for f in findings) for level in ("error", "warning", "info")}
    tally = ", ".join(_plural(counts[level], level) for level in ("error", "warning", "info"))
    if suppressed:
        tally += f", {len(suppressed)} suppressed"
    record = trace.exception
    status = exit_status(trace)
    if record is None or status == 0 or program.kind == "trace":  # a saved trace's error: one line on stderr
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
    accepted = f" ({len(suppressed)} suppressed)" if suppressed else ""
    return Text(f"{rank_prefix()}{name}: no problems found{accepted}{window}", style="green")


def _window_dict(trace: Trace) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(trace.window) if trace.window is not None else {}


# ---------------------------------------------------------------------------------------------- torchrun ranks
@dataclass
class _Merged:
    """What rank 0 gathered: every rank's result, the ranks that did not report, the merged findings."""

    results: list[dict[str, Any]]
    missing: list[int]
    failing: bool = False


def _merge_ranks(
    rank: Rank,
    trace: Trace,
    findings: list[Finding],
    written: list[Path],
    started: float,
    *,
    quiet: bool,
    json_document: dict[str, Any] | None,
    fail_on: str = "error",
    suppressed: list[Suppressed] | None = None,
    options: argparse.Namespace | None = None,
) -> _Merged:
    """Every rank leaves its result for rank 0, which prints one summary of all ranks (one JSON document with
    --json, one SARIF log, the workflow commands of every rank). A rank that rank 0 stopped waiting for
    (GRADVIZ_RANK_TIMEOUT) prints its own findings when it ends."""
    from .ranks import gather, publish, release, stop_signal

    format = getattr(options, "format", "text") if options is not None else "text"
    if stop_signal.received:  # torchrun is ending this rank (another failed): no one may be left to merge with
        _print_late_rank(rank, trace, findings, suppressed or [], format=format, stopped=True)
        return _Merged([], [])
    own: dict[str, Any] = {
        "findings": [f.to_dict() for f in findings],
        "suppressed": [s.to_dict() for s in suppressed or []],
        "exception": _script_exception(trace),
        "exception_file": _exception_file(trace),
        "exit_status": exit_status(trace),
        "written": [str(p) for p in written],
    }
    if format == "sarif":  # each rank makes its own results: the related locations need its trace
        from .sarif import sarif_results, script_notifications

        own["sarif_results"] = sarif_results(findings, trace, suppressed=suppressed or [])
        own["sarif_notifications"] = script_notifications(trace, who=f"rank {rank.rank}")
    if rank.rank != 0:
        if not publish(rank, own, since=started):
            _print_late_rank(rank, trace, findings, suppressed or [], format=format)
        return _Merged([], [])
    results, missing = gather(rank, own, since=started)
    try:
        merged = _Merged(results, missing)
        merged.failing = _print_merged(rank, results, missing, trace, quiet=quiet, json_document=json_document,
                                       fail_on=fail_on, machine=format in ("sarif", "github"),
                                       color=getattr(options, "color", "auto"))
        return merged
    finally:
        release(rank, [r["rank"] for r in results])


def _print_late_rank(
    rank: Rank, trace: Trace, findings: list[Finding], suppressed: list[Suppressed], *, format: str, stopped: bool = False
) -> None:
    """Rank 0 printed its summary without this rank: this rank's findings, printed by itself (on stdout as workflow
    commands or text; on stderr when stdout holds rank 0's JSON or SARIF document)."""
    from . import formats
    from .ranks import timeout_seconds

    if stopped:
        _error("torchrun is stopping this rank (SIGTERM: another rank failed): its findings follow here")
    else:
        _error(f"rank 0 stopped waiting for this rank after {timeout_seconds():g} s (GRADVIZ_RANK_TIMEOUT): "
               f"its findings follow here")
    if format == "github":
        text = "".join(line + "\n" for line in formats.github_commands(
            findings, trace, labels={i: f"rank {rank.rank}" for i in range(len(findings))}, who=f"rank {rank.rank}"))
        with contextlib.suppress(Exception):
            sys.stdout.write(text)
            sys.stdout.flush()
        return
    console = _stdout_console(sys.stderr if format in ("json", "sarif") else None)
    print_findings(console, findings, labels={i: f"rank {rank.rank}" for i in range(len(findings))})
    program = Program("script", trace.script or "?")
    console.print(_tally_line(findings, program, trace, suppressed=suppressed), highlight=False, markup=False)


def _print_merged(
    rank: Rank,
    results: list[dict[str, Any]],
    missing: list[int],
    trace: Trace,
    *,
    quiet: bool,
    json_document: dict[str, Any] | None,
    fail_on: str,
    machine: bool = False,
    color: str = "auto",
) -> bool:
    from .analysis.findings import Finding as FindingRecord
    from .ranks import timeout_seconds

    merged = _merged_findings(results)
    failing = any(_severe(data.get("severity"), fail_on) for data, _ in merged.values())
    absent = ""
    if missing:
        absent = (f"no result from rank{'s' if len(missing) > 1 else ''} " + ", ".join(map(str, missing))
                  + f" after {timeout_seconds():g} s (GRADVIZ_RANK_TIMEOUT): crashed, or still running; a late rank "
                  "prints its own findings when it ends")
        _error(absent)
    if json_document is not None:
        from .formats import finding_dict

        document = dict(json_document)
        document["world_size"] = rank.world_size
        document["ranks"] = [
            {"rank": r["rank"], "exception": r.get("exception"), "exit_status": r.get("exit_status")} for r in results
        ] + [{"rank": r, "missing": True} for r in missing]
        document["findings"] = [
            {**finding_dict(FindingRecord.from_dict(data)), "ranks": ranks} for data, ranks in merged.values()
        ]
        suppressed = _merged_findings(results, key="suppressed")
        if suppressed:
            document["suppressed"] = [
                {**finding_dict(FindingRecord.from_dict(data)), "suppressed_by": data.get("suppressed_by"), "ranks": ranks}
                for data, ranks in suppressed.values()
            ]
        else:
            document.pop("suppressed", None)
        _print_json(document)
        return failing
    if machine:  # the SARIF log or the workflow commands are printed by the caller, once the status is known
        return failing
    if quiet and not merged and not missing:
        return failing
    console = _stdout_console(color=color)
    per_rank = "; ".join(
        f"rank {r['rank']}: " + ", ".join(
            _plural(sum(f.get("severity") == level for f in r.get("findings", [])), level) for level in ("error", "warning", "info")
        ) + (f", {len(r['suppressed'])} suppressed" if r.get("suppressed") else "")
        + (f", exited {r['exit_status']}" if r.get("exit_status") else "")
        for r in results
    )
    if missing:
        head = f"gradviz: {len(results)} of {rank.world_size} ranks reported: {per_rank}; " + "; ".join(
            f"rank {r}: no result" for r in missing)
    else:
        head = f"gradviz: all {rank.world_size} ranks: {per_rank}"
    console.print(for_terminal(head), highlight=False, markup=False)
    merged_findings = [FindingRecord.from_dict(data) for data, _ in merged.values()]
    labels = {i: ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks)) for i, (_, ranks) in enumerate(merged.values())}
    _print_report(merged_findings, Program("script", trace.script or "?"), trace, quiet=True, ranks=labels, color=color)
    return failing


def _merged_findings(results: list[dict[str, Any]], *, key: str = "findings") -> dict[tuple[Any, ...], tuple[dict[str, Any], list[int]]]:
    """The same finding on several ranks once, with the ranks that have it."""
    merged: dict[tuple[Any, ...], tuple[dict[str, Any], list[int]]] = {}
    for result in results:
        for data in result.get(key, []):
            identity = (data.get("kind"), data.get("file"), data.get("line"), data.get("parameter"))
            merged.setdefault(identity, (data, []))[1].append(result["rank"])
    return merged


def _exception_file(trace: Trace) -> str | None:
    location = trace.exception.location if trace.exception is not None else None
    return location.file if location is not None else None


def _print_ci_merged(format: str, merged: _Merged, trace: Trace, status: int) -> None:
    """Rank 0 under torchrun: one SARIF log of every rank's results, or every rank's workflow commands; a rank that
    did not report is said by name."""
    from . import formats
    from .analysis.findings import Finding as FindingRecord
    from .ranks import timeout_seconds
    from .sarif import merge_results

    absent = [
        f"gradviz: no result from rank {r} after {timeout_seconds():g} s (GRADVIZ_RANK_TIMEOUT): its findings are not "
        "in this log; it prints them itself when it ends"
        for r in merged.missing
    ]
    if format == "sarif":
        results = merge_results([(r["rank"], r.get("sarif_results", [])) for r in merged.results])
        notifications = [n for r in merged.results for n in r.get("sarif_notifications", [])]
        notifications += [{"level": "warning", "message": {"text": text}} for text in absent]
        document = formats.sarif_document([], trace, version=__version__, exit_code=status, results=results,
                                          notifications=notifications)
        text = formats.dumps(document)
    else:
        found = _merged_findings(merged.results)
        findings = [FindingRecord.from_dict(data) for data, _ in found.values()]
        labels = {i: ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))
                  for i, (_, ranks) in enumerate(found.values())}
        lines = formats.github_commands(findings, None, labels=labels)
        for r in merged.results:
            raised = r.get("exception")
            if raised and r.get("exit_status"):
                lines.append(formats.script_error_command(raised["type"], raised.get("message") or "", r.get("exception_file"),
                                                          raised.get("line"), who=f"rank {r['rank']}"))
        lines += [formats.github_notice("warning", text) for text in absent]
        text = "".join(line + "\n" for line in lines)
    with contextlib.suppress(Exception):
        sys.stdout.write(text)
        sys.stdout.flush()


# ---------------------------------------------------------------------------------------------- config, suppression
def _configure(options: argparse.Namespace, program: Program, outs: list[Path]) -> list[Path]:
    """[tool.gradviz] for the program (found from its folder upwards) merged into the options; the outputs moved
    into its output-dir when no -o was given."""
    from .config import apply_config

    start = Path(program.target).parent if program.kind in ("script", "trace") else Path.cwd()
    config = apply_config(options, start, script=Path(program.target) if program.kind == "script" else None)
    options.gradviz_config = config
    if config.output_dir is None or getattr(options, "output", None):
        return outs
    try:
        config.output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {_shown(config.output_dir)} ({config.source}: output-dir): "
                         f"{exc.strerror or exc}") from None
    return [config.output_dir / out.name for out in outs]


def _accept(findings: list[Finding], options: argparse.Namespace) -> tuple[list[Finding], list[Suppressed]]:
    from .config import Config, accepted

    return accepted(findings, options=options, config=getattr(options, "gradviz_config", None) or Config())


def _print_suppressed(console: Console, suppressed: list[Suppressed], options: argparse.Namespace, *, count: bool = False) -> None:
    """--show-suppressed: the accepted findings; `count` (render, which prints no tally): else how many."""
    from .formats import print_suppressed

    if getattr(options, "show_suppressed", False) and suppressed:
        print_suppressed(console, suppressed)
    elif count and suppressed:
        console.print(f"gradviz: {len(suppressed)} suppressed (--show-suppressed lists them)", highlight=False, markup=False)


# ---------------------------------------------------------------------------------------------- helpers
def _fail_on(options: argparse.Namespace) -> str:
    """--fail-on, or the command's default; --strict (check) is --fail-on warning."""
    strict = getattr(options, "strict", False)
    if strict and options.fail_on not in (None, "warning"):
        raise UsageError(f"--strict and --fail-on {options.fail_on} disagree: give one of them")
    return "warning" if strict else (options.fail_on or options.default_fail_on)


def _severe(severity: str | None, fail_on: str) -> bool:
    return severity == "error" and fail_on != "never" or severity == "warning" and fail_on == "warning"


def _fails(findings: list[Finding], fail_on: str) -> bool:
    return any(_severe(f.severity.value, fail_on) for f in findings)


def _report_ending(run: ProgramRun | None, trace: Trace, program: Program) -> int:
    """Say how the program ended, as Python would (its traceback; its own excepthook); the status it ended with.
    A saved trace's recorded error is history: one line, not raised again, and status 0."""
    if program.kind != "trace":
        report_program_error(run, trace)
        return exit_status(trace)
    record = trace.exception
    if record is None or record.exit_code == 0:
        return EXIT_OK
    name = _shown(program.target)
    if record.type in ("SystemExit", "os._exit"):
        _error(f"{name}: the recorded run exited with status {record.exit_code} (not repeated here)")
        return EXIT_OK
    at = f" at line {record.location.line}" if record.location else ""
    first = (record.message or "").strip().splitlines()
    message = f": {first[0]}" if first else ""
    _error(f"{name}: the recorded run raised {record.type}{at}{message} (recorded, not raised again)")
    return EXIT_OK


def _check_step(trace: Trace, program: Program, options: argparse.Namespace) -> None:
    """--step K beyond the backward calls the trace holds: said as soon as the trace is known (right after a saved
    trace is read, before anything is drawn), naming the steps there are."""
    step = getattr(options, "step", None)
    if step is None:
        return
    from .render.steps import split_steps

    count = len(split_steps(trace))
    if step > count:
        window = f" ({trace.window.describe()})" if trace.window is not None and trace.window.closed else ""
        where = "the saved trace holds" if program.kind == "trace" else "the run made"
        choose = f"choose 1-{count}" if count > 1 else ("only --step 1 exists" if count == 1 else "there is no step to draw")
        raise UsageError(
            f"--step {step} does not exist: {where} {count} backward call(s) with a graph{window}; {choose}"
        )


def _warn_if_empty(trace: Trace, program: Program) -> None:
    if not trace.tensors:
        name = _shown(program.target) if program.kind != "module" else program.shown
        _error(f"warning: {name} created no tensors, so there is nothing to draw or check")


def _diagnose(trace: Trace, progress: Progress) -> tuple[list[Finding], Exception | None]:
    """The findings, or none and the error when the analysis itself fails (the diagram is still drawn)."""
    from .analysis import diagnose

    with progress.spinner("analysing the trace"):
        try:
            return diagnose(trace), None  # a list that carries the lifetimes it computed
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


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 or word == "info" else "s")
