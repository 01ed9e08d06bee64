"""The sentinel: after the step window the recorder stays on, passing calls through, until a step runs new code.

Per torch call it asks one thing: has this call site (the calling frame's code object and instruction offset) been
seen? Sites seen while recording are passed straight through, at about the cost of a pass-through
TorchFunctionMode. A site never seen, a parameter's `requires_grad` flipped, a new optimizer or parameter group, a
model's training flag changed, a backward from a root never seen: recording starts again at that call (that call
included) and runs to the end of the step it is in and through the next step, whole, as a step inside the window is
recorded; then the sentinel takes over again. What is new is known only when it runs, mid-step: what came before it
in that step ran untraced, so the next step is recorded from its start too (its forward, backward and update).

On Python 3.12 and later the mode is off torch's stack after the window and `sys.monitoring` puts it back where the
program runs a line the window never ran, and for each backward() (monitor.py): the same questions, asked only there.
"""

from __future__ import annotations

import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ..model import RearmedStep
from . import callsite, chains, monitor, source
from .lifetime import watch_stored
from .state import RecorderState
from .tensors import _version
from .window import _CLOSED, _on_top

_quiet = torch._C.DisableTorchFunction
_is_compiling = torch.compiler.is_compiling
_jit_tracing = torch._C._get_tracing_state
_OVERRIDES = torch.overrides.__file__
_REQUIRES_GRAD = (torch.Tensor.requires_grad_, torch.Tensor.requires_grad.__set__)  # type: ignore[attr-defined]  # (a getset descriptor, typed as a bool)
_BACKWARDS = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad)
#: Re-armed steps at most: a program that makes new code objects every step (code generated at run time) would
#: otherwise be traced whole; after this many, new sites are only noted (a trace's size stays bounded).
MAX_REARMED = 50
#: Steps traced per re-arming: the rest of the step the new thing happened in, and the next one whole.
_STEPS_PER_REARM = 2


