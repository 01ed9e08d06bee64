"""Paths as CI tools want them: relative to the repository's root (the git root above the current folder, else the
current folder), with undecodable file names kept exact in URIs and readable in text; and the lines of the source
files findings point at, read only where reading cannot block."""

from __future__ import annotations

import linecache
import os
import stat
from pathlib import Path
from urllib.parse import quote

__all__ = ["source_root", "relative", "uri_of", "source_lines"]

#: The largest source file read to quote a line or find a `# gradviz: ignore` comment.
SOURCE_LIMIT = 16 * 2**20


def source_root(start: Path | None = None) -> Path:
    """The git work tree holding `start` (default: the current folder), else `start` itself: where code scanning
    and pull-request annotations resolve a relative path."""
    here = (start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():  # a folder, or a file in a worktree or submodule
            return folder
    return here


def relative(file: str, *, root: Path | None = None) -> str:
    """`file` relative to the root (POSIX separators) when it lies inside it, else absolute as given."""
    root = root or source_root()
    path = Path(file)
    if not path.is_absolute():
        path = Path.cwd() / path
    try:
        return Path(os.path.normpath(path)).relative_to(root).as_posix()
    except ValueError:
        return str(path)


def uri_of(file: str, *, root: Path | None = None) -> tuple[str, bool]:
    """(a URI reference for `file`, whether it is relative to the root). An undecodable name's bytes are
    percent-encoded as they are on disk (`bug%FE.py`), so the URI still names that file."""
    root = root or source_root()
    shown = relative(file, root=root)
    encoded = quote(os.fsencode(shown), safe="/")
    if Path(shown).is_absolute():
        return "file://" + encoded, False
    return encoded, True


def root_uri(root: Path | None = None) -> str:
    """The root as a `file:` URI ending in `/` (SARIF's `%SRCROOT%`)."""
    return "file://" + quote(os.fsencode(str(root or source_root())), safe="/") + "/"


def source_lines(file: str) -> list[str]:
    """The lines of a source file a finding points at (to quote a line, to read its comments); [] when it is not a
    regular file of at most SOURCE_LIMIT bytes. A trace names its files as data: a FIFO would block the read and
    `/dev/zero` never end it. Lines Python already holds (a notebook cell, a file read before) are used as they are."""
    cached = linecache.cache.get(file)
    if cached is not None and len(cached) > 1:
        return list(cached[2])
    try:
        info = os.stat(file)
    except (OSError, ValueError):
        return []
    if not stat.S_ISREG(info.st_mode) or info.st_size > SOURCE_LIMIT:
        return []
    return linecache.getlines(file)
