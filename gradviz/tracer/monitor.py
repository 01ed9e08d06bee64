"""The sentinel's watch on Python 3.12 and later (PEP 669, `sys.monitoring`): the mode comes off torch's stack.

From the start of recording a LINE event is on for every line of code; each one, on its first run, is disabled at
that place (`sys.monitoring.DISABLE`), so the lines the window ran never report again and cost nothing. After the
window the recorder's mode is off the stack; a line of the program's own code (or of torch.nn's or torch.optim's)
that reports then is one the window never ran: the mode is put back on the stack just before it runs ("a probe"),
and the torch calls of that line (an
operator, an index, a property: `a @ b`, `z[i]`, `w.T`, which no CALL event reports) and of what follows reach the
sentinel as on Python 3.11 (sentinel.py): a call from a site never seen re-arms the window at that call. A
`backward()` is looked at each time (a root never seen, a model's training flag without an optimizer): PY_START of
`Tensor.backward` (and of `torch.autograd.backward` and `torch.autograd.grad` where the program was seen calling
them) puts the mode on the stack before their first line, so that their dispatch reaches it (a `loss.backward()`
from a site and root the window saw, where an optimizer steps, is only counted there). The mode comes off again
where no torch function is being handled: as an optimizer step starts (sentinel.py) and as one of those backward
functions returns to the program. Both are watched only while the mode is on: from the probe that put it on to
the first place it comes off, the backward functions report their returns and an optimizer pre-hook is registered. A step that runs only seen code pays for the backward
functions' starts (one callback for a `loss.backward()`) and the step counter's post-hook, nothing more. An
optimizer step (its code, and a closure it calls) is the library's: a new line or an unknown backward inside one
puts nothing on (found by walking the stack, only there, not by a hook on every step). PY_RETURN of
`nn.Module.train` (which `eval()` calls) tells the sentinel that a model may now run with a training flag never
recorded: only then is its global forward pre-hook on (a global module hook puts every module call on nn.Module's
slow path; on 3.11 it is on for the whole sentinel).

The tool id is one PEP 669 leaves unassigned, taken only where it is free (a coverage tool or a debugger keeps its
own): where none is, the mode stays on the stack as on 3.11. Everything is given back when tracing stops.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Collection
from typing import Any

import torch

from . import source

#: Tool ids PEP 669 assigns to no kind of tool (0: debugger, 1: coverage, 2: profiler, 5: optimizer), tried in turn
TOOL_IDS = (4, 3)
TOOL_NAME = "gradviz sentinel"
_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # gradviz's own files
#: torch's own code whose new lines are looked at too (a module's or zero_grad's new branch: a call from a library
#: site never seen re-arms on 3.11 too); not the compiler's (dynamo reads the mode stack as it compiles)
_LIBRARY = tuple(os.path.join(os.path.dirname(torch.__file__), part) + os.sep for part in ("nn", "optim"))
_depth = torch._C._len_torch_function_stack
_get_ident = threading.get_ident
_top = torch._C._get_function_stack_at
_TENSOR_BACKWARD = torch.Tensor.backward.__code__
#: the code every optimizer's `step` runs in (torch wraps each class's step to call the step hooks)
_STEP_WRAPPER = torch.optim.Optimizer.profile_hook_step(lambda *args: None).__code__
_MODULE_TRAIN = torch.nn.Module.train.__code__  # (`eval()` calls it too)


def available() -> bool:
    return sys.version_info >= (3, 12)


def _in_optimizer_step(frame: Any) -> bool:
    """Whether `frame` runs inside an optimizer's step (its code or a closure it calls): asked only where the watch
    would put the mode on (a new line, a backward not known), so the steps themselves need no hook (sentinel.py)."""
    while frame is not None:
        if frame.f_code is _STEP_WRAPPER:
            return True
        frame = frame.f_back
    return False


def _backward_codes(called: Collection[Any]) -> list[Any]:
    """`Tensor.backward`'s code, and that of `torch.autograd.backward` and `grad` where the program was seen calling
    them itself (`called`): a call of one the window never saw is on a line it never ran (or in a `backward()`), and
    reaches the mode through that line's probe."""
    functions = [torch.Tensor.backward, *(f for f in called if f is not torch.Tensor.backward)]
    return [code for code in (getattr(f, "__code__", None) for f in functions) if code is not None]


