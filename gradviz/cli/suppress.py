"""Accepted findings: `# gradviz: ignore[kind, ...]` on the reported line or the line above, and kinds allowed by
`--allow`, `[tool.gradviz] allow` or the pytest marker. One function splits findings into kept and suppressed, for
every front end (check, render, the pytest plugin, JSON, SARIF)."""

from __future__ import annotations

import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.findings import Finding, FindingKind
from ..paths import source_lines
from ..text import clean
from .errors import ConfigError

__all__ = ["Suppressed", "check_comments", "comment_kinds", "comments", "split", "suppressed_text"]

# `# gradviz: ignore`, `# gradviz: ignore[cut_edge]`, `#gradviz:ignore[cut_edge, dead_parameter]` (like mypy's and
# ruff's comments: anywhere in a line's trailing comment). Matched against comment tokens only, never a line's
# raw text: the same words inside a string or docstring accept nothing.
_COMMENT = re.compile(r"#.*?\bgradviz:\s*ignore\b(?:\[(?P<kinds>[^\]]*)\])?", re.IGNORECASE)
EVERY_KIND = frozenset(kind.value for kind in FindingKind)
_KINDS = [kind.value for kind in FindingKind]  # in the order messages list them


@dataclass(frozen=True)
class Suppressed:
    """A finding that was found and accepted: why (`# gradviz: ignore[cut_edge]` at line 12, `--allow cut_edge`),
    and whether the reason sits in the source (SARIF's `inSource`) or outside it (`external`)."""

    finding: Finding
    reason: str
    in_source: bool

    def to_dict(self) -> dict[str, Any]:
        return {**self.finding.to_dict(), "suppressed_by": self.reason}


def comment_kinds(comment: str, *, where: str = "") -> frozenset[str] | None:
    """The kinds a comment's `# gradviz: ignore[...]` accepts (every kind for a bare `ignore`), None without one.
    ConfigError naming the valid kinds for a kind that is not one (`cut_edges`, `CUT_EDGE`) or an empty list:
    a typo must not silently accept nothing. `where`: how the message names the comment's place."""
    match = _COMMENT.search(comment)
    if match is None:
        return None
    listed = match.group("kinds")
    if listed is None:
        return EVERY_KIND
    kinds = [kind.strip() for kind in listed.split(",") if kind.strip()]
    shown = f"{where}: `{_written(match)}`" if where else f"`{_written(match)}`"
    if not kinds:
        raise ConfigError(f"{shown} names no finding kind; write `# gradviz: ignore` for every kind, or name them: "
                          f"{', '.join(_KINDS)}")
    for kind in kinds:
        if kind not in EVERY_KIND:
            raise ConfigError(f"{shown}: unknown finding kind {kind!r}; the kinds are {', '.join(_KINDS)}")
    return frozenset(kinds)


def comments(lines: Iterable[str]) -> dict[int, str]:
    """Line number (from 1) -> the comment on that line, as Python's tokenizer reads it: `#` inside a string or a
    docstring is no comment. A file the tokenizer stops on (edited since it ran, not Python at all) gives the
    comments before that point, so a finding after it stands rather than being accepted by a guess."""
    found: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(iter(lines).__next__):  # the end of `lines` is the end of the file
            if token.type == tokenize.COMMENT:
                found[token.start[0]] = token.string
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return found


def check_comments(path: str | Path) -> None:
    """ConfigError for the first `# gradviz: ignore[...]` comment in a source file naming a kind that is not one;
    nothing for a file that cannot be read (the command says so on its own) or holds none."""
    lines = source_lines(str(path))
    if lines:
        _check_all(comments(lines), str(path))


def _check_all(found: dict[int, str], file: str) -> None:
    for line, comment in found.items():
        comment_kinds(comment, where=f"{_shown(file)}:{line}")


def split(
    findings: Iterable[Finding],
    *,
    allow: Iterable[str] = (),
    allowed_by: str = "--allow",
) -> tuple[list[Finding], list[Suppressed]]:
    """(the findings that stand, the suppressed ones). `allow`: kinds accepted everywhere, said to come from
    `allowed_by`; a finding whose line or the line above has `# gradviz: ignore[its kind]` is accepted too.
    ConfigError when a file a finding is in has an ignore comment naming an unknown kind."""
    allowed = frozenset(allow)
    files: dict[str, dict[int, str] | None] = {}
    kept: list[Finding] = []
    suppressed: list[Suppressed] = []
    for finding in findings:
        comment = _comment_for(finding, files)
        if comment is not None:
            suppressed.append(Suppressed(finding, comment, True))
        elif finding.kind.value in allowed:
            suppressed.append(Suppressed(finding, f"{allowed_by} {finding.kind.value}", False))
        else:
            kept.append(finding)
    return kept, suppressed


def _comment_for(finding: Finding, files: dict[str, dict[int, str] | None]) -> str | None:
    if not finding.file or not finding.line:
        return None
    found = _file_comments(finding.file, files)
    if found is None:  # the file is gone: the line recorded with the finding, read on its own
        alone = comments([finding.code + "\n"]).get(1) if finding.code else None
        found = {finding.line: alone} if alone else {}
        _check_all(found, finding.file)
    for line in (finding.line, finding.line - 1):
        comment = found.get(line)
        kinds = comment_kinds(comment, where=f"{_shown(finding.file)}:{line}") if comment else None
        if kinds is not None and finding.kind.value in kinds:
            match = _COMMENT.search(comment or "")
            return f"`{_written(match) if match else 'gradviz: ignore'}` at line {line}"
    return None


def _file_comments(file: str, files: dict[str, dict[int, str] | None]) -> dict[int, str] | None:
    """The comments of a file, read once per split (None when its text is gone); every ignore comment in it checked."""
    if file not in files:
        lines = source_lines(file)
        files[file] = comments(lines) if lines else None
        if files[file] is not None:
            _check_all(files[file] or {}, file)
    return files[file]


def _written(match: re.Match[str]) -> str:
    return match.group().lstrip("#").strip()


def _shown(file: str) -> str:
    try:
        return clean(str(Path(file).absolute().relative_to(Path.cwd())))
    except ValueError:
        return clean(file)


def suppressed_text(count: int) -> str:
    """`2 suppressed` (empty for none): the tally's part for accepted findings."""
    return f"{count} suppressed" if count else ""
