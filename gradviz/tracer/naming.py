"""Naming what the program holds: tensors by the variables of the frames where events happen, parameters by the
variable holding their model, notebook cells as IPython calls them."""

from __future__ import annotations

import sys
from typing import Any

import torch

from ..model import Location
from . import source
from .holders import shown_path as _shown_path, unwrapped
from .state import RecorderState
from .tensors import _Tensor


class VariableNaming(RecorderState):
    """The naming half of the Recorder (mixed into it; reads its live tensors)."""

    def _name_from_frame_at(self, loc: Location) -> None:
        frame = source.user_frame(3)
        while frame is not None and (frame.f_code.co_filename != loc.file or frame.f_lineno != loc.line):
            frame = frame.f_back
        if frame is not None:
            self.name_locals(source.frame_variables(frame))

    def name_locals(self, namespace: dict[str, Any], *, modules: bool = False) -> None:
        """Give tracked tensors found in `namespace` (a frame's locals or a module's globals) their names.

        With `modules`, also name the parameters of the nn.Modules found there: those never called (a frozen module
        handed to an optimizer), and those only ever called through a submodule. Only at the end, when no module is
        still half-built.
        """
        # asked at every event, over every variable of the frame (a script's globals): tensors first, cheaply
        live_of = self._live.get
        tensors = self.trace.tensors
        # (by the value's type, never isinstance: that asks a non-tensor for its `__class__`, which an object may
        # answer with code of its own, a warning the program never printed; the same cost for a tensor)
        for name, value in list(namespace.items()):
            kind = type(value)
            if issubclass(kind, _Tensor):
                if name.startswith("__"):
                    continue
                live = live_of(id(value))
                if live is not None and live() is value:
                    names = tensors[live.tid].names
                    if name not in names:
                        names.append(name)
            elif modules and issubclass(kind, torch.nn.Module) and not name.startswith("__"):
                for param_name, param in value.named_parameters():
                    live = self._live.get(id(param))
                    if live is None or live() is not param:
                        continue
                    param_name = _shown_path(value, param_name)  # a wrapper's part left out (`_orig_mod`, `module`)
                    known = live.record.parameter
                    # the outermost module's name wins: `encoder.0.weight` over `0.weight` from a submodule call
                    if known is None or (len(param_name) > len(known) and param_name.endswith("." + known)):
                        live.record.parameter = param_name
                        live.record.origin = "parameter"
                        self._param_roots[live.tid] = name
                    elif known == param_name:
                        # the program's own name for the model the name came from beats a helper's parameter name;
                        # of two variables here holding the same model (`raw_model = model`), the first bound stays
                        # (a wrapper of it counts as the model: nanoGPT's `model = DDP(model)`, then `raw_model`)
                        root = self._param_roots.get(live.tid)
                        if root is None or unwrapped(namespace.get(root.partition("#")[0])) is not unwrapped(value):
                            self._param_roots[live.tid] = name

    def _label_notebook_cells(self) -> None:
        """Code run in IPython/Jupyter lives in files named like /tmp/ipykernel_81/2087447346.py: displays call
        them as IPython does (`In[3]`). Only when IPython is already loaded; nothing is imported for it."""
        ipython = sys.modules.get("IPython")
        shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
        namer = getattr(getattr(shell, "compile", None), "format_code_name", None)
        if namer is None:
            return
        files = {file for file, _ in self._locations} | {e.location.file for e in self.trace.events if e.location}
        for file in files:
            try:
                named = namer(file)
            except Exception:  # noqa: BLE001 - an IPython that names code differently: keep the file name
                named = None
            if named and file is not None:
                self.trace.file_labels[file] = named[1]

    def _qualify_parameter_names(self) -> None:
        """Parameters are named as the program reaches them: the variable holding the outermost module, then the
        attribute path from it (`model.conv1.weight`, `netG.main.0.weight`, `lin.weight`), so a name is never
        ambiguous (`fc1.weight` of `actor` and of `critic`) and reads as code the user can type. A parameter found in
        no variable of the program keeps its attribute path; when one variable name holds two models (`model` in a
        helper called for both), the names it would give are not unique and the attribute paths stay."""
        qualified: dict[str, str] = {}
        for record in self.trace.tensors.values():
            own = record.parameter or record.buffer
            if own is not None and record.id in self._param_roots:
                qualified[record.id] = f"{self._param_roots[record.id]}.{own}"
        seen: dict[str, int] = {}
        for name in qualified.values():
            seen[name] = seen.get(name, 0) + 1
        for tid, name in qualified.items():
            if seen[name] == 1:
                record = self.trace.tensors[tid]
                if record.parameter is not None:
                    record.parameter = name
                else:
                    record.buffer = name