class Watch:
    """One recorder's hold on a `sys.monitoring` tool id: from `start` (recording begins) to `stop`."""

    def __init__(self, recorder: Any) -> None:
        self._recorder = recorder
        self.tool: int | None = None
        self._codes: list[Any] = []
        self._returning: list[Any] = []  # the backward codes whose returns are reported now (returns_on)
        self._user: dict[str, bool] = {}  # file name -> the program's own (not torch, gradviz, the standard library)

    def start(self) -> bool:
        """Take a free tool id and turn LINE events on. False (and nothing changed) where no id is free."""
        monitoring = sys.monitoring  # type: ignore[attr-defined,unused-ignore]  # (3.12+)
        for tool in TOOL_IDS:
            if monitoring.get_tool(tool) is not None:
                continue
            try:
                monitoring.use_tool_id(tool, TOOL_NAME)
            except ValueError:  # taken meanwhile (another thread)
                continue
            self.tool = tool
            events = monitoring.events
            monitoring.register_callback(tool, events.LINE, self._line)
            monitoring.register_callback(tool, events.PY_START, self._backward_starts)
            monitoring.register_callback(tool, events.PY_RETURN, self._returns)
            monitoring.set_events(tool, events.LINE)
            return True
        return False

    def watch_backwards(self, called: Collection[Any]) -> None:
        """After the window, and after each re-armed recording: every backward() call puts the mode on the stack for
        its dispatch (see the module), and each return of `nn.Module.train` is reported to the sentinel (its
        training-flag hook, sentinel.py). `called`: the backward functions the program was seen calling."""
        if self.tool is None:
            return
        monitoring = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        codes = _backward_codes(called)
        for code in codes:
            if code not in self._codes:
                returns = monitoring.events.PY_RETURN if code in self._returning else 0
                monitoring.set_local_events(self.tool, code, monitoring.events.PY_START | returns)
        self._codes = [*codes, _MODULE_TRAIN]
        monitoring.set_local_events(self.tool, _MODULE_TRAIN, monitoring.events.PY_RETURN)

    def returns_on(self, code: Any) -> None:
        """The mode went on the stack (sentinel.py: _probe): the return of the backward `code` that put it there
        (None: any backward, the mode put on for a new line) takes it off again (_returns). Off the stack, no backward
        reports its return: a step that runs only seen code pays for one callback per `loss.backward()`, not four."""
        if self.tool is None or not self._codes or self._returning:
            return
        monitoring = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        self._returning = [code] if code is not None else self._codes[:-1]
        for each in self._returning:
            monitoring.set_local_events(self.tool, each, monitoring.events.PY_START | monitoring.events.PY_RETURN)

    def returns_off(self) -> None:
        """The mode is off the stack again (sentinel.py: _unprobe)."""
        returning, self._returning = self._returning, []
        if self.tool is None:
            return
        monitoring = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        for code in returning:
            monitoring.set_local_events(self.tool, code, monitoring.events.PY_START)

    def stop(self) -> None:
        """Turn every event off, drop the callbacks and free the id (idempotent)."""
        tool = self.tool
        if tool is None:
            return
        self.tool = None
        monitoring = sys.monitoring  # type: ignore[attr-defined,unused-ignore]
        if monitoring.get_tool(tool) != TOOL_NAME:  # (freed by someone else meanwhile: not ours any more)
            return
        monitoring.set_events(tool, 0)
        for code in self._codes:
            monitoring.set_local_events(tool, code, 0)
        self._codes = []
        self._returning = []
        for event in (monitoring.events.LINE, monitoring.events.PY_START, monitoring.events.PY_RETURN):
            monitoring.register_callback(tool, event, None)
        monitoring.free_tool_id(tool)

    # ------------------------------------------------------------------ the callbacks (no event fires inside them)
    def _line(self, code: Any, line: int) -> Any:
        recorder = self._recorder
        if recorder._sentinel and not recorder._mode_on and recorder._off_for is None:
            filename = code.co_filename
            user = self._user.get(filename)
            if user is None:
                user = self._user[filename] = filename.startswith(_LIBRARY) or (
                    source.is_user_file(filename) and not filename.startswith(_OWN)
                )
            if user and _get_ident() == recorder._thread:
                if _depth():  # a mode of the program's own is on the stack: ours above it would be popped by its exit
                    return None  # (looked at again when the line runs next)
                if not _in_optimizer_step(sys._getframe(1)):
                    recorder._probe()
        # recording (the line is seen), the mode already on, library code, another thread (whose calls the sentinel
        # leaves alone), inside an optimizer step (the library's, or its closure's): never again here
        return sys.monitoring.DISABLE  # type: ignore[attr-defined,unused-ignore]

    def _backward_starts(self, code: Any, offset: int) -> None:
        recorder = self._recorder
        if (
            recorder._sentinel
            and not recorder._mode_on
            and recorder._off_for is None
            and _get_ident() == recorder._thread
            and not _depth()
        ):
            # a loss.backward() from a site and root the window saw, with an optimizer (whose step's end reads the
            # flags): counted, and nothing more is asked (the cost of a step stays the program's)
            if code is _TENSOR_BACKWARD:
                frame = sys._getframe(1)
                if recorder._known_backward(frame):
                    return
            else:
                try:
                    caller = sys._getframe(2)  # (only the caller's frame is made, not the callee's)
                except ValueError:  # (called with no Python caller)
                    caller = None
                if caller is not None and caller.f_code is _TENSOR_BACKWARD:
                    return  # (torch.autograd.backward called by a Tensor.backward looked at above, as on 3.11)
                del caller
                frame = sys._getframe(1)
            if _in_optimizer_step(frame):  # (a closure's backward: the library's step, as its new lines)
                return
            del frame
            recorder._probe(code)

    def _returns(self, code: Any, offset: int, value: Any) -> None:
        recorder = self._recorder
        if code is _MODULE_TRAIN:  # (it returns the module)
            recorder._trained(value)
            return
        if recorder._sentinel and recorder._mode_on and _get_ident() == recorder._thread:
            depth = _depth()
            if depth and _top(depth - 1) is recorder:  # (inside the mode's own handling it is off the stack)
                recorder._unprobe()

