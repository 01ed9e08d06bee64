"""What the tracer learns from nn.Module and optimizer hooks: parameter names, module paths, optimizer steps."""

from __future__ import annotations

import functools
import sys
from types import FrameType
from typing import Any

import torch

from ..model import EventKind, VersionChange
from . import source
from .tensors import _version

# Hooks run outside the recorder's own __torch_function__, where the mode is still active: every tensor attribute
# our bookkeeping reads would otherwise go through it and any other mode (about a microsecond each, and seen by them)
_quiet = torch._C.DisableTorchFunction


class HookRecording:
    """The module- and optimizer-hook half of the Recorder (mixed into it; uses its tensor tracking and state)."""

    trace: Any

    def _name_module(self, module: torch.nn.Module) -> None:
        """Qualified names, from the outermost module called, for its submodules and parameters."""
        root = type(module).__name__
        for name, sub in module.named_modules():
            self._module_names[id(sub)] = name or root
        variable = self._variable_holding(module)
        for name, param in module.named_parameters():
            tid = self._tid(param)
            record = self.trace.tensors[tid]
            if record.parameter is None or len(name) > len(record.parameter):
                record.parameter = name
                record.origin = "parameter"
                if variable is not None:
                    self._param_roots[tid] = variable

    def _variable_holding(self, module: torch.nn.Module) -> str | None:
        """The name the calling code knows `module` by (`G`, `encoder`), from its locals or globals, if any."""
        frame = source.user_frame(3)
        if frame is None:
            return None
        try:
            for namespace in (source.frame_variables(frame), frame.f_globals):
                for name, value in namespace.items():
                    if value is module and not name.startswith("_"):
                        return name
            return None
        finally:
            del frame

    def _module_pre(self, module: torch.nn.Module, args: Any) -> None:
        if self._paused and not (self._steps and self._close_abandoned_steps()):
            return
        try:
            if not self._module_stack and id(module) not in self._named_roots:  # an outermost call: name its tree
                self._named_roots.add(id(module))
                with _quiet():
                    self._name_module(module)
            self._module_stack.append(self._module_names.get(id(module), type(module).__name__))
        except Exception as exc:
            self._internal(exc)
            self._module_stack.append("?")

    def _module_post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if self._paused:
            return
        if self._module_stack:
            self._module_stack.pop()

    # ------------------------------------------------------------------ optimizer steps
    # The recorder pauses inside optimizer.step() (its in-place updates are summarised by one optimizer_step event)
    # except while a closure the step was given runs: LBFGS and friends compute the loss and its backward there.
    def _step_pre(self, optimizer: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
        if self._steps:  # a step that raised earlier (the program caught it): its post-hook never ran
            self._close_abandoned_steps()
        self._paused += 1
        caller = sys._getframe(1)  # torch's step wrapper, alive exactly as long as this step runs
        frame = source.user_frame(2)
        where = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else (None, None)
        del frame
        with _quiet():
            self._before_step(optimizer, (id(caller), caller.f_code), where)
        del caller
        return self._traced_closure(optimizer, args, kwargs)

    def _before_step(self, optimizer: Any, frame: tuple[int, Any], where: tuple[str | None, int | None]) -> None:
        try:
            state = []
            for group in optimizer.param_groups:
                for p in group["params"]:
                    grad = self._grad_state(p)
                    # without a gradient, an update may move the version but not the values (SGD adding a zero
                    # gradient, LBFGS adding a zero direction): keep a copy to compare
                    copy = p.detach().clone() if grad in ("zero", "none") else None
                    state.append([p, _version(p), grad, copy])
            self._steps[id(optimizer)] = _OpenStep(type(optimizer).__name__, frame, where, state)
        except Exception as exc:
            self._internal(exc)

    def _grad_state(self, p: torch.Tensor) -> str:
        g = p.grad
        if g is None:
            return "none"
        live = self._live.get(id(p))
        if live is not None and self._fresh_grads.get(live.tid) == (id(g), _version(g)):
            # the latest backward wrote this .grad and nothing touched it since: no need to read it
            return "fresh"
        return "zero" if not bool(g.any()) else "nonzero"

    def _traced_closure(self, optimizer: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
        """The step's closure, wrapped so that what it does (zero_grad, forward, backward) is recorded."""
        in_kwargs = "closure" in kwargs
        at = 1 if args and args[0] is optimizer else 0  # torch's wrapper passes (optimizer, closure, ...)
        closure = kwargs["closure"] if in_kwargs else (args[at] if len(args) > at else None)
        if not callable(closure):
            return None
        recorder = self
        key = id(optimizer)

        @functools.wraps(closure)
        def traced_closure(*a: Any, **k: Any) -> Any:
            recorder._paused -= 1
            try:
                return closure(*a, **k)
            finally:
                recorder._paused += 1
                with _quiet():
                    recorder._refresh_grad_states(key)

        if in_kwargs:
            return args, {**kwargs, "closure": traced_closure}
        return (*args[:at], traced_closure, *args[at + 1 :]), kwargs

    def _refresh_grad_states(self, key: int) -> None:
        """After a closure ran its backward, the gradients the step will use are the ones it left."""
        step = self._steps.get(key)
        if step is None:
            return
        try:
            for entry in step.state:  # (a copy of the values taken before the step stays what to compare with)
                entry[2] = self._grad_state(entry[0])
        except Exception as exc:
            self._internal(exc)

    def _step_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        try:
            step = self._steps.pop(id(optimizer), None)
            if step is not None:
                with _quiet():
                    self._record_step(id(optimizer), step, "ok")
        finally:
            self._paused -= 1

    def _close_abandoned_steps(self) -> bool:
        """Record steps whose torch wrapper is no longer running (they raised) and stop pausing for them.

        Called for every torch call and module call made while paused, and when another step begins: a running
        step's wrapper frame is a few frames up, so the check is short. Returns True when recording resumes.
        """
        ended = {step.frame for step in self._steps.values()}
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and ended:  # a step still running is found a few frames up
            ended.discard((id(frame), frame.f_code))
            frame = frame.f_back
        del frame
        if not ended:
            return False
        closed = False
        for key, step in list(self._steps.items()):
            if step.frame not in ended:
                continue
            del self._steps[key]
            self._paused -= 1
            closed = True
            with _quiet():
                self._record_step(key, step, "error")
        return closed and not self._paused

    def _record_step(self, key: int, step: _OpenStep, outcome: str) -> None:
        try:
            changed, grads, versions = [], {}, []
            for p, before, grad, copy in step.state:
                tid = self._tid(p)
                after = _version(p)
                moved = after != before and (copy is None or not torch.equal(copy, p))
                if moved:
                    changed.append(tid)
                grads[tid] = grad
                versions.append(VersionChange(tid, before, after))
                live = self._live.get(id(p))
                if live is not None:
                    live.version = after
            file, line = step.where
            data = {
                "optimizer": step.name,
                "optimizer_id": self._optimizer_ids.setdefault(key, f"o{len(self._optimizer_ids)}"),
                "changed": changed,
                "grads": grads,
            }
            if outcome != "ok":
                data["outcome"] = outcome  # raised inside step(); what it changed before that is still listed
            self._event(EventKind.OPTIMIZER_STEP, file, line, op=f"{step.name}.step", versions=versions, data=data)
        except Exception as exc:
            self._internal(exc)


class _OpenStep:
    """An optimizer step between its pre- and post-hook: the parameters' state before it, and where it runs."""

    __slots__ = ("frame", "name", "state", "where")

    def __init__(self, name: str, frame: tuple[int, Any], where: tuple[str | None, int | None], state: list[list[Any]]):
        self.name = name  # the optimizer's class name
        self.frame = frame  # (id, code) of torch's step wrapper frame: gone from the stack once the step has ended
        self.where = where  # the program's file and line calling step()
        self.state = state  # [parameter, version before, gradient state, copy of values or None] per parameter
