"""What `gradviz render` and `gradviz check` print on stdout for one process: the findings and the tally line, the
JSON document, the SARIF log or workflow commands; which findings fail the run."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TextIO

from ..text import safe_str
from ..version import __version__
from .formats import ci_text, finding_dict, print_findings, print_suppressed
from .run import Program, exit_status
from .terminal import can_encode, rank_prefix, shown, stdout_console

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from ..analysis.findings import Finding
    from ..analysis.names import Namer
    from ..model import Trace
    from .suppress import Suppressed

__all__ = [
    "check_document",
    "documents_to",
    "fails",
    "plural",
    "print_ci_output",
    "print_json",
    "print_report",
    "print_suppressed_or_count",
    "script_exception",
    "severe",
    "tally_line",
]


# ---------------------------------------------------------------------------------------------- failing
def severe(severity: str | None, fail_on: str) -> bool:
    """A finding of this severity fails the run under --fail-on `fail_on`."""
    return severity == "error" and fail_on != "never" or severity == "warning" and fail_on == "warning"


def fails(findings: list[Finding], fail_on: str) -> bool:
    return any(severe(f.severity.value, fail_on) for f in findings)


# ---------------------------------------------------------------------------------------------- text
def print_report(
    findings: list[Finding], program: Program, trace: Trace, *, quiet: bool, ranks: dict[int, str] | None = None,
    suppressed: list[Suppressed] | None = None,
    color: str = "auto",
) -> None:
    """The findings, then (unless `quiet`, or rank 0's summary labels them by `ranks`) the tally line."""
    console = stdout_console(color=color)
    print_findings(console, findings, labels=ranks)
    if not quiet and ranks is None:
        if trace.window is not None:  # steps the sentinel traced again after the window
            for line in [*trace.window.describe_rearmed(), *trace.window.describe_unwatched()]:
                console.print(f"{rank_prefix()}gradviz: {line}", highlight=False, markup=False)
        console.print(tally_line(findings, program, trace, suppressed=suppressed), highlight=False, markup=False)


def tally_line(findings: list[Finding], program: Program, trace: Trace, *, suppressed: list[Suppressed] | None = None) -> Text:
    """`train.py: 1 error, 0 warnings, 0 info; the script raised RuntimeError at line 9`, or `no problems found`."""
    from rich.text import Text

    counts = {level: sum(f.severity.value == level for f in findings) for level in ("error", "warning", "info")}
    tally = ", ".join(plural(counts[level], level) for level in ("error", "warning", "info"))
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
    # what gradviz missed is said, never a plain "no problems"
    for unrecorded in (trace.internal_error_summary(), trace.unrecorded_threads_summary()):
        if unrecorded:
            ending += f"; {unrecorded}"
    name = shown(program.target) if program.kind != "module" else program.shown
    window = f" ({trace.window.describe()})" if trace.window is not None and trace.window.closed else ""
    if findings or ending:
        return Text(f"{rank_prefix()}{name}: {tally}{ending}{window}")
    accepted = f" ({len(suppressed)} suppressed)" if suppressed else ""
    return Text(f"{rank_prefix()}{name}: no problems found{accepted}{window}", style="green")


def print_suppressed_or_count(console: Console, suppressed: list[Suppressed], *, show: bool, count: bool = False) -> None:
    """--show-suppressed (`show`): the accepted findings; `count` (render, which prints no tally): else how many."""
    if show and suppressed:
        print_suppressed(console, suppressed)
    elif count and suppressed:
        console.print(f"gradviz: {len(suppressed)} suppressed (--show-suppressed lists them)", highlight=False, markup=False)


def plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 or word == "info" else "s")


# ---------------------------------------------------------------------------------------------- documents
def check_document(
    findings: list[Finding], suppressed: list[Suppressed], program: Program, trace: Trace, *,
    analysis_error: Exception | None,
) -> dict[str, Any]:
    """`gradviz check --json`'s document: {"gradviz", "script", "exception", "findings"}, and what applies of
    "suppressed", "module", "window", "internal_error"."""
    document: dict[str, Any] = {
        "gradviz": __version__,
        "script": program.target if program.kind != "module" else trace.script,
        "exception": script_exception(trace),
        "findings": [finding_dict(f) for f in findings],
    }
    if suppressed:
        document["suppressed"] = [{**finding_dict(s.finding), "suppressed_by": s.reason} for s in suppressed]
    if program.kind == "module":
        document["module"] = program.target
    if trace.window is not None and trace.window.closed:  # only part of the run was traced: say which
        document["window"] = {**asdict(trace.window), "description": trace.window.describe(),
                              "coverage": trace.window.coverage()}
    if trace.unrecorded_threads:  # threads whose torch calls are not in the trace
        document["unrecorded_threads"] = list(trace.unrecorded_threads)
    if analysis_error is not None:
        document["internal_error"] = f"{type(analysis_error).__name__}: {safe_str(analysis_error)}"
    return document


def script_exception(trace: Trace) -> dict[str, Any] | None:
    """The script's error as the JSON document states it (none for a clean exit)."""
    if trace.exception is None or trace.exception.exit_code == 0:
        return None
    location = trace.exception.location
    return {"type": trace.exception.type, "message": trace.exception.message, "line": location.line if location else None}


def print_json(document: dict[str, Any]) -> None:
    text = json.dumps(document, indent=2, ensure_ascii=False)
    if not can_encode(_document_stream(), text):  # an ASCII-only stdout (PYTHONIOENCODING=ascii): JSON's own escapes
        text = json.dumps(document, indent=2, ensure_ascii=True)
    write_stdout(text + "\n")


def print_ci_output(
    format: str, findings: list[Finding], trace: Trace, status: int, problem: Exception | None, *,
    suppressed: list[Suppressed] | None = None, namer: Namer | None = None,
) -> None:
    """`--format sarif` (one SARIF 2.1.0 log) or `--format github` (one workflow command per finding) on stdout."""
    internal = f"{type(problem).__name__}: {safe_str(problem)}" if problem is not None else None
    write_stdout(ci_text(format, findings, trace, version=__version__, exit_code=status, internal_error=internal,
                         suppressed=suppressed or [], namer=namer))


def write_stdout(text: str) -> None:
    """A document on stdout; a closed or broken stdout loses it silently (the exit status still tells)."""
    stream = _document_stream()
    with contextlib.suppress(Exception):
        stream.write(text)
        stream.flush()


# where documents go while the program's output is sent to stderr (`documents_to`); innermost last
_DOCUMENT_STREAMS: list[TextIO] = []


def _document_stream() -> TextIO:
    return _DOCUMENT_STREAMS[-1] if _DOCUMENT_STREAMS else sys.stdout


@contextlib.contextmanager
def documents_to(stream: TextIO | None) -> Iterator[None]:
    """Inside the block, documents (`--json`, SARIF, workflow commands) go to `stream`, the real stdout, while
    `sys.stdout` and file descriptor 1 carry the program's output to stderr; the stream is closed after. None:
    sys.stdout, as outside."""
    if stream is None:
        yield
        return
    _DOCUMENT_STREAMS.append(stream)
    try:
        yield
    finally:
        _DOCUMENT_STREAMS.remove(stream)
        with contextlib.suppress(Exception):
            stream.close()
