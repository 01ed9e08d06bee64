"""What the tracer learns from nn.Module and optimizer hooks: parameter names, module paths, optimizer steps."""

from __future__ import annotations

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
        for name, param in module.named_parameters():
            record = self.trace.tensors[self._tid(param)]
            if record.parameter is None or len(name) > len(record.parameter):
                record.parameter = name
                record.origin = "parameter"

    def _module_pre(self, module: torch.nn.Module, args: Any) -> None:
        if self._paused:
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

    def _step_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._paused += 1
        with _quiet():
            self._before_step(optimizer)

    def _before_step(self, optimizer: Any) -> None:
        try:
            state = []
            fresh = self._fresh_grads
            for group in optimizer.param_groups:
                for p in group["params"]:
                    live = self._live.get(id(p))
                    g = p.grad
                    if g is None:
                        grad = "none"
                    elif live is not None and fresh.get(live.tid) == (id(g), _version(g)):
                        # the latest backward wrote this .grad and nothing touched it since: no need to read it
                        grad = "fresh"
                    else:
                        grad = "zero" if not bool(g.any()) else "nonzero"
                    # a zero gradient moves the version but maybe not the values: keep a copy to compare
                    copy = p.detach().clone() if grad == "zero" else None
                    state.append((p, _version(p), grad, copy))
            self._steps[id(optimizer)] = state
        except Exception as exc:
            self._internal(exc)

    def _step_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        try:
            with _quiet():
                self._after_step(optimizer)
        finally:
            self._paused -= 1

    def _after_step(self, optimizer: Any) -> None:
        try:
            state = self._steps.pop(id(optimizer), [])
            changed, grads, versions = [], {}, []
            for p, before, grad, copy in state:
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
            frame = source.user_frame(2)
            file, line = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else (None, None)
            self._event(
                EventKind.OPTIMIZER_STEP,
                file,
                line,
                op=f"{type(optimizer).__name__}.step",
                versions=versions,
                data={
                    "optimizer": type(optimizer).__name__,
                    "optimizer_id": self._optimizer_ids.setdefault(id(optimizer), f"o{len(self._optimizer_ids)}"),
                    "changed": changed,
                    "grads": grads,
                },
            )
        except Exception as exc:
            self._internal(exc)
