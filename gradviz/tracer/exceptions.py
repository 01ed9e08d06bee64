"""The traced program's exception turned into data: type, message, exit status, and the traceback as Python
prints it without gradviz's frames. Nothing here keeps the live exception."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from types import TracebackType

from ..model import ExceptionRecord, Location
from ..text import clean, safe_str, type_name
from . import source

_GRADVIZ_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def exit_code(exc: BaseException | None) -> int:
    """The status `python script.py` ends with when `exc` escapes it."""
    if exc is None:
        return 0
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is None:
            return 0
        return code if isinstance(code, int) else 1
    if isinstance(exc, KeyboardInterrupt):
        return 130
    return 1


def message(exc: BaseException) -> str:
    """str(exc) as Python shows it (`<exception str() failed>` when `__str__` raises); sys.exit's code."""
    if isinstance(exc, SystemExit):
        code = exc.code
        return "0" if code is None else safe_str(code)
    return safe_str(exc)


def printed(exc: BaseException) -> str:
    """What Python writes on stderr when `exc` ends a program: the traceback, or sys.exit's message."""
    if isinstance(exc, SystemExit):
        code = exc.code
        return "" if code is None or isinstance(code, int) else safe_str(code) + "\n"
    try:
        return clean(format_program_error(exc))
    except Exception:  # a broken exception object: still say what it was
        return f"{type_name(exc)}: {message(exc)}\n"


def record_exception(exc: BaseException, tb: TracebackType | None, *, prefer: str | None = None) -> ExceptionRecord:
    """The record of `exc`, located at the innermost frame of `prefer` (the script), else of any user file."""
    frames = list(traceback.walk_tb(tb))
    chosen = None
    for frame, lineno in reversed(frames):
        if prefer is not None and frame.f_code.co_filename == prefer:
            chosen = (frame.f_code.co_filename, lineno)
            break
    if chosen is None:
        for frame, lineno in reversed(frames):
            if source.is_user_file(frame.f_code.co_filename):
                chosen = (frame.f_code.co_filename, lineno)
                break
    del frames
    location: Location | None = source.make_location(*chosen) if chosen else None
    module = getattr(type(exc), "__module__", None)
    return ExceptionRecord(
        type=type_name(exc),
        message=message(exc),
        location=location,
        module=module if isinstance(module, str) else None,
        exit_code=exit_code(exc),
        traceback=printed(exc),
    )


def script_frames(frames: Sequence[tuple[str, str]]) -> list[bool]:
    """Which frames (filename, function name) of a traced program's traceback Python alone would show:
    not gradviz's own, not runpy's, and not torch's detour through the tracer's TorchFunctionMode."""
    keep = [not _added_by_gradviz(filename) for filename, _ in frames]
    for i, (filename, name) in enumerate(frames):
        # torch calls handle_torch_function, which enters our mode, which calls the same torch function
        # again: Python alone shows only that second call
        if (name == "handle_torch_function" and os.path.basename(filename) == "overrides.py"
                and i + 1 < len(frames) and _added_by_gradviz(frames[i + 1][0])):
            keep[i] = False
            if i > 0 and keep[i - 1] and f"{os.sep}torch{os.sep}" in frames[i - 1][0]:
                keep[i - 1] = False
    return keep


def _added_by_gradviz(filename: str) -> bool:
    return filename.startswith(_GRADVIZ_DIR) or filename == "<frozen runpy>" or os.path.basename(filename) == "runpy.py"


def format_program_error(error: BaseException) -> str:
    """The program's traceback as Python prints it, without the frames gradviz added (its own, runpy's, and
    torch's detour through the tracer's TorchFunctionMode)."""
    te = traceback.TracebackException(type(error), error, error.__traceback__)
    seen: set[int] = set()
    stack = [te]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        frames = list(current.stack)
        keep = script_frames([(f.filename, f.name) for f in frames])
        current.stack = traceback.StackSummary.from_list([f for f, kept in zip(frames, keep) if kept])
        if sys.version_info < (3, 11) and getattr(current, "_str", None) == f"<unprintable {current.exc_type.__name__} object>":
            # (3.10's traceback module words it apart from the interpreter; a private field, set as it reads it)
            current._str = "<exception str() failed>"  # type: ignore[attr-defined,unused-ignore]
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return "".join(te.format())
