"""Where in the user's source a call came from, and which variable names the user gave tensors."""

from __future__ import annotations

import ast
import contextlib
import functools
import linecache
import os
import sys
import sysconfig
from collections.abc import Iterator
from types import FrameType
from typing import Any

import torch

from ..model import Location

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_GRADVIZ_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _library_dirs() -> tuple[str, ...]:
    """Where installed code lives: torch, gradviz, the standard library and every site-packages (venvs included)."""
    dirs = {_TORCH_DIR, _GRADVIZ_DIR, os.path.dirname(os.__file__) + os.sep}
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(key):
            dirs.add(os.path.join(paths[key], ""))
    for path in sys.path:
        if path.endswith(("site-packages", "dist-packages")):
            dirs.add(os.path.join(path, ""))
    return tuple(sorted(dirs))


_LIB_PREFIXES = _library_dirs()


@functools.lru_cache(maxsize=4096)
def is_user_file(filename: str) -> bool:
    """True for files written by the user: not torch, not gradviz, not the standard library."""
    if filename.startswith("<frozen"):
        return False
    return not filename.startswith(_LIB_PREFIXES)


# id(code object) -> (the code object, runs user code), looked up for every recorded call. Keyed by identity: code
# objects compare equal across files (a vendored copy of a torch function is not torch). The entry holds the code
# object, so its id is not reused while it is here.
_user_code: dict[int, tuple[Any, bool]] = {}


# Frames that `user_frame` starts from instead of the caller's stack (innermost last): see `looking_from`
_starts: list[FrameType] = []


def user_frame(depth: int = 2) -> FrameType | None:
    """The innermost frame, `depth` levels above the caller or further out, that runs user code (from the frame
    `looking_from` gives, inside it)."""
    if _starts:
        return user_frame_from(_starts[-1])
    return user_frame_from(sys._getframe(depth))


@contextlib.contextmanager
def looking_from(frame: FrameType) -> Iterator[None]:
    """Inside: `user_frame` starts at `frame`. The recorder names a model when it first sees it running, from deep
    inside its forward; the names are the ones its caller holds it by, as if asked where the call began."""
    _starts.append(frame)
    try:
        yield
    finally:
        _starts.pop()


def user_frame_from(frame: FrameType | None) -> FrameType | None:
    """`frame` or the innermost frame outside it that runs user code."""
    known = _user_code
    while frame is not None:
        code = frame.f_code
        entry = known.get(id(code))
        if entry is None or entry[0] is not code:
            if len(known) > 65536:  # code objects of long-gone functions (exec'd cells): start afresh
                known.clear()
            entry = known[id(code)] = (code, is_user_file(code.co_filename))
        if entry[1]:
            return frame
        frame = frame.f_back
    return None


_CO_OPTIMIZED = 0x0001


def frame_variables(frame: FrameType) -> dict[str, Any]:
    """A copy of a frame's variables that leaves nothing behind on the frame.

    Before Python 3.13, reading `f_locals` of a function frame caches a snapshot dict on the frame that keeps
    every local alive until the function returns, even after `del x`: the tracer must not keep tensors alive.
    """
    variables = dict(frame.f_locals)
    if sys.version_info < (3, 13) and frame.f_code.co_flags & _CO_OPTIMIZED:
        # the snapshot is refreshed from the fast locals before anything reads it again
        frame.f_locals.clear()
    return variables


# The program's own file as read before it ran, while it runs: a script that deletes or rewrites itself still has
# its lines quoted as they ran (file -> lines)
_pinned: dict[str, list[str]] = {}


@contextlib.contextmanager
def pinned(filename: str) -> Iterator[None]:
    """Read `filename` now and quote its lines from this reading inside the block."""
    linecache.checkcache(filename)
    _pinned[filename] = list(linecache.getlines(filename))
    try:
        yield
    finally:
        _pinned.pop(filename, None)


def getlines(filename: str) -> list[str]:
    return _pinned.get(filename) or linecache.getlines(filename)


def make_location(filename: str, line: int) -> Location:
    lines = _pinned.get(filename)
    if lines is None:
        return Location(filename, line, linecache.getline(filename, line).rstrip("\n"))
    return Location(filename, line, lines[line - 1].rstrip("\n") if 1 <= line <= len(lines) else "")


@functools.lru_cache(maxsize=4096)
def _parse_line(code: str) -> ast.stmt | None:
    try:
        tree = ast.parse(code.strip())
    except SyntaxError:
        return None
    return tree.body[0] if len(tree.body) == 1 else None


@functools.lru_cache(maxsize=4096)  # asked again at every pass through the same line (`p.data` in a loop)
def assigned_name(code: str, attribute: str) -> str | None:
    """For `c = out.data` / `d = x.detach()`, the target name when `attribute` is the assigned value."""
    stmt = _parse_line(code)
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
        return None
    value = stmt.value
    if isinstance(value, ast.Call):
        value = value.func
    if isinstance(value, ast.Attribute) and value.attr == attribute:
        return stmt.targets[0].id
    return None


@functools.lru_cache(maxsize=4096)
def alias_expression(code: str, attribute: str) -> str | None:
    """The source text of the expression `attribute` is applied to: `out` in `c = out.data`."""
    stmt = _parse_line(code)
    if stmt is None:
        return None
    for node in ast.walk(stmt):
        if isinstance(node, ast.Attribute) and node.attr == attribute:
            try:
                text = ast.unparse(node.value)
            except (ValueError, AttributeError):
                return None
            # views write `{expression}.detach()`: `(x @ w).detach()` keeps its parentheses, not `x @ w.detach()`
            atom = isinstance(node.value, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant))
            return text if atom else f"({text})"
    return None
