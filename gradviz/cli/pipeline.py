"""One run of `gradviz render` or `gradviz check`: obtain the trace (run the program, or read a saved trace),
diagnose, accept, write the outputs, print, and the exit status. The two commands differ only in what they write
and print; `exit_status_of` is the one rule for the status."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..text import safe_str
from .errors import UsageError
from .formats import print_findings
from .options import Options
from .rank_summary import Merged, merge_ranks, print_ci_merged
from .ranks import Rank, current_rank, stop_signal
from .report import (
    check_document,
    documents_to,
    fails,
    print_ci_output,
    print_json,
    print_report,
    print_suppressed_or_count,
    tally_line,
)
from .run import (
    Program,
    check_program,
    exit_status,
    load_trace,
    program_of,
    refuse_input_as_output,
    report_program_error,
    run_program,
    stdout_to_stderr,
)
from .runner_options import check_suffix
from .terminal import (
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    Progress,
    error,
    internal_error,
    prepare_streams,
    rank_prefix,
    shown,
    stdout_console,
)

if TYPE_CHECKING:
    from ..analysis.collection import Diagnosis
    from ..analysis.findings import Finding
    from ..analysis.lifetime import Lifetimes
    from ..analysis.names import Namer
    from ..model import Trace, WindowRecord
    from ..picture.picture import Picture
    from ..tracer.runner import HardExitHandler, ProgramRun
    from .config import Config
    from .suppress import Suppressed

__all__ = ["exit_status_of", "run_command"]


@dataclass(frozen=True)
class _Run:
    """One command, ready to obtain its trace: the options with `[tool.gradviz]` merged in, and what follows."""

    options: Options
    config: Config
    program: Program
    outs: list[Path]  # render's outputs (check draws nothing)
    window: dict[str, Any]  # what the tracer is given: the step window, --verify
    fail_on: str
    rank: Rank | None
    progress: Progress
    started: float

    @property
    def draws(self) -> bool:
        return self.options.command == "render"


def run_command(options: Options) -> int:
    """`gradviz render` or `gradviz check` with these options: the exit status (UsageError and the like for the
    caller to report)."""
    run = _prepare(options)

    def finish(trace: Trace, program_run: ProgramRun | None, hard_exit: int | None = None) -> int:
        return _finish(run, trace, program_run, hard_exit=hard_exit)

    def on_hard_exit(trace: Trace, code: int) -> int:  # os._exit(): the findings before the process ends
        return finish(trace, None, None if run.draws else code)

    if not run.options.machine or run.program.kind == "trace":
        trace, program_run = _obtain(run, on_hard_exit)
        return finish(trace, program_run)
    # a document on stdout (`check --json`...): the program's output goes to stderr, from its start until gradviz
    # is done, and to the end of the process where a thread or an atexit handler of the program may print later
    redirect = stdout_to_stderr().__enter__()
    try:
        with documents_to(redirect.documents()):
            trace, program_run = _obtain(run, on_hard_exit)
            return finish(trace, program_run)
    finally:
        redirect.end()


def _prepare(options: Options) -> _Run:
    """Everything that can be refused is refused before anything runs: a long training run must not end in
    "cannot write"."""
    program = program_of(options.script, options.module, list(options.script_args))
    draws = options.command == "render"
    if not draws:
        check_program(program)
    rank = current_rank()
    outs = options.output_paths(program.stem, rank=rank.rank if rank else None) if draws else []
    options, config, outs = _configure(options, program, outs)
    if draws:
        for out in outs:
            _check_writable(out)
            check_suffix(out, shown=shown(out))
        check_program(program)
        refuse_input_as_output(program, outs)  # -o through a link to the script must not overwrite it
    window = _window_of(options, program)
    fail_on = options.fail_level()
    progress = Progress(quiet=options.quiet or options.machine, color=options.color, forced=options.progress)
    return _Run(options, config, program, outs, window, fail_on, rank, progress, time.time())


def _obtain(run: _Run, on_hard_exit: HardExitHandler) -> tuple[Trace, ProgramRun | None]:
    """Run the program under the tracer (within the step window), or read the saved trace (nothing runs). --step K
    is said at once when the window closes before backward call K."""
    program, progress, window = run.program, run.progress, run.window
    step = run.options.step
    if program.kind == "trace":
        return load_trace(program), None
    name = shown(program.target) if program.kind == "script" else program.shown
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

    try:  # (with a document on stdout, run_command sent the program's output to stderr)
        program_run = run_program(program, on_hard_exit=stop_watching, on_start=on_start, **window)
    finally:
        stop_signal.running(None)
        if watcher is not None:
            watcher.stop()
    _note_stop(program_run.trace, program)
    return program_run.trace, program_run


def _window_of(options: Options, program: Program) -> dict[str, Any]:
    """--steps / --stop-after and --verify (bad values: WindowOptionsError); a saved trace runs nothing, so none
    applies."""
    window = options.tracer_kwargs()
    if program.kind == "trace":
        if options.steps is not None or options.stop_after is not None:
            raise UsageError(f"{program.target!r} is a saved trace: nothing runs, so --steps and --stop-after do not apply")
        if options.verify:
            raise UsageError(f"{program.target!r} is a saved trace: nothing runs, so --verify cannot measure (its "
                             "measurements, if it was traced with --verify, are in it)")
        return {}
    return window


def _note_stop(trace: Trace, program: Program) -> None:
    record = trace.window
    if record is not None and record.stopped:
        what = "step" if record.unit == "step" else "backward() call"
        what += "s" if record.traced != 1 else ""
        name = shown(program.target) if program.kind == "script" else program.shown
        error(f"stopped {name} after {record.traced} traced {what} (--stop-after); exit status as if it had ended normally")


# ---------------------------------------------------------------------------------------------- config, suppression
def _configure(options: Options, program: Program, outs: list[Path]) -> tuple[Options, Config, list[Path]]:
    """[tool.gradviz] for the program (found from its folder upwards) merged into the options; the outputs moved
    into its output-dir when no -o was given."""
    from .config import load_checked

    start = Path(program.target).parent if program.kind in ("script", "trace") else Path.cwd()
    config = load_checked(start, allow=options.allow, script=Path(program.target) if program.kind == "script" else None)
    options = options.configured(config)
    if config.output_dir is None or options.output:
        return options, config, outs
    try:
        config.output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {shown(config.output_dir)} ({config.source}: output-dir): "
                         f"{exc.strerror or exc}") from None
    return options, config, [config.output_dir / out.name for out in outs]


def _accept(findings: list[Finding], run: _Run) -> tuple[list[Finding], list[Suppressed]]:
    from .config import accepted

    return accepted(findings, allow=run.options.allow, config=run.config)


def _report_ending(run: ProgramRun | None, trace: Trace, program: Program) -> int:
    """Say how the program ended, as Python would (its traceback; its own excepthook); the status it ended with.
    A saved trace's recorded error is history: one line, not raised again, and status 0."""
    if program.kind != "trace":
        report_program_error(run, trace)
        return exit_status(trace)
    record = trace.exception
    if record is None or record.exit_code == 0:
        return EXIT_OK
    name = shown(program.target)
    if record.type in ("SystemExit", "os._exit"):
        error(f"{name}: the recorded run exited with status {record.exit_code} (not repeated here)")
        return EXIT_OK
    at = f" at line {record.location.line}" if record.location else ""
    first = (record.message or "").strip().splitlines()
    message = f": {first[0]}" if first else ""
    error(f"{name}: the recorded run raised {record.type}{at}{message} (recorded, not raised again)")
    return EXIT_OK


