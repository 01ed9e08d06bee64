"""Torch calls made from a stand-in for the calling frame: warnings and TorchScript source ranges point where untraced.

Inside the recorder's `__torch_function__` the innermost Python frame is the recorder's own. A warning PyTorch
raises from C++ is attributed to the innermost frame (file, line, module, `__warningregistry__`), and
`torch.jit.trace` takes its source ranges from it, so both would point into gradviz. The recorder therefore
calls the torch function through a one-line function whose code object carries the caller's file name, line and
function name and whose globals are the caller's: to `warnings` (its "once per place" registry included) and to
the TorchScript tracer it is the program's own line, exactly as without tracing.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import torch


# the def and the call on one line: moved to the caller's line, the call is there
def _template(func: Callable[..., Any], args: Any, kwargs: Any) -> Any: return func(*args, **kwargs)  # noqa: E704


_TEMPLATE = _template.__code__
_OVERRIDES = torch.overrides.__file__
# (id(caller's code), line) -> (that code object, which keeps the id from being reused; the stand-in function)
_stand_ins: dict[tuple[int, int], tuple[types.CodeType, Callable[..., Any]]] = {}


def caller(depth: int = 2, func: Any = None) -> types.FrameType | None:
    """The frame that made the torch call the recorder is handling (`depth` 2: the caller of this function's caller).

    A torch function written in Python (`F.softmax`) reaches the mode from its own first lines, through
    `handle_torch_function`: the call the program made is the one to that function, from the frame before both.
    """
    try:
        frame: types.FrameType | None = sys._getframe(depth)
    except ValueError:  # called with no Python frame above (from C): nothing to stand in for
        return None
    if frame is not None and frame.f_code.co_filename == _OVERRIDES:
        while frame is not None and frame.f_code.co_filename == _OVERRIDES:
            frame = frame.f_back
        if frame is not None and frame.f_code is getattr(func, "__code__", None):
            frame = frame.f_back
    return frame


def stand_in(frame: types.FrameType) -> Callable[..., Any]:
    """A function that calls `func(*args, **kwargs)` at `frame`'s file and line, with `frame`'s globals."""
    code = frame.f_code
    line = frame.f_lineno
    key = (id(code), line)
    entry = _stand_ins.get(key)
    if entry is not None and entry[0] is code:
        return entry[1]
    if len(_stand_ins) > 16384:  # lines of long-gone code (exec'd cells): start afresh
        _stand_ins.clear()
    shifted = _TEMPLATE.replace(
        co_filename=code.co_filename,
        co_name=code.co_name,
        co_qualname=getattr(code, "co_qualname", code.co_name),
        co_firstlineno=line,
    )
    function = types.FunctionType(shifted, frame.f_globals, code.co_name)
    _stand_ins[key] = (code, function)
    return function


def call(frame: types.FrameType | None, func: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """`func(*args, **kwargs)`, made from a stand-in for `frame` (directly when there is none)."""
    if frame is None:
        return func(*args, **kwargs)
    try:
        return stand_in(frame)(func, args, kwargs)
    except BaseException as exc:
        drop_stand_in(exc)
        raise


def forget() -> None:
    """Drop every stand-in: each holds its caller's globals (a script's namespace), which must not outlive tracing."""
    _stand_ins.clear()


def is_stand_in(code: types.CodeType) -> bool:
    return code.co_code == _TEMPLATE.co_code and code.co_names == _TEMPLATE.co_names and code.co_varnames == _TEMPLATE.co_varnames


def drop_stand_in(exc: BaseException) -> None:
    """Remove the stand-in's entry from the traceback of an error raised through it (it is not the program's)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        if is_stand_in(tb.tb_next.tb_frame.f_code):
            tb.tb_next = tb.tb_next.tb_next
            return
        tb = tb.tb_next
