"""One naming rule for every view and message: tensors, storages and version counters in the program's words.

A tensor is named by the program's variable or parameter; failing that by the expression that made it
(`h1.data`, `x.detach()`, `fc1(x)`, `a * b`); failing that by its module and line (`output of model.fc1, line 12`).
A storage is named by its first owner, a version counter by the tensors that share it. The recorder's ids
(`t19`, `s23`, `v23`, `n5`) never reach a picture, a message or a report: the user has no `t19` in their program.
"""

from __future__ import annotations

import io
import tokenize

from ..model import OpRecord, Trace

__all__ = ["Namer", "call_name", "shorten_name", "statement"]

_OPERATORS = {"add": "+", "radd": "+", "sub": "-", "rsub": "-", "mul": "*", "rmul": "*", "truediv": "/",
              "rtruediv": "/", "matmul": "@", "rmatmul": "@", "pow": "**", "rpow": "**", "neg": "-"}
_ELLIPSIS = "\N{HORIZONTAL ELLIPSIS}"
_LONGEST = 48  # an expression longer than this is cut with an ellipsis


def shorten_name(text: str, limit: int = _LONGEST) -> str:
    return text if len(text) <= limit else text[: limit - 1] + _ELLIPSIS


def statement(line: str) -> str:
    """A source line as a message quotes it: the statement as written, without its indentation and its trailing
    comment (a `# gradviz: ignore[...]` or a note to the reader is not code); tokenised, so `#` in a string stays."""
    text = line.strip()
    if "#" not in text:
        return text
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text + "\n").readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return text
    for token in tokens:
        if token.type == tokenize.COMMENT:
            return text[: token.start[1]].rstrip() or text
    return text


def call_name(module: str) -> str:
    """How the program calls a module, from its path: its attribute (`fc1` for `model.fc1`), subscripted where the
    path ends in a container's entries (`main[6]` for `netG.main.6`, `layers[0][1]`), as Python reads it."""
    parts = module.split(".")
    last = len(parts) - 1
    while last > 0 and parts[last].isdigit():
        last -= 1
    if last == len(parts) - 1:
        return parts[-1]
    return parts[last] + "".join(f"[{part}]" for part in parts[last + 1 :])