class SentinelRecording(RecorderState):
    """The sentinel half of the Recorder (mixed into it): what it has seen, and re-arming the window for a step."""

    _seen_sites: set[tuple[int, int]]  # (id(code), instruction offset) of every call site seen while recording
    _seen_flips: set[tuple[int, int]]  # the sites of those calls setting requires_grad (never passed at once)
    _seen_codes: dict[int, types.CodeType]  # their code objects, kept so that an id is never reused for other code
    _seen_roots: set[tuple[int, int, str]]  # (call site, root's node type) of every backward seen
    _seen_backwards: set[Any]  # the backward functions the program called (Tensor.backward, autograd's backward, grad)
    _module_flags: list[tuple[Any, bool]]  # (weakref of a module of a named model, its training flag)
    _queries: frozenset[Any]  # the recorder's reads of metadata (recorder._QUERIES)
    _survivors: bool  # tensors alive where recording stopped are still watched, until the next step ends
    _off_for: int | None  # id of the optimizer whose step runs with the mode off the stack (see _sentinel_step_pre)
    _sentinel_hook: Any  # the handle of that optimizer pre-hook
    _flag_hook: Any = None  # the handle of the global module forward pre-hook reading training flags (_module_call)
    _watch: monitor.Watch | None = None  # Python 3.12+: sys.monitoring's watch for new lines (monitor.py)
    # the Recorder's state and methods this half uses (recorder.py owns them)
    _step_pre: Callable[..., Any]
    _forget_tensor: Callable[[Any], None]
    _name_stack_variables: Callable[[], None]
    __enter__: Callable[[], Any]

    # ------------------------------------------------------------------ sys.monitoring (Python 3.12+: monitor.py)
    def _watch_start(self) -> None:
        """As recording starts: with a sentinel to come, lines run from now on are noted as seen (monitor.py)."""
        window = self._window
        if window is not None and window.sentinel and monitor.available():
            watch = monitor.Watch(self)
            if watch.start():  # (no free tool id: the mode stays on the stack after the window, as on 3.11)
                self._watch = watch

    def _watch_stop(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.stop()

    def _probe(self, code: Any = None) -> None:
        """The mode back on the stack for a line the window never ran, or a backward (from monitor.py's callbacks,
        where no torch function is being handled and no other mode is on the stack). An optimizer step that starts
        with it on takes it off (_sentinel_step_pre: on 3.12+ that hook is on only while the mode may be)."""
        self.__enter__()
        self._mode_on = True
        self._hook_steps()
        if self._watch is not None:  # (`code`: the backward whose start put it on, whose return takes it off)
            self._watch.returns_on(code)

    def _hook_steps(self) -> None:
        if self._sentinel_hook is None:
            from torch.optim.optimizer import register_optimizer_step_pre_hook

            self._sentinel_hook = register_optimizer_step_pre_hook(self._sentinel_step_pre)

    def _unprobe(self) -> None:
        """The mode off the stack again (monitor.py: where it is on top, no torch function being handled)."""
        self.__exit__(None, None, None)
        self._mode_on = False
        if self._watch is not None:
            self._watch.returns_off()

    # ------------------------------------------------------------------ what was seen
    def _see(self, frame: types.FrameType | None, func: Any = None) -> None:
        """Note the site `frame` is calling from as seen (called once per site while recording). A site setting
        `requires_grad` is noted apart: each of its calls is looked at, for a flip (a helper that froze layers
        at the start and unfreezes them at step 800, from one line)."""
        if frame is not None:
            code = frame.f_code
            seen = self._seen_flips if func in _REQUIRES_GRAD else self._seen_sites
            seen.add((id(code), frame.f_lasti))
            self._seen_codes[id(code)] = code

    def _see_root(self, frame: types.FrameType | None, roots: list[Any], func: Any) -> None:
        """Note a backward's call site and the kind of its root (the node type of the first root's grad_fn), and the
        backward function the program called (`func`: torch's own)."""
        self._seen_backwards.add(func)
        if frame is not None:
            self._see(frame)
            self._seen_roots.add((id(frame.f_code), frame.f_lasti, _root_kind(roots)))

    def _snapshot_flags(self) -> None:
        """The training flags of every model the recorder named, and the optimizers' parameter groups, as now."""
        flags: dict[int, tuple[Any, bool]] = {}
        for refs in self._held_models.values():
            for ref in refs:
                model = ref()
                if model is not None:
                    for module in model.modules():
                        flags[id(module)] = (weakref.ref(module), module.training)
                del model
        self._module_flags = list(flags.values())  # (a named model first, then its modules)
        for refs in self._held_models.values():
            for ref in refs:
                model = ref()
                if model is not None:
                    known = self._root_flags.get(id(model))
                    if known is None or known[0]() is not model:
                        self._root_flags[id(model)] = known = (weakref.ref(model), set())
                    known[1].add(model.training)
                del model

    def _flags_changed(self) -> bool:
        for ref, flag in self._module_flags:
            module = ref()
            if module is not None and module.training != flag:
                return True
        return False

    def _module_call(self, module: Any, args: Any) -> None:
        """A global forward pre-hook, on in sentinel mode (on 3.12+ only from a `train()` that left a named model in
        a flag never recorded to that model's next call: _trained): a named model called with a training flag it was
        never recorded with (`model.eval()` before the first validation pass) re-arms the window before its forward runs:
        the pass is recorded from its first module call, its nodes inside their modules, not from its first new
        call site (its loss, after a whole batch ran untraced)."""
        known = self._root_flags.get(id(module))
        if known is None or known[0]() is not module or threading.get_ident() != self._thread:
            return
        if module.training not in known[1] and self._sentinel and not _is_compiling():
            known[1].add(module.training)
            self._rearm("a model's training flag changed", None, sys._getframe(1))
        hook = self._flag_hook
        if self._watch is not None and hook is not None and not self._unknown_flags():  # (3.12+: see _trained)
            hook.remove()
            self._flag_hook = None

    def _trained(self, module: Any) -> None:
        """Python 3.12+ (monitor.py): `module.train(mode)` returned. A named model now in a training flag it was never
        recorded with gets the forward pre-hook that re-arms at its next call (_module_call); until then the hook is
        off, since a global module hook puts every module call on nn.Module's slow path."""
        if self._flag_hook is not None or not self._sentinel or threading.get_ident() != self._thread:
            return
        known = self._root_flags.get(id(module))
        if known is not None and known[0]() is module and module.training not in known[1]:
            self._flag_hook = torch.nn.modules.module.register_module_forward_pre_hook(self._module_call)

    def _unknown_flags(self) -> bool:
        """Whether a named model has a training flag now that it was never recorded with."""
        for ref, flags in self._root_flags.values():
            model = ref()
            if model is not None and model.training not in flags:
                return True
        return False

    def _in_eval_mode(self) -> bool:
        """Whether a module that was training when recording stopped is in eval mode now (a validation pass)."""
        for ref, flag in self._module_flags:
            module = ref()
            if module is not None and flag and not module.training:
                return True
        return False

    # ------------------------------------------------------------------ sentinel mode
    def _sentinel_miss(self, func: Any, args: Any, kwargs: Any, frame: types.FrameType) -> bool:
        """A call from a site not seen at once (`frame`: its immediate caller). True: pass it through; False: the
        window was re-armed at it, and the caller records it in full."""
        if _is_compiling() or _jit_tracing() is not None or threading.get_ident() != self._thread:
            return True  # (another thread's calls, where the recorder's mode is entered there too: its own to record)
        if func in self._queries:  # reads of metadata are never recorded: their sites are noted on first sight
            self._see(frame)
            return True
        immediate = frame
        if frame.f_code.co_filename == _OVERRIDES:
            # a torch function written in Python (F.relu, Tensor.backward) reaches the mode through torch's own
            # dispatch helper, one frame for all of them: the program's call site is further out (never cached)
            outer = callsite.caller(3, func)
            if outer is None:
                return True
            frame = outer
        code = frame.f_code
        key = (id(code), frame.f_lasti)
        seen = key in self._seen_sites or key in self._seen_flips
        if not seen:  # (3.11: the site seen before CPython specialized its call, at the other offset: the same site)
            twin = callsite.twin_offset(code, frame.f_lasti)
            for known in (self._seen_sites, self._seen_flips) if twin is not None else ():
                if (id(code), twin) in known:
                    known.add(key)
                    seen = True
        if func in _REQUIRES_GRAD:
            flag = args[1] if len(args) > 1 else (kwargs or {}).get("requires_grad", True)
            with _quiet():
                flips = isinstance(args[0], torch.Tensor) and bool(flag) != args[0].requires_grad
            if flips:
                return not self._rearm(
                    f"requires_grad turned {'on' if flag else 'off'}", "unfreezing" if flag else "freezing", frame
                )
        elif func in _BACKWARDS:
            return self._sentinel_backward(func, args, kwargs, frame, seen)
        if seen:
            return True
        if immediate is frame:
            self._see(frame, func)  # (a site under torch's dispatch helper is never cached: the helper is shared)
        return not self._rearm("new code", None, frame)

    def _sentinel_backward(self, func: Any, args: Any, kwargs: Any, frame: types.FrameType, seen: bool) -> bool:
        window = self._window
        assert window is not None  # (sentinel mode: a window closed)
        if window.first_optimizer is None:  # (with an optimizer, its step's end is where flags are read)
            if self._survivors:
                self._keep_only_parameters()
            if self._flags_changed():
                return not self._rearm("a model's training flag changed", "training flag", frame)
        roots_arg = args[0] if args else (kwargs or {}).get("tensors", (kwargs or {}).get("outputs"))
        roots = list(roots_arg) if isinstance(roots_arg, (list, tuple)) else [roots_arg]
        with _quiet():
            kind = _root_kind(roots)
        if (id(frame.f_code), frame.f_lasti, kind) not in self._seen_roots or not seen:
            return not self._rearm("a backward from a new root" if seen else "new code", None, frame)
        window.backwards_after += 1  # (a recorded one is counted as the window counts)
        return True

    def _known_backward(self, frame: types.FrameType) -> bool:
        """`Tensor.backward` is starting in `frame` (monitor.py, the mode off the stack): True when it is called from a
        site, on a root, the window saw, and an optimizer steps (the flags are read at its step's end): counted, as
        _sentinel_backward counts it. False: the mode goes on the stack and _sentinel_backward looks at it."""
        window = self._window
        assert window is not None  # (sentinel mode: a window closed)
        caller = frame.f_back
        if caller is None or window.first_optimizer is None:
            return False
        key = (id(caller.f_code), caller.f_lasti)
        if key not in self._seen_sites:
            return False
        root = frame.f_locals["self"]
        if type(root) is torch.Tensor:  # (no mode on the stack, no subclass: reading grad_fn reaches no handler)
            kind = type(root.grad_fn).__name__  # (as _root_kind names it)
        else:
            with _quiet():
                kind = type(root.grad_fn).__name__
        del root
        if (*key, kind) not in self._seen_roots:
            return False
        window.backwards_after += 1
        return True

    def _sentinel_step_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """An optimizer step in sentinel mode runs with the mode off torch's stack, put back by its post-hook: its
        per-parameter calls (most of a small model's calls) cost nothing then. The optimizer's code is the
        library's; a new optimizer or parameter group is seen by the post-hook (_sentinel_step)."""
        if (
            self._sentinel
            and self._off_for is None
            and threading.get_ident() == self._thread
            and not _is_compiling()
        ):
            if self._mode_on and _on_top(self):
                self._unprobe()
            elif self._mode_on or self._watch is None:
                return
            self._off_for = id(optimizer)  # (with sys.monitoring, off already: new lines in it are the library's too)

    def _sentinel_step(self, optimizer: Any, first: bool) -> None:
        """At the end of an optimizer step in sentinel mode: a new optimizer, parameter group or training flag?
        (Found at a step's end: the next step is recorded.) `first`: the window's first optimizer's step. Called at
        every step: what it asks of a step that changed nothing is kept to a few reads."""
        key = id(optimizer)
        if self._off_for == key:  # the mode back on the stack (see _sentinel_step_pre)
            self._off_for = None
            if self._watch is None:  # (with sys.monitoring it stays off until a new line or a backward: monitor.py)
                self.__enter__()
                self._mode_on = True
        hook = self._sentinel_hook
        if hook is not None and self._watch is not None and not self._mode_on and self._off_for is None:
            hook.remove()  # (3.12+: off the stack, the steps to come need no pre-hook until a probe: _probe)
            self._sentinel_hook = None
        if self._survivors and first:
            self._keep_only_parameters()
        groups = self._optimizer_groups.get(key)
        now = len(optimizer.param_groups)
        if groups != now:  # (None: an optimizer never seen)
            self._optimizer_groups[key] = now
            what = "a new optimizer" if groups is None else "a new parameter group"
            self._rearm(f"{what} ({type(optimizer).__name__})", what.removeprefix("a "), None, at_step_end=True)
        elif first:
            for ref, flag in self._module_flags:  # (_flags_changed, inline: one call less per step)
                module = ref()
                if module is not None and module.training != flag:
                    self._rearm("a model's training flag changed", "training flag", None, at_step_end=True)
                    return

    # ------------------------------------------------------------------ re-arming
    def _rearm(self, reason: str, kind: str | None, frame: types.FrameType | None, *, at_step_end: bool = False) -> bool:
        """Record again from here: the rest of this step and the next one. False when no more steps may be."""
        window = self._window
        assert window is not None  # (sentinel mode: a window closed)
        record = window.record
        if len(record.rearmed) >= MAX_REARMED:
            return False
        if not self._mode_on:  # (sys.monitoring: off the stack at an optimizer step's end, where a step re-arms)
            if torch._C._len_torch_function_stack():  # a mode of the program's own on top: ours cannot go above it
                return False
            self._probe()
        user = source.user_frame_from(frame) if frame is not None else None
        file, line = (user.f_code.co_filename, user.f_lineno) if user is not None else (None, None)
        if kind is None:
            if self._in_eval_mode():
                kind = "validation"
            elif not torch.is_grad_enabled():
                kind = "no_grad code"
            elif user is not None and user.f_code.co_name not in ("<module>", "<lambda>"):
                kind = f"{user.f_code.co_name}()"
            else:
                kind = "new code"
        del user, frame
        first = window.first_optimizer
        if first is not None:
            done = window.steps[first] + window.after
        else:
            done = window.backwards + window.backwards_after
        entry = RearmedStep(done, reason, kind, file, line, next(self._seq))
        record.rearmed.append(entry)
        self._sentinel = False
        self._paused -= _CLOSED
        self._rearm_left = _STEPS_PER_REARM - (1 if at_step_end else 0)
        self._first_sequence_nr = torch._C._autograd._get_sequence_nr()  # nodes made since: what they saved is unknown
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        self._handles.append(register_optimizer_step_pre_hook(self._step_pre))
        with _quiet():
            for live in list(self._live.values()):
                tensor = live()
                if tensor is not None:  # the parameters kept: written untraced meanwhile (the optimizer's updates)
                    live.version = _version(tensor)
                del tensor
        return True

    def _rearmed_step_done(self) -> None:
        """One step of a re-armed recording ended; after the last, the sentinel takes over again."""
        self._rearm_left -= 1
        if self._rearm_left <= 0:
            self._to_sentinel()

    def _to_sentinel(self) -> None:
        """Stop recording and watch: where the window closes, and where a re-armed recording ends."""
        window = self._window
        assert window is not None  # (sentinel mode: a window closed)
        if window.record.rearmed and window.record.rearmed[-1].end is None and self._rearm_left <= 0:
            window.record.rearmed[-1].end = next(self._seq)
        self._rearm_left = 0
        self._paused += _CLOSED
        if self._check is not None:
            self._check.close()  # --verify: the kept bytes go when recording stops (a re-armed step keeps its own)
        try:
            with _quiet():
                self._name_stack_variables()
        except Exception as exc:  # noqa: BLE001 - naming is a courtesy; never break the program for it
            self._internal(exc)
        # what recording left alive is watched one step more: the loop's variables, rebound by the next step, are freed
        # then (as after a traced step); what outlives it (a validation's `val_loss`, a list of losses) is let go of
        # at that step's end, alive at the end of what was recorded, as at a window's end without the sentinel
        self._survivors = True
        self._fresh_grads.clear()
        chains.sweep()
        callsite.forget()
        for handle in self._handles:
            handle.remove()
        self._handles = []
        with _quiet():
            self._snapshot_flags()
        if self._watch is None or self._mode_on:  # (3.12+, off the stack: from the next probe on)
            self._hook_steps()
        if self._flag_hook is None and self._root_flags and self._watch is None:  # (3.12+: see _trained)
            self._flag_hook = torch.nn.modules.module.register_module_forward_pre_hook(self._module_call)
        self._sentinel = True
        if self._watch is not None:  # Python 3.12+: off the stack now where it is safe, else at the next safe place
            self._watch.watch_backwards(self._seen_backwards)
            if self._mode_on and _on_top(self):
                self._unprobe()
            elif self._mode_on:  # (closed inside a torch function, a backward's: off as the backward returns)
                self._watch.returns_on(None)

    def _keep_only_parameters(self) -> None:
        """Let go of every tensor but the parameters, buffers and leaves that require grad: what a later re-armed
        step must know as the same tensors (their names, their optimizer). The rest are alive at the end of what
        was recorded, as at a window's end (a graph a validation pass leaves held stays held in the trace)."""
        window = self._window
        assert window is not None  # (sentinel mode: a window closed)
        self._survivors = False
        forget = self._forget_tensor
        going = [
            live for live in self._live.values()
            if live.record.parameter is None and live.record.buffer is None
            and not (live.record.is_leaf and live.record.requires_grad)
        ]
        record = window.record
        ends = [r.end for r in record.rearmed if r.end is not None]
        watch_stored(self, going, max([record.closed_at or 0, *ends]))
        for live in going:
            forget(live)


def _root_kind(roots: list[Any]) -> str:
    """The node type of the first root's grad_fn (`MseLossBackward0`); `NoneType` where no root has one."""
    fn = next((t.grad_fn for t in roots if isinstance(t, torch.Tensor) and t.grad_fn is not None), None)
    return type(fn).__name__
