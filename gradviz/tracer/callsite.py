"""Torch calls made from a stand-in for the calling frame: warnings and TorchScript source ranges point where untraced.

Inside the recorder's `__torch_function__` the innermost Python frame is the recorder's own. A warning PyTorch
raises from C++ is attributed to the innermost frame (file, line, module, `__warningregistry__`), and
`torch.jit.trace` takes its source ranges from it, so both would point into gradviz. The recorder therefore
calls the torch function through a one-line function whose code object carries the caller's file name, line and
function name and whose globals are the caller's: to `warnings` (its "once per place" registry included) and to
the TorchScript tracer it is the program's own line, exactly as without tracing.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import os
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from .source import is_user_file


# the def and the call on one line: moved to the caller's line, the call is there
def _template(func: Callable[..., Any], args: Any, kwargs: Any) -> Any: return func(*args, **kwargs)  # noqa: E704


_TEMPLATE = _template.__code__
_OVERRIDES = torch.overrides.__file__
_OPS_FILE = torch._ops.__file__
_COMPILED_CODE = "<eval_with_key>"  # the file name of code torch.fx generates (what torch.compile runs)
_TORCH = os.path.dirname(torch.__file__)
# torch.fx's Interpreter runs a graph node by node: torch 2.8's aot_eager runs its compiled graphs with it, not as
# generated code. Run by the compiler (dynamo's backends, AOTAutograd) it is compiled code; run by the program, not
_INTERPRETER = os.path.join(_TORCH, "fx", "interpreter.py")
_COMPILERS = (os.path.join(_TORCH, "_dynamo", ""), os.path.join(_TORCH, "_functorch", ""))

# A call site: (id(code), instruction offset) -> (the code object, which keeps the id from being reused; its line;
# the stand-in; whether the site is in code torch.compile made (None: a torch op's __call__, ask its caller); whether
# the code is the user's). Read per call from the frame's raw facts: `f_lineno` decodes the code's line table from
# its start at every read (10 us in a 400-line function), the offset is a field.
Site = tuple[types.CodeType, int, "Callable[..., Any] | None", "bool | None", bool]  # stand-in None: not tracing
LiveSite = tuple[types.CodeType, int, "Callable[..., Any]", "bool | None", bool]  # as site() returns it
_sites: dict[tuple[int, int], Site] = {}
# (id(code), line) -> (that code object; the template moved to its file and line): outlives tracing (no globals)
_moved: dict[tuple[int, int], tuple[types.CodeType, types.CodeType]] = {}


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


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
# the program's replacement of a torch function written in Python -> that function (itself for torch's own)
_originals: dict[Callable[..., Any], Callable[..., Any]] = {}


if sys.version_info[:2] == (3, 11):
    import dis

    _PRECALL, _CALL = dis.opmap["PRECALL"], dis.opmap["CALL"]
    _CALL_AFTER_PRECALL = 4  # (PRECALL and its one inline cache entry: two code units)

    def twin_offset(code: types.CodeType, offset: int) -> int | None:
        """Python 3.11: the other offset one call site is reported at. A call of a C function (`setattr`, a tensor's
        C method) runs from CALL until CPython specializes the code, then from PRECALL, which makes the call itself
        and skips CALL: `f_lasti` moves back 4 bytes, after the window saw the site at CALL (a function called fewer
        than 8 times in the window is specialized after it). None: the site has one offset."""
        raw = code.co_code  # (the instructions unspecialized: PRECALL and CALL as compiled)
        if offset + _CALL_AFTER_PRECALL < len(raw) and raw[offset] == _PRECALL:
            return offset + _CALL_AFTER_PRECALL
        if offset >= _CALL_AFTER_PRECALL and raw[offset] == _CALL and raw[offset - _CALL_AFTER_PRECALL] == _PRECALL:
            return offset - _CALL_AFTER_PRECALL
        return None

else:

    def twin_offset(code: types.CodeType, offset: int) -> int | None:
        """Python 3.10, 3.12+: a call site is reported at one offset (3.12's specialized CALLs keep it)."""
        return None


def unpatched(func: Callable[..., Any]) -> Callable[..., Any]:
    """The torch function whose body handed `func` to the mode: itself, unless the program replaced it.

    A torch function written in Python (`Tensor.backward`, `F.softmax`) hands the mode the function its name is bound
    to when it runs: after `torch.Tensor.backward = counted` (a wrapper calling the original) that is the program's
    `counted`, already running. Calling it again would run the program's code twice; the call to make is the
    original's body, which the mode's handler runs without the mode, as Python runs it without gradviz."""
    original = _originals.get(func)
    if original is not None:
        return original
    original = func
    code = getattr(func, "__code__", None)
    frame: types.FrameType | None = sys._getframe(2)  # the caller of the mode's handler
    through = frame is not None and frame.f_code.co_filename == _OVERRIDES  # handed over by handle_torch_function
    if code is not None and not code.co_filename.startswith(_TORCH_DIR) and through:
        while frame is not None and frame.f_code.co_filename == _OVERRIDES:
            frame = frame.f_back
        body = frame.f_code if frame is not None else None
        if body is not None and body is not code and body.co_filename.startswith(_TORCH_DIR):
            original = _function_of(body, func) or func
    del frame
    with contextlib.suppress(TypeError):  # (an unhashable callable: looked at each time)
        _originals[func] = original
    return original


def torch_own(func: Any, module: str, qualname: str) -> Any:
    """`func` (torch's `module.qualname`) as torch defines it, where the program bound the name to a wrapper of its own
    before the tracer was imported (by the first `gradviz.trace()`): the function of that name whose code is torch's."""
    code = getattr(func, "__code__", None)
    if code is None or code.co_filename.startswith(_TORCH_DIR):
        return func
    for candidate in gc.get_objects():
        if (
            isinstance(candidate, types.FunctionType)
            and candidate.__code__.co_filename.startswith(_TORCH_DIR)
            and (candidate.__module__, candidate.__qualname__) == (module, qualname)
        ):
            return candidate
    return func


def _function_of(code: types.CodeType, replacement: Any) -> Callable[..., Any] | None:
    """The function running `code`: among what the wrapper refers to, nearest first (`__wrapped__`, its closure, a
    wrapper it wraps, its defaults, an object or dict holding the original, its module's globals: `orig =
    torch.Tensor.backward`), else wherever it is referred to (once per replaced function).

    Followed through gc.get_referents rather than found by gc.get_referrers alone: the objects alive when tracing began
    are frozen (gcstate.py), and get_referrers does not look among frozen objects."""
    queue: collections.deque[Any] = collections.deque([replacement])
    visited = {id(replacement)}
    while queue and len(visited) < _SEARCH_LIMIT:
        for candidate in gc.get_referents(queue.popleft()):
            if id(candidate) in visited or isinstance(candidate, _NOT_SEARCHED):
                continue
            visited.add(id(candidate))
            if isinstance(candidate, types.FunctionType) and candidate.__code__ is code:
                return candidate
            queue.append(candidate)
    for referrer in gc.get_referrers(code):
        if isinstance(referrer, types.FunctionType) and referrer.__code__ is code:
            return referrer
    return None


# how many objects `_function_of` looks at, nearest the wrapper first; modules and classes are not entered (torch's
# whole namespace lies behind them), nor code objects and text
_SEARCH_LIMIT = 5_000
_NOT_SEARCHED = (types.ModuleType, type, types.CodeType, str, bytes, int, float)


def site(frame: types.FrameType) -> LiveSite:
    """What the recorder needs of the call site `frame` is at, looked up once per site while tracing."""
    code = frame.f_code
    key = (id(code), frame.f_lasti)
    entry = _sites.get(key)
    if entry is not None and entry[0] is code:
        if entry[2] is not None:
            return entry  # type: ignore[return-value]  # (its stand-in is there)
        # known from an earlier trace: only its stand-in was let go
        live: LiveSite = (code, entry[1], _stand_in(frame, code, entry[1]), entry[3], entry[4])
        _sites[key] = live
        return live
    if len(_sites) > 65536:  # sites of long-gone code (exec'd cells): start afresh
        _sites.clear()
    line = frame.f_lineno
    filename = code.co_filename
    compiled = None if filename in (_OPS_FILE, _INTERPRETER) else filename.startswith(_COMPILED_CODE)
    live = _sites[key] = (code, line, _stand_in(frame, code, line), compiled, is_user_file(filename))
    return live


def in_compiled_code(frame: types.FrameType, entry: Site) -> bool:
    """Whether the call comes from code torch.fx generated or from an Interpreter the compiler runs (directly, or
    through an OpOverload's __call__)."""
    compiled = entry[3]
    if compiled is not None:
        return compiled
    if frame.f_code.co_filename == _INTERPRETER:
        return _run_by_compiler(frame)
    back = frame.f_back
    if back is None:
        return False
    filename = back.f_code.co_filename
    return filename.startswith(_COMPILED_CODE) or (filename == _INTERPRETER and _run_by_compiler(back))


def _run_by_compiler(frame: types.FrameType | None) -> bool:
    """Whether the torch.fx Interpreter running in `frame` was started by torch.compile's machinery."""
    for _ in range(16):  # (call_function, run_node, run, boxed_run: the Interpreter's own frames, then its caller)
        if frame is None or frame.f_code.co_filename != _INTERPRETER:
            break
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(_COMPILERS)


def _stand_in(frame: types.FrameType, code: types.CodeType, line: int) -> Callable[..., Any]:
    key = (id(code), line)
    moved = _moved.get(key)
    if moved is None or moved[0] is not code:
        if len(_moved) > 16384:  # lines of long-gone code (exec'd cells): start afresh
            _moved.clear()
        shifted = _TEMPLATE.replace(co_filename=code.co_filename, co_name=code.co_name, co_firstlineno=line)
        if sys.version_info >= (3, 11):  # (co_qualname exists from Python 3.11; `replace` refuses it before)
            shifted = shifted.replace(co_qualname=code.co_qualname)
        moved = _moved[key] = (code, shifted)
    return types.FunctionType(moved[1], frame.f_globals, code.co_name)


def call(frame: types.FrameType | None, func: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """`func(*args, **kwargs)`, made from a stand-in for `frame` (directly when there is none)."""
    if frame is None:
        return func(*args, **kwargs)
    try:
        return site(frame)[2](func, args, kwargs)
    except BaseException as exc:
        drop_stand_in(exc)
        raise


def forget() -> None:
    """Drop every stand-in: each holds its caller's globals (a script's namespace), which must not outlive tracing.
    What the sites say of their code (line, kind) stays for the next trace."""
    for func, original in list(_originals.items()):  # the program's wrappers (they hold its globals); torch's stay
        if original is not func:
            del _originals[func]
    for key, entry in list(_sites.items()):  # (a thread of the program may be adding sites meanwhile)
        if entry[2] is not None:
            _sites[key] = (entry[0], entry[1], None, entry[3], entry[4])


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