class Namer:
    """The names of one trace's tensors, storages and counters, computed on demand and remembered."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._producers: dict[str, OpRecord] | None = None
        self._tensor: dict[str, str] = {}

    # ------------------------------------------------------------------ tensors
    @property
    def producers(self) -> dict[str, OpRecord]:
        """Tensor id -> the call that produced it (the first listing it as an output but not as an input)."""
        if self._producers is None:
            out: dict[str, OpRecord] = {}
            for op in self.trace.ops:
                for tid in op.outputs:
                    if tid not in op.inputs:
                        out.setdefault(tid, op)
            self._producers = out
        return self._producers

    def variable(self, tid: str | None) -> str | None:
        """The program's own name for the tensor (parameter, then variable), or None when it has none."""
        record = self.trace.tensors.get(tid) if tid is not None else None
        if record is None:
            return None
        return record.parameter or record.buffer or (record.names[0] if record.names else None)

    def tensor(self, tid: str | None) -> str:
        """`model.fc1.weight`, `loss`, `h1.data`, `fc1(x)`, `a * b`, `output of model.fc1, line 12`."""
        if tid is None:
            return "a tensor"
        known = self._tensor.get(tid)
        if known is None:
            known = self._tensor[tid] = self._name(tid, depth=0)
        return known

    def expression(self, tid: str | None) -> str:
        """How the tensor was made, even when it has a name: `x.detach()` for `x = x.detach()`."""
        record = self.trace.tensors.get(tid) if tid is not None else None
        if tid is None or record is None:
            return self.tensor(tid)
        made = self._made(tid, depth=0)
        return made if made is not None else self.tensor(tid)

    def made(self, tid: str | None) -> str | None:
        """The expression that made the tensor (`err_real.add(err_fake)`, `x.detach()`), or None if none did."""
        return self._made(tid, depth=0) if tid is not None and tid in self.trace.tensors else None

    def alias(self, tid: str | None) -> str:
        """`c = out.data` for a named alias, `out.data` for an unnamed one, else the tensor's name."""
        record = self.trace.tensors.get(tid) if tid is not None else None
        if (tid is None or record is None or record.origin not in ("data", "detach", "view")
                or record.source not in self.trace.tensors):
            return self.tensor(tid)
        made = self._made(tid, depth=0) or self.tensor(tid)
        own = self.variable(tid)
        return made if own is None or own == made else f"{own} = {made}"

    def _name(self, tid: str, *, depth: int) -> str:
        own = self.variable(tid)
        if own is not None:
            return own
        made = self._made(tid, depth=depth)
        if made is not None:
            return made
        return self._where(tid)

    def _short(self, tid: str, depth: int) -> str:
        """An argument inside an expression: a name, a short expression, or an ellipsis past two levels."""
        if tid not in self.trace.tensors:
            return _ELLIPSIS
        own = self.variable(tid)
        if own is not None:
            return own
        if depth >= 2:
            return _ELLIPSIS
        made = self._made(tid, depth=depth + 1)
        return made if made is not None else _ELLIPSIS

    def _made(self, tid: str, *, depth: int) -> str | None:
        record = self.trace.tensors[tid]
        # (a tensor first seen saved by a node, where it is a view of a known one: `weight.t()` inside linear)
        if record.source in self.trace.tensors and record.origin in ("data", "detach", "view", "saved"):
            source = self._short(record.source, depth)
            if record.origin == "data":
                return shorten_name(f"{source}.data")
            if record.origin == "detach":
                return shorten_name(f"{source}.detach()")
            return shorten_name(f"view of {source}")
        op = self.producers.get(tid)
        if op is None:
            return None
        args = [self._short(i, depth) for i in op.inputs]
        first = args[0] if args else _ELLIPSIS
        name = op.name.removeprefix("Tensor.").removeprefix("torch.")
        if name.endswith(".__get__"):  # a property read: x.grad
            text = f"{first}.{name[: -len('.__get__')]}"
        elif name == "__getitem__":
            text = f"{first}[{_ELLIPSIS}]"
        elif name.startswith("__") and name.strip("_") in _OPERATORS:
            symbol = _OPERATORS[name.strip("_")]
            other = args[1] if len(args) > 1 else _ELLIPSIS
            text = f"{symbol}{first}" if name == "__neg__" else f"{first} {symbol} {other}"
            if name.startswith("__r"):
                text = f"{other} {symbol} {first}"
        elif op.name.startswith("Tensor.") and args:
            text = f"{first}.{name}({', '.join(args[1:])})"
        else:
            module = self._module_of(tid)
            if module and name.split(".")[-1] in _MODULE_OPS:  # the module's call, with its input only
                text = f"{call_name(module)}({first})"
            else:
                text = f"{name.split('.')[-1]}({', '.join(args)})"
        return shorten_name(text)

    def _module_of(self, tid: str) -> str | None:
        record = self.trace.tensors[tid]
        node = self.trace.nodes.get(record.grad_fn) if record.grad_fn else None
        return node.module if node is not None else None

    def _where(self, tid: str) -> str:
        """The last resort: what made it and where (`output of model.fc1, line 12`, `tensor made at line 7`)."""
        record = self.trace.tensors[tid]
        module = self._module_of(tid)
        line = record.created.line if record.created is not None else None
        label = self.trace.file_labels.get(record.created.file) if record.created is not None else None
        place = f"cell {label}, line {line}" if label else f"line {line}"  # (context.line_at, one layer up)
        at = f", {place}" if line is not None else ""
        if module:
            return f"output of {module}{at}"
        if record.op:
            call = record.op.removeprefix("torch.").removeprefix("Tensor.")
            return f"{call}() at {place}" if line is not None else f"{call}()"
        if line is not None:
            return f"tensor made at {place}"
        shape = "[" + ", ".join(str(n) for n in record.shape) + "]"
        return f"a {shape} {record.dtype} tensor"

    def tensors(self, tids: list[str], *, limit: int = 6) -> str:
        """Each name once, in order: `x, x.detach(), … 3 more`."""
        names: dict[str, None] = {}
        for tid in tids:
            names.setdefault(self.tensor(tid), None)
        listed = list(names)
        text = ", ".join(listed[:limit])
        return text + (f", {_ELLIPSIS} {len(listed) - limit} more" if len(listed) > limit else "")

    # ------------------------------------------------------------------ storages and counters
    def storage(self, sid: str | None) -> str:
        """`storage of model.fc1.weight`: named by its first owner, the first tensor seen in it."""
        if sid is None or sid not in self.trace.storages:
            return "a storage"
        owner = min((t for t in self.trace.tensors.values() if t.storage == sid), key=lambda t: t.seq, default=None)
        return f"storage of {self.tensor(owner.id)}" if owner is not None else "a storage"

    def counter(self, cid: str | None) -> str:
        """`version counter of x, x.detach()`: named by the tensors that share it."""
        record = self.trace.version_counters.get(cid) if cid is not None else None
        if record is None:
            return "a version counter"
        members = [tid for tid in record.tensors if tid in self.trace.tensors]
        if not members:
            members = [t.id for t in self.trace.tensors.values() if t.version_counter == cid]
        return f"version counter of {self.tensors(members, limit=3)}" if members else "a version counter"


#: Functional ops a module's forward makes: `fc1(x)` reads better than `linear(x, fc1.weight, fc1.bias)`.
_MODULE_OPS = frozenset({"linear", "conv1d", "conv2d", "conv3d", "embedding", "layer_norm", "batch_norm",
                         "group_norm", "lstm", "gru", "rnn_tanh", "rnn_relu", "conv_transpose2d"})


def number_ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> `0-2, 5, 7-8`: numbers (steps, layer indexes) as a person writes them."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)
