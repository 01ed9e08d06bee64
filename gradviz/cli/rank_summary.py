"""torchrun: every rank's findings merged into rank 0's one summary (text, one JSON document, one SARIF log, the
workflow commands of every rank); a rank rank 0 stopped waiting for prints its own findings when it ends."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analysis.findings import Finding as FindingRecord
from ..text import for_terminal
from ..version import __version__
from . import formats
from .formats import finding_dict, print_findings
from .ranks import Rank, gather, publish, release, stop_signal, timeout_seconds
from .report import plural, print_json, print_report, script_exception, severe, tally_line, write_stdout
from .run import Program, exit_status
from .sarif import merge_results, sarif_results, script_notifications
from .terminal import error, stdout_console

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..analysis.names import Namer
    from ..model import Trace
    from .suppress import Suppressed

__all__ = ["Merged", "merge_ranks", "print_ci_merged"]


@dataclass
class Merged:
    """What rank 0 gathered: every rank's result, the ranks that did not report, the merged findings."""

    results: list[dict[str, Any]]
    missing: list[int]
    failing: bool = False


def merge_ranks(
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
    format: str = "text",
    color: str = "auto",
    namer: Namer | None = None,
) -> Merged:
    """Every rank leaves its result for rank 0, which prints one summary of all ranks (one JSON document with
    --json, one SARIF log, the workflow commands of every rank). A rank that rank 0 stopped waiting for
    (GRADVIZ_RANK_TIMEOUT) prints its own findings when it ends."""
    if stop_signal.received:  # torchrun is ending this rank (another failed): no one may be left to merge with
        _print_late_rank(rank, trace, findings, suppressed or [], format=format, stopped=True)
        return Merged([], [])
    own: dict[str, Any] = {
        "findings": [f.to_dict() for f in findings],
        "suppressed": [s.to_dict() for s in suppressed or []],
        "exception": script_exception(trace),
        "exception_file": _exception_file(trace),
        "exit_status": exit_status(trace),
        "written": [str(p) for p in written],
    }
    if format == "sarif":  # each rank makes its own results: the related locations need its trace
        own["sarif_results"] = sarif_results(findings, trace, suppressed=suppressed or [], namer=namer)
        own["sarif_notifications"] = script_notifications(trace, who=f"rank {rank.rank}")
    if rank.rank != 0:
        if not publish(rank, own, since=started):
            _print_late_rank(rank, trace, findings, suppressed or [], format=format)
        return Merged([], [])
    results, missing = gather(rank, own, since=started)
    try:
        merged = Merged(results, missing)
        merged.failing = _print_merged(rank, results, missing, trace, quiet=quiet, json_document=json_document,
                                       fail_on=fail_on, machine=format in ("sarif", "github"),
                                       color=color)
        return merged
    finally:
        release(rank, [r["rank"] for r in results])


def _print_late_rank(
    rank: Rank, trace: Trace, findings: list[Finding], suppressed: list[Suppressed], *, format: str, stopped: bool = False
) -> None:
    """Rank 0 printed its summary without this rank: this rank's findings, printed by itself (on stdout as workflow
    commands or text; on stderr when stdout holds rank 0's JSON or SARIF document)."""
    if stopped:
        error("torchrun is stopping this rank (SIGTERM: another rank failed): its findings follow here")
    else:
        error(f"rank 0 stopped waiting for this rank after {timeout_seconds():g} s (GRADVIZ_RANK_TIMEOUT): "
               f"its findings follow here")
    if format == "github":
        text = "".join(line + "\n" for line in formats.github_commands(
            findings, trace, labels={i: f"rank {rank.rank}" for i in range(len(findings))}, who=f"rank {rank.rank}"))
        write_stdout(text)
        return
    console = stdout_console(sys.stderr if format in ("json", "sarif") else None)
    print_findings(console, findings, labels={i: f"rank {rank.rank}" for i in range(len(findings))})
    program = Program("script", trace.script or "?")
    console.print(tally_line(findings, program, trace, suppressed=suppressed), highlight=False, markup=False)


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
    merged = _merged_findings(results)
    failing = any(severe(data.get("severity"), fail_on) for data, _ in merged.values())
    absent = ""
    if missing:
        absent = (f"no result from rank{'s' if len(missing) > 1 else ''} " + ", ".join(map(str, missing))
                  + f" after {timeout_seconds():g} s (GRADVIZ_RANK_TIMEOUT): crashed, or still running; a late rank "
                  "prints its own findings when it ends")
        error(absent)
    if json_document is not None:
        print_json(_merged_document(rank, results, missing, merged, json_document))
        return failing
    if machine:  # the SARIF log or the workflow commands are printed by the caller, once the status is known
        return failing
    if quiet and not merged and not missing:
        return failing
    console = stdout_console(color=color)
    console.print(for_terminal(_ranks_head(rank, results, missing)), highlight=False, markup=False)
    merged_findings = [FindingRecord.from_dict(data) for data, _ in merged.values()]
    labels = {i: ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks)) for i, (_, ranks) in enumerate(merged.values())}
    print_report(merged_findings, Program("script", trace.script or "?"), trace, quiet=True, ranks=labels, color=color)
    return failing


def _merged_document(
    rank: Rank,
    results: list[dict[str, Any]],
    missing: list[int],
    merged: dict[tuple[Any, ...], tuple[dict[str, Any], list[int]]],
    json_document: dict[str, Any],
) -> dict[str, Any]:
    """`--format json` for the whole job: every rank's status, each finding once with the ranks that have it."""
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
    return document


def _ranks_head(rank: Rank, results: list[dict[str, Any]], missing: list[int]) -> str:
    """The summary's first line: what each rank found (or that it sent nothing)."""
    per_rank = "; ".join(
        f"rank {r['rank']}: " + ", ".join(
            plural(sum(f.get("severity") == level for f in r.get("findings", [])), level) for level in ("error", "warning", "info")
        ) + (f", {len(r['suppressed'])} suppressed" if r.get("suppressed") else "")
        + (f", exited {r['exit_status']}" if r.get("exit_status") else "")
        for r in results
    )
    if missing:
        return f"gradviz: {len(results)} of {rank.world_size} ranks reported: {per_rank}; " + "; ".join(
            f"rank {r}: no result" for r in missing)
    return f"gradviz: all {rank.world_size} ranks: {per_rank}"


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


def print_ci_merged(format: str, merged: Merged, trace: Trace, status: int) -> None:
    """Rank 0 under torchrun: one SARIF log of every rank's results, or every rank's workflow commands; a rank that
    did not report is said by name."""
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
    write_stdout(text)