def _check_step(trace: Trace, program: Program, options: Options) -> None:
    """--step K beyond the backward calls the trace holds: said as soon as the trace is known (right after a saved
    trace is read, before anything is drawn), naming the steps there are."""
    step = options.step
    if step is None:
        return
    from ..picture.steps import split_steps, traced_text

    steps = split_steps(trace)
    count = len(steps)
    if step not in {s.number for s in steps}:
        window = f" ({trace.window.describe()})" if trace.window is not None and trace.window.closed else ""
        where = "the saved trace holds" if program.kind == "trace" else "the run made"
        choose = (f"choose {traced_text(steps)}" if count > 1 else
                  f"only --step {steps[0].number} exists" if count == 1 else "there is no step to draw")
        raise UsageError(
            f"--step {step} does not exist: {where} {count} backward call(s) with a graph{window}; {choose}"
        )


def _warn_if_empty(trace: Trace, program: Program) -> None:
    if not trace.tensors:
        name = shown(program.target) if program.kind != "module" else program.shown
        error(f"warning: {name} created no tensors, so there is nothing to draw or check")


def _diagnose(trace: Trace, progress: Progress) -> tuple[Diagnosis | None, Exception | None]:
    """The diagnosis, or none and the error when the analysis itself fails (the diagram is still drawn)."""
    from ..analysis import diagnosis

    with progress.spinner("analysing the trace"):
        try:
            return diagnosis(trace), None  # the findings with the lifetimes and names it computed
        except Exception as exc:  # noqa: BLE001 - a bug in the analysis: the diagram is still drawn, the error said
            return None, exc


