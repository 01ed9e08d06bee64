"""What the tracer learns of nn.Modules (read off the stack) and optimizers (from their hooks): parameter names,
module paths, optimizer steps."""

from __future__ import annotations

import ast
import functools
import inspect
import sys
import textwrap
import threading
import types
import weakref
from typing import Any

import torch

from ..model import EventData, EventKind, VersionChange
from . import source
from .holders import holders_in as _holders_in, is_self as _is_self, shown_path as _shown_path
from .live_ids import LiveIds
from .modules import module_frames, module_of
from .state import RecorderState
from .tensors import GradKey, _grad_key, _same_grad, _version, local_parts as _local
from .window import _CLOSED

# Hooks run outside the recorder's own __torch_function__, where the mode is still active: every tensor attribute
# our bookkeeping reads would otherwise go through it and any other mode (about a microsecond each, and seen by them)
_quiet = torch._C.DisableTorchFunction
_is_compiling = torch.compiler.is_compiling
_jit_tracing = torch._C._get_tracing_state


class HookRecording(RecorderState):
    """The module- and optimizer-hook half of the Recorder (mixed into it; uses its tensor tracking and state)."""

    # the Recorder's state and methods this half uses (recorder.py owns them)
    _module_names_live: LiveIds[str]
    _named_roots: dict[int, bool]
    _named_roots_live: LiveIds[bool]
    _outside: tuple[int, types.CodeType] | None
    _step_records: dict[int, Any]
    _optimizer_ids: LiveIds[str]
    _optimizer_count: Any  # itertools.count
    _stepped_grads: dict[str, GradKey]

    def _name_module(self, module: torch.nn.Module) -> None:
        """Qualified names, from the outermost module called, for its submodules and parameters: the variable the
        program holds it in (`netD.main.0`, `netD`), so two models' `main` stay apart; for a submodule called on its
        own (`model.encoder(x)`, `for layer in model.layers`), the variable holding the model it belongs to
        (`model.encoder.weight`, `model.layers.0`); the class name for an outermost module no variable holds
        (`Discriminator`, then `main.0` for its submodules). A wrapper's own part (`_orig_mod`, DDP's `module`) is
        left out, so a compiled or wrapped model is named as the model itself."""
        variable, path = self._variable_holding(module)
        if variable is not None:
            variable = self._distinct_holder(variable, path, module)
        root = variable or type(module).__name__
        prefix = f"{path}." if path else ""
        for name, sub in module.named_modules():
            name = _shown_path(module, name)
            full = f"{prefix}{name}" if name else path
            self._module_names_live.put(sub, (f"{variable}.{full}" if variable and full else full) or root)
        for name, param in module.named_parameters():
            name = prefix + _shown_path(module, name)
            tid = self._tid(param)
            record = self.trace.tensors[tid]
            if record.parameter is None or len(name) > len(record.parameter):
                record.parameter = name
                record.origin = "parameter"
                if variable is not None:
                    self._param_roots[tid] = variable
        for name, buf in module.named_buffers():  # running_mean, num_batches_tracked: named like parameters
            live = self._live.get(id(buf))
            name = prefix + _shown_path(module, name)
            if live is not None and (live.record.buffer is None or len(name) > len(live.record.buffer)):
                live.record.buffer = name
                if variable is not None:
                    self._param_roots[live.tid] = variable

    def _distinct_holder(self, variable: str, path: str, module: torch.nn.Module) -> str:
        """`model`, then `model#2` for a second model the program holds under the same name (`model = torch.load(f)`
        after training, a fresh model per fold): two models never share a name. A model of another of the program's
        threads is named after its thread too (`model#B`): which thread names its model first depends on scheduling."""
        thread = self._thread_names.get(threading.get_ident()) if self._thread_names else None
        if thread is not None:
            variable = f"{variable}#{thread}"
        seen = self._held_models.setdefault((variable, path), [])
        for number, ref in enumerate(seen, start=1):
            if ref() is module:
                return variable if number == 1 else f"{variable}#{number}"
        seen.append(weakref.ref(module))
        return variable if len(seen) == 1 else f"{variable}#{len(seen)}"

    def _variable_holding(self, module: torch.nn.Module) -> tuple[str | None, str]:
        """The name the program knows `module` by, and the attribute path from it (`""` when the holder is `module`
        itself), looked for in the program's frames, the outermost first, as a window's end names parameters: a model
        holding it as a submodule first, the biggest model of a frame first (`model.layers.0` for a loop's `layer`,
        `model.encoder` for `enc = model.encoder`); then a holder of `module` itself, first bound first (`model` in
        main() over a helper's parameter `net`; `G`, `models["G"]`, `trainer.model`); a method's `self` (`self.net`)
        only when nothing else holds it."""
        frame = source.user_frame(3)
        if frame is None:
            return None, ""
        try:
            frames = []
            while frame is not None:
                if source.is_user_file(frame.f_code.co_filename):
                    frames.append(frame)
                frame = frame.f_back
            holders: list[list[tuple[str, str]]] = []  # per namespace, outermost frame first
            seen: set[int] = set()
            for outer in reversed(frames):
                if id(outer.f_globals) not in seen:  # a file's functions share its globals: looked at once
                    seen.add(id(outer.f_globals))
                    holders.append(_holders_in(outer.f_globals, module))
                # a function's own variables (a module's top level has none but its globals)
                if outer.f_code.co_flags & inspect.CO_OPTIMIZED or outer.f_locals is not outer.f_globals:
                    holders.append(_holders_in(source.frame_variables(outer), module))
            for found in holders:
                containing = [h for h in found if h[1] and not _is_self(h[0])]
                if containing:
                    return max(containing, key=lambda h: h[1].count(".") + 1)  # the first of the biggest models
            fallback: tuple[str | None, str] = (None, "")
            for found in holders:
                for holder in found:
                    if not _is_self(holder[0]):
                        return holder
                    if fallback[0] is None:
                        fallback = holder
            return fallback
        finally:
            del frame
            frames = []

    def _running_module(self, frame: types.FrameType | None = None) -> tuple[str | None, torch.nn.Module | None]:
        """The innermost module running now, by the name the tracer gave it, and the module; (None, None) outside
        any. The first time a model is seen running outermost, its tree is named (parameters and submodules), unless
        it is already named as part of another (a checkpointed block run again by backward is not a model of its own).

        Read off the Python stack, where a module is running from its forward pre-hooks to the end of its forward
        (`module_frames`): the span a global pre-hook and post-hook would mark, without their cost on every module
        call of the program (global module hooks put every call on nn.Module's slow path). `frame`: where to start
        looking (the frame making the call being recorded); the caller's by default.
        """
        try:
            frames = module_frames(frame if frame is not None else sys._getframe(1), self._outside)
            if not frames:
                return None, None
            module = module_of(frames[0])
            root = module_of(frames[-1]) if len(frames) > 1 else module
            if root is not None:  # the flags a model is recorded with: the sentinel's to know (sentinel._module_call)
                known = self._root_flags.get(id(root))
                if known is None or known[0]() is not root:
                    known = self._root_flags[id(root)] = (weakref.ref(root), set())
                known[1].add(root.training)
            if root is not None and id(root) not in self._named_roots and id(root) not in self._module_names:
                self._named_roots_live.put(root, True)
                # named from where the program called it, as a pre-hook on that call would have
                with _quiet(), source.looking_from(frames[-1]):
                    self._name_module(root)
            if module is None:
                return None, None
            name = self._module_names.get(id(module))
            if name is None and len(frames) > 1:
                # a module outside the model's tree (transformers' rotary `Func`, kept at module level; one made in a
                # forward): its ops belong to the module whose forward called it, so it splits no layer in two
                for outer in frames[1:]:
                    caller = module_of(outer)
                    name = self._module_names.get(id(caller)) if caller is not None else None
                    if name is not None:
                        return name, caller
            return name or type(module).__name__, module
        except Exception as exc:
            self._internal(exc)
            return None, None
        finally:
            frames, frame = [], None

    # ------------------------------------------------------------------ optimizer steps
    # The recorder pauses inside optimizer.step() (its in-place updates are summarised by one optimizer_step event)
    # except while a closure the step was given runs: LBFGS and friends compute the loss and its backward there.
    # torch runs every step inside `record_function("Optimizer.step#...")`, whose enter and exit ops reach the
    # recorder even while paused: the exit of a step whose post-hook never ran means the step raised.
    def _recording_here(self) -> bool:
        """Whether the calling thread's torch calls are recorded: the tracing thread's, and those of the threads the
        recorder was entered in (threads.py) until their own step window closed (window.py)."""
        here = threading.get_ident()
        if here == self._thread:
            return True
        return here in self._thread_names and self._thread_paused.get(here, 0) < _CLOSED

    def _pause(self, delta: int, thread: int | None = None) -> None:
        """Pause (or, with a negative `delta`, resume) recording in `thread` (default: the calling thread's)."""
        thread = threading.get_ident() if thread is None else thread
        if thread == self._thread:
            self._paused += delta
            return
        count = self._thread_paused.get(thread, 0) + delta
        if count > 0:
            self._thread_paused[thread] = count
        else:
            self._thread_paused.pop(thread, None)

    def _steps_open_here(self) -> bool:
        here = threading.get_ident()
        return any(step.thread == here for step in self._steps.values())

    def _paused_here(self) -> bool:
        if threading.get_ident() == self._thread:
            return bool(self._paused)
        return bool(self._paused >= _CLOSED or self._thread_paused.get(threading.get_ident()))

    def _step_pre(self, optimizer: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
        if _is_compiling() or not self._recording_here():
            return None
        key = id(optimizer)
        record = self._step_records.pop(threading.get_ident(), None)
        self._pause(1)
        open_step = self._steps.get(key)
        if open_step is not None:  # a step inside this optimizer's own step (a subclass calling super().step())
            open_step.inner.append(record)  # the outermost step is the one recorded
            return None
        frame = source.user_frame(2)
        where = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else (None, None)
        del frame
        with _quiet(), self._lock:
            self._before_step(optimizer, where, record)
            self._bystanders.look()  # (once a step: the threads not recorded, seen running or not)
        return self._traced_closure(optimizer, args, kwargs)

    def _before_step(self, optimizer: Any, where: tuple[str | None, int | None], record: Any) -> None:
        state = []
        # torch's optimizers skip a parameter without .grad; a custom step() may give it one (`p.grad = zeros`) and
        # update it all the same, its values moved or not
        custom = not type(optimizer).__module__.startswith("torch.")
        try:
            for group in optimizer.param_groups:
                for p in group["params"]:
                    grad = self._grad_state(p)
                    # a zero gradient moves the version but maybe not the values (momentum and weight decay can
                    # still move them, or not): keep a copy to compare
                    copy = _local_copy(p) if grad == "zero" or (custom and grad == "none") else None
                    state.append([p, _version(p), grad, copy])
        except Exception as exc:
            self._internal(exc)
        ident = self._optimizer_ids.table.get(id(optimizer))
        if ident is None:
            ident = f"o{next(self._optimizer_count)}"
            self._optimizer_ids.put(optimizer, ident)
        self._steps[id(optimizer)] = _OpenStep(type(optimizer), ident, where, state, record)

    def _grad_state(self, p: torch.Tensor) -> str:
        g = p.grad
        if g is None:
            return "none"
        live = self._live.get(id(p))
        if live is not None and _same_grad(self._fresh_grads.get(live.tid), g):
            # the latest backward wrote this .grad and nothing touched it since: no need to read it
            return "fresh"
        if not any(bool(part.any()) for part in _local(g)):
            return "zero"
        # a gradient no traced backward wrote: the one the previous step saw (stale), or one the program put there
        # since (`p.grad = g` from torch.func.grad, a hand-made gradient); before any step, nothing is stale yet
        return "nonzero" if live is not None and _same_grad(self._stepped_grads.get(live.tid), g) else "written"

    def _traced_closure(self, optimizer: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
        """The step's closure, wrapped so that what it does (zero_grad, forward, backward) is recorded."""
        in_kwargs = "closure" in kwargs
        at = 1 if args and args[0] is optimizer else 0  # torch's wrapper passes (optimizer, closure, ...)
        if not in_kwargs and not (len(args) > at and _takes_closure_first(optimizer.__class__)):
            return None  # not a closure: whatever a custom step takes first is passed on untouched
        closure = kwargs["closure"] if in_kwargs else args[at]
        if not callable(closure):
            return None
        recorder = self
        key = id(optimizer)

        @functools.wraps(closure)
        def traced_closure(*a: Any, **k: Any) -> Any:
            if key not in recorder._steps or not recorder._paused_here():  # called after its step ended: as it is
                return closure(*a, **k)
            recorder._pause(-1)
            try:
                return closure(*a, **k)
            finally:
                recorder._pause(1)
                with _quiet(), recorder._lock:
                    recorder._refresh_grad_states(key)

        if in_kwargs:
            return args, {**kwargs, "closure": traced_closure}
        return (*args[:at], traced_closure, *args[at + 1 :]), kwargs

    def _refresh_grad_states(self, key: int) -> None:
        """After a closure ran its backward, the gradients the step will use are the ones it left.

        A parameter still without a gradient may be moved all the same (LBFGS adds a zero direction to it: the
        version moves, the values do not): its values are copied now, before the step updates anything, only if
        the step has not written it yet.
        """
        step = self._steps.get(key)
        if step is None:
            return
        try:
            for entry in step.state:
                p, before, _, copy = entry
                entry[2] = grad = self._grad_state(p)
                if copy is None and grad in ("none", "zero") and _version(p) == before:
                    entry[3] = _local_copy(p)
        except Exception as exc:
            self._internal(exc)

    def _step_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if _is_compiling():
            return
        step = self._steps.get(id(optimizer))
        if step is None or step.thread != threading.get_ident():
            return
        if step.inner:  # the end of a step inside the recorded one
            step.inner.pop()
            self._pause(-1)
            return
        self._close_step(id(optimizer), "ok")

    def _on_record_function(self, func: Any, args: Any, kwargs: Any) -> Any:
        """torch's profiler marks: note the handle of an optimizer step's mark; its exit ends the step."""
        result = func(*args, **kwargs)
        if func is _RECORD_ENTER:
            if args and isinstance(args[0], str) and args[0].startswith("Optimizer.step#"):
                self._step_records[threading.get_ident()] = result  # the step's pre-hook, next, takes it
        elif self._steps and args:
            # the exit of a step's mark while the step is open: its post-hook, which runs before, did not run
            here = threading.get_ident()
            for key, step in list(self._steps.items()):
                if step.thread != here:  # (each thread's steps are its own)
                    continue
                if step.record is not None and step.record is args[0]:
                    self._close_step(key, "error")
                elif any(inner is args[0] for inner in step.inner):
                    step.inner = [inner for inner in step.inner if inner is not args[0]]
                    self._pause(-1)
        return result

    def _close_step(self, key: int, outcome: str) -> None:
        step = self._steps.pop(key)
        self._pause(-1 - len(step.inner), step.thread)
        with _quiet(), self._lock:
            self._record_step(key, step, outcome)

    def _record_step(self, key: int, step: _OpenStep, outcome: str) -> None:
        try:
            changed, grads, versions, given = [], {}, [], []
            for p, before, grad, copy in step.state:
                tid = self._tid(p)
                after = _version(p)
                moved = after != before and (copy is None or not _equal(copy, _local(p)))
                if moved:
                    changed.append(tid)
                grads[tid] = grad
                g = p.grad
                if grad == "none" and g is not None:
                    given.append(tid)  # step() itself gave it a gradient
                if g is not None:
                    self._stepped_grads[tid] = _grad_key(g)
                versions.append(VersionChange(tid, before, after))
                live = self._live.get(id(p))
                if live is not None:
                    live.version = after
            file, line = step.where
            data: EventData = {"optimizer": step.name, "optimizer_id": step.ident, "changed": changed, "grads": grads}
            if outcome != "ok":
                data["outcome"] = outcome  # raised inside step(); what it changed before that is still listed
            if given:
                data["grad_given"] = given
                at = _grad_assignment(step.kind)
                if at is not None:
                    data["grad_given_at"] = list(at)
            self._event(EventKind.OPTIMIZER_STEP, file, line, op=f"{step.name}.step", versions=versions, data=data)
        except Exception as exc:
            self._internal(exc)


def _local_copy(p: torch.Tensor) -> list[torch.Tensor]:
    return [part.detach().clone() for part in _local(p)]


def _equal(copy: list[torch.Tensor], now: list[torch.Tensor]) -> bool:
    return len(copy) == len(now) and all(torch.equal(a, b) for a, b in zip(copy, now))


_RECORD_ENTER = torch.ops.profiler._record_function_enter_new
_RECORD_EXIT = torch.ops.profiler._record_function_exit._RecordFunction
RECORD_FUNCTION_OPS = (_RECORD_ENTER, _RECORD_EXIT)


@functools.lru_cache(maxsize=64)
def _grad_assignment(optimizer_type: type[Any]) -> tuple[str, int, str] | None:
    """(file, line, code) of the first `<x>.grad = <not None>` in `optimizer_type.step`, if its source is readable."""
    try:
        step = inspect.unwrap(optimizer_type.step)
        lines, first = inspect.getsourcelines(step)
        tree = ast.parse(textwrap.dedent("".join(lines)))
        file = inspect.getsourcefile(step)
    except (OSError, TypeError, SyntaxError):
        return None
    found = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and not (isinstance(node.value, ast.Constant) and node.value.value is None)
        and any(isinstance(target, ast.Attribute) and target.attr == "grad" for target in node.targets)
    ]
    if not found or not file:
        return None
    return file, first + min(found) - 1, lines[min(found) - 1].strip()


@functools.lru_cache(maxsize=256)
def _takes_closure_first(optimizer_type: type[Any]) -> bool:
    """Whether `optimizer_type.step`'s first argument after self is its closure (every torch optimizer's is)."""
    step = inspect.unwrap(optimizer_type.step)
    try:
        parameters = list(inspect.signature(step).parameters)
    except (TypeError, ValueError):
        return False
    return len(parameters) > 1 and parameters[1] == "closure"


class _OpenStep:
    """An optimizer step between its pre- and post-hook: the parameters' state before it, and where it runs."""

    __slots__ = ("ident", "inner", "kind", "name", "record", "state", "thread", "where")

    def __init__(
        self, kind: type[Any], ident: str, where: tuple[str | None, int | None], state: list[list[Any]], record: Any
    ) -> None:
        self.kind: Any = kind  # the optimizer's class
        self.ident = ident  # the trace's name for the optimizer object (o0, o1, ...)
        self.name = kind.__name__
        self.where = where  # the program's file and line calling step()
        self.state = state  # [parameter, version before, gradient state, copy of values or None] per parameter
        self.record = record  # the handle of torch's record_function mark around the step, if seen
        self.inner: list[Any] = []  # marks of steps of the same optimizer running inside this one
        self.thread = threading.get_ident()  # the thread running it, paused until it ends
