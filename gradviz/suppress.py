"""Accepted findings: `# gradviz: ignore[kind, ...]` on the reported line or the line above, and kinds allowed by
`--allow`, `[tool.gradviz] allow` or the pytest marker. One function splits findings into kept and suppressed, for
every front end (check, render, the pytest plugin, JSON, SARIF)."""

from __future__ import annotations

import linecache
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .analysis.findings import Finding, FindingKind

__all__ = ["Suppressed", "comment_kinds", "split", "suppressed_text"]

# `# gradviz: ignore`, `# gradviz: ignore[cut_edge]`, `#gradviz:ignore[cut_edge, dead_parameter]` (like mypy's and
# ruff's comments: anywhere in a line's trailing comment)
_COMMENT = re.compile(r"#.*?\bgradviz:\s*ignore\b(?:\[(?P<kinds>[^\]]*)\])?", re.IGNORECASE)
EVERY_KIND = frozenset(kind.value for kind in FindingKind)


@dataclass(frozen=True)
class Suppressed:
    """A finding that was found and accepted: why (`# gradviz: ignore[cut_edge]` at line 12, `--allow cut_edge`),
    and whether the reason sits in the source (SARIF's `inSource`) or outside it (`external`)."""

    finding: Finding
    reason: str
    in_source: bool

    def to_dict(self) -> dict[str, Any]:
        return {**self.finding.to_dict(), "suppressed_by": self.reason}


def comment_kinds(line: str) -> frozenset[str] | None:
    """The kinds a source line's `# gradviz: ignore[...]` accepts (every kind for a bare `ignore`), None without one."""
    match = _COMMENT.search(line)
    if match is None:
        return None
    listed = match.group("kinds")
    if listed is None:
        return EVERY_KIND
    return frozenset(kind.strip() for kind in listed.split(",") if kind.strip())


def split(
    findings: Iterable[Finding],
    *,
    allow: Iterable[str] = (),
    allowed_by: str = "--allow",
) -> tuple[list[Finding], list[Suppressed]]:
    """(the findings that stand, the suppressed ones). `allow`: kinds accepted everywhere, said to come from
    `allowed_by`; a finding whose line or the line above has `# gradviz: ignore[its kind]` is accepted too."""
    allowed = frozenset(allow)
    kept: list[Finding] = []
    suppressed: list[Suppressed] = []
    for finding in findings:
        comment = _comment_for(finding)
        if comment is not None:
            suppressed.append(Suppressed(finding, comment, True))
        elif finding.kind.value in allowed:
            suppressed.append(Suppressed(finding, f"{allowed_by} {finding.kind.value}", False))
        else:
            kept.append(finding)
    return kept, suppressed


def _comment_for(finding: Finding) -> str | None:
    if not finding.file or not finding.line:
        return None
    for line in (finding.line, finding.line - 1):
        if line < 1:
            continue
        text = _source_line(finding, line)
        kinds = comment_kinds(text) if text else None
        if kinds is not None and finding.kind.value in kinds:
            match = _COMMENT.search(text)
            return f"`{match.group().lstrip('#').strip() if match else 'gradviz: ignore'}` at line {line}"
    return None


def _source_line(finding: Finding, line: int) -> str:
    text = linecache.getline(finding.file or "", line)
    if not text and line == finding.line:  # the file is gone: the line recorded with the finding
        return finding.code
    return text


def suppressed_text(count: int) -> str:
    """`2 suppressed` (empty for none): the tally's part for accepted findings."""
    return f"{count} suppressed" if count else ""