def _check_writable(out: Path) -> None:
    """Refuse, before the program runs, an output that cannot be written as a file: a folder; a folder that is
    missing or takes no new file (read-only, a mount like /sys: only trying tells, `os.access` says yes to root);
    an existing path that is not a regular file (writing a FIFO nobody reads blocks for ever, a device such as
    /dev/null is no file to show); or the file gradviz prints its own report to (`-o report.svg` with stdout
    redirected there, or a link to /dev/stdout)."""
    parent = out.parent
    if out.is_dir():
        raise UsageError(f"cannot write {shown(out)}: it is a folder")
    if not parent.exists():
        raise UsageError(f"cannot write {shown(out)}: folder {shown(parent)} does not exist")
    if not parent.is_dir():
        raise UsageError(f"cannot write {shown(out)}: {shown(parent)} is not a folder")
    try:
        info: os.stat_result | None = os.stat(out)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise UsageError(f"cannot write {shown(out)}: {exc.strerror or exc}") from None
    if info is not None:
        if not stat.S_ISREG(info.st_mode):
            kind = "a FIFO (named pipe)" if stat.S_ISFIFO(info.st_mode) else (
                "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "a socket or other special file")
            raise UsageError(f"cannot write {shown(out)}: it is not a regular file ({kind}); give -o a file")
        for fd, name in ((1, "stdout"), (2, "stderr")):
            with contextlib.suppress(OSError):
                own = os.fstat(fd)
                if (own.st_dev, own.st_ino) == (info.st_dev, info.st_ino):
                    raise UsageError(f"cannot write {shown(out)}: it is gradviz's {name}, where its report goes")
    try:
        if info is not None:  # opened to append, nothing written: the file is left as it is
            os.close(os.open(out, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
        else:
            handle, probe = tempfile.mkstemp(prefix=".gradviz-", suffix=".probe", dir=parent)
            os.close(handle)
            os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if info is None:
            reason = f"folder {shown(parent)} takes no new file ({reason})"
        raise UsageError(f"cannot write {shown(out)}: {reason}") from None


# ---------------------------------------------------------------------------------------------- from trace to status
def _finish(run: _Run, trace: Trace, program_run: ProgramRun | None, *, hard_exit: int | None = None) -> int:
    """From the trace to the exit status: diagnose, accept, write (render), print, merge the ranks."""
    options, program, rank = run.options, run.program, run.rank
    prepare_streams()
    if run.draws:
        _check_step(trace, program, options)
    diagnosis, analysis_error = _diagnose(trace, run.progress)
    # computed by the analysis, reused by the pictures and SARIF (the accepted findings are a plain list)
    life, namer = (diagnosis.lifetimes, diagnosis.namer) if diagnosis is not None else (None, None)
    findings, suppressed = _accept(diagnosis.findings if diagnosis is not None else [], run)
    _warn_if_empty(trace, program)
    written: list[Path] = []
    problems: list[UsageError] = []
    document: dict[str, Any] | None = None
    if run.draws:
        try:
            written, problems = _write_outputs(run, trace, findings, life, namer)
        except _Crashed as crash:
            return crash.status
        _print_render(run, trace, findings, suppressed, written)
    else:
        document = _print_check(run, trace, findings, suppressed, analysis_error)
        if analysis_error is not None:  # nothing is known of the findings: the script's ending is not told
            if options.format in ("sarif", "github") and (rank is None or rank.rank == 0):
                print_ci_output(options.format, findings, trace, EXIT_INTERNAL, analysis_error, suppressed=suppressed,
                                namer=namer)
            return internal_error(analysis_error)
    if run.draws or options.format == "text" or program.kind == "trace":
        ended = _report_ending(program_run, trace, program)
    else:  # the SARIF log or the workflow commands state the script's error
        ended = exit_status(trace)
    failing = fails(findings, run.fail_on)
    merged: Merged | None = None
    if rank is not None:
        merged = merge_ranks(
            rank, trace, findings, written, run.started, quiet=options.quiet, json_document=document,
            fail_on=run.fail_on, suppressed=suppressed, format=options.format, color=options.color, namer=namer,
        )
        failing = failing or merged.failing
    status = exit_status_of(ended, failing=failing, clamp=not run.draws, hard_exit=hard_exit)
    if options.format in ("sarif", "github") and rank is None:
        print_ci_output(options.format, findings, trace, status, None, suppressed=suppressed, namer=namer)
    elif options.format in ("sarif", "github") and merged is not None and rank is not None and rank.rank == 0:
        print_ci_merged(options.format, merged, trace, status)
    for problem in problems:
        error(safe_str(problem))
    if problems:
        return EXIT_USAGE
    if analysis_error is not None:
        return internal_error(analysis_error)
    return status


def exit_status_of(ended: int, *, failing: bool, clamp: bool, hard_exit: int | None = None) -> int:
    """The exit status from how the program `ended` (its status), whether a finding fails the run (--fail-on),
    and, for `check` (`clamp`), 1 for any failure of the script; `hard_exit`: the code the script gave os._exit(),
    which check keeps unless a finding fails the run. (2, outputs that could not be written, and 3, gradviz's own
    failure, are decided before this.)"""
    if hard_exit is not None:
        return EXIT_FINDINGS if failing else hard_exit
    status = min(ended, EXIT_FINDINGS) if clamp else ended
    return max(status, EXIT_FINDINGS) if failing else status


class _Crashed(Exception):
    """Drawing failed inside gradviz: the status of the internal error, already reported."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _write_outputs(
    run: _Run, trace: Trace, findings: list[Finding], life: Lifetimes | None, namer: Namer | None
) -> tuple[list[Path], list[UsageError]]:
    """Every -o of the run, drawn from one picture model: those written, and why the others were not (dot missing,
    a file unwritable: the findings are still worth showing). A bug in gradviz saves the trace beside the output."""
    from ..picture.picture import Picture

    written: list[Path] = []
    problems: list[UsageError] = []
    said: set[str] = set()  # several outputs of one view make the same choice: say it once
    picture = Picture(trace, findings, life=life, namer=namer)  # what every output of this run is drawn from, derived once
    for out in run.outs:
        try:
            written.append(_write_diagram(trace, findings, out, run.options, run.progress, said, picture))
        except UsageError as exc:
            problems.append(exc)
        except Exception as exc:  # noqa: BLE001 - a bug in gradviz: the trace saved beside the output, one line
            trace_file = out.with_name(out.stem + ".trace.json")
            with contextlib.suppress(Exception):
                trace.to_json(trace_file)
                error(f"wrote the trace to {shown(trace_file)}")
            raise _Crashed(internal_error(exc)) from None
    return written, problems


def _write_diagram(
    trace: Trace, findings: list[Finding], out: Path, options: Options, progress: Progress, said: set[str],
    picture: Picture | None = None,
) -> Path:
    from ..render import render
    from ..render.diagram import INSTALL_ADVICE, GraphvizNotFound

    with progress.spinner(f"laying out the {options.view} view"):
        try:
            diagram = render(trace, findings=findings, picture=picture, **options.render_kwargs())
            diagram.save(out)
        except GraphvizNotFound as exc:
            dot_file = getattr(exc, "dot_path", None) or out.with_suffix(".dot")
            raise UsageError(
                f"Graphviz's `dot` program was not found, so {shown(out)} could not be drawn; "
                f"wrote the DOT source to {shown(dot_file)} instead. {INSTALL_ADVICE}"
            ) from None
        except OSError as exc:
            raise UsageError(f"cannot write {shown(out)}: {exc.strerror or exc}") from None
        except ValueError as exc:  # unknown suffix, caught earlier unless render knows fewer formats
            raise UsageError(safe_str(exc)) from None
    if not options.quiet:
        for message in diagram.messages:  # which module depth the graph view chose, and how to change it
            if message not in said:
                said.add(message)
                stdout_console(color=options.color).print(f"{rank_prefix()}{message}", highlight=False, markup=False)
    return out


def _print_render(run: _Run, trace: Trace, findings: list[Finding], suppressed: list[Suppressed], written: list[Path]) -> None:
    """The files written and the window (unless -q); the findings as `gradviz check` prints them, never hidden by
    -q (under torchrun rank 0 prints every rank's)."""
    options = run.options
    console = stdout_console(color=options.color)
    if not options.quiet:
        for path in written:
            console.print(f"{rank_prefix()}gradviz: wrote {shown(path)}", highlight=False, markup=False)
        if trace.window is not None and trace.window.closed:
            console.print(f"{rank_prefix()}gradviz: {trace.window.describe()}", highlight=False, markup=False)
            for line in [*trace.window.describe_rearmed(), *trace.window.describe_unwatched()]:
                console.print(f"{rank_prefix()}gradviz: {line}", highlight=False, markup=False)
        unrecorded = trace.unrecorded_threads_summary()
        if unrecorded:
            console.print(f"{rank_prefix()}gradviz: {unrecorded}", highlight=False, markup=False)
    if run.rank is None:
        print_findings(console, findings)
        print_suppressed_or_count(console, suppressed, show=options.show_suppressed, count=True)


def _print_check(
    run: _Run, trace: Trace, findings: list[Finding], suppressed: list[Suppressed], analysis_error: Exception | None
) -> dict[str, Any] | None:
    """The JSON document (printed here unless rank 0 merges it: returned), or the text report; SARIF and workflow
    commands wait for the exit status, which the log records."""
    options, program = run.options, run.program
    if options.json:
        document = check_document(findings, suppressed, program, trace, analysis_error=analysis_error)
        if run.rank is None:
            print_json(document)
        return document
    if options.format in ("sarif", "github"):
        return None
    if run.rank is None:
        print_report(findings, program, trace, quiet=options.quiet, suppressed=suppressed, color=options.color)
        print_suppressed_or_count(stdout_console(color=options.color), suppressed, show=options.show_suppressed)
    elif not options.quiet:  # under torchrun, rank 0 prints the findings of all ranks at once
        stdout_console(color=options.color).print(
            tally_line(findings, program, trace, suppressed=suppressed), highlight=False, markup=False
        )
    return None
