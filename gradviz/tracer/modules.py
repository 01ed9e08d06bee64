"""Which nn.Modules are running, read off the Python stack (the recorder's module paths, without module hooks)."""

from __future__ import annotations

import dis
import sys
import types

import torch


def _forward_call_offsets() -> dict[types.CodeType, int]:
    """nn.Module's call machinery: each code object that calls a module's forward (`_call_impl`, and the closure it
    uses when hooks are registered), with the offset of its last instruction calling `forward_call`."""
    call_impl = torch.nn.Module._call_impl.__code__
    codes = [call_impl, *(c for c in call_impl.co_consts if isinstance(c, types.CodeType))]
    offsets: dict[types.CodeType, int] = {}
    for code in codes:
        instructions = list(dis.get_instructions(code))
        for i, instruction in enumerate(instructions):
            if instruction.opname in ("LOAD_FAST", "LOAD_DEREF") and instruction.argval == "forward_call":
                call = next((later for later in instructions[i + 1 :] if later.opname.startswith("CALL")), None)
                if call is not None:
                    offsets[code] = max(offsets.get(code, -1), call.offset)
    return offsets


_FORWARD_CALLS = _forward_call_offsets()
_CALL_IMPL = torch.nn.Module._call_impl.__code__
_WRAPPED_CALL_IMPL = getattr(torch.nn.Module.__call__, "__code__", None)  # Module.__call__, which calls _call_impl
_CALL_IMPL_UNTIL = _FORWARD_CALLS.get(_CALL_IMPL, sys.maxsize)  # (a torch whose call we cannot read: all of it)
_INNER = next((code for code in _FORWARD_CALLS if code is not _CALL_IMPL), None)
_INNER_UNTIL = _FORWARD_CALLS.get(_INNER, -1) if _INNER is not None else -1


def module_frames(
    frame: types.FrameType | None, outside: tuple[int, types.CodeType] | None = None
) -> list[types.FrameType]:
    """The frames of nn.Module's call machinery, at `frame` and outside it, innermost first, of the modules running
    there (`module_of` reads which module each is); up to the frame `outside` identifies (id and code), where
    tracing began, if it is on the way: a module running there already is not one the tracer saw start, and the
    frames outside it need no look.

    A module is running from its forward pre-hooks to the return of its forward: its `_call_impl` frame (or the
    closure `_call_impl` runs when hooks are registered) is on the stack and has not gone past calling `forward`.
    Its forward hooks, which run after, are outside it, as they are for a global forward hook registered first.
    """
    frames = []
    stop_id, stop_code = outside if outside is not None else (0, None)
    call_impl, inner = _CALL_IMPL, _INNER  # (locals: this loop runs over every frame of the stack)
    while frame is not None:
        code = frame.f_code
        if code is call_impl:
            if frame.f_lasti <= _CALL_IMPL_UNTIL:
                frames.append(frame)
        elif code is inner:
            if frame.f_lasti <= _INNER_UNTIL:
                frames.append(frame)
        elif code is stop_code and id(frame) == stop_id:
            break
        frame = frame.f_back
    return frames


def module_of(frame: types.FrameType) -> torch.nn.Module | None:
    """The module a frame of `module_frames` is calling: its `self`, read where that is cheapest. Reading a frame's
    variables is the costly part, and `Module.__call__`'s frame, just outside, has three (`_call_impl`'s has
    fourteen, half of them closure cells: about 6x the time). The snapshot of variables this leaves on the frame
    holds what the call holds anyway (`self`, `args`, `kwargs`) and goes with the frame."""
    outer = frame.f_back
    if frame.f_code is _INNER and outer is not None:
        outer = outer.f_back
    if outer is not None and outer.f_code is _WRAPPED_CALL_IMPL:
        frame = outer
    module = frame.f_locals.get("self")
    return module if isinstance(module, torch.nn.Module) else None
