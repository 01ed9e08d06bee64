"""Which module made a node or wrote in place, read off the Python stack: no module hooks while tracing."""

from __future__ import annotations

import torch
from torch.nn.modules.module import _global_forward_hooks, _global_forward_pre_hooks

import gradviz
from gradviz import EventKind


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())
        self.head = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _modules_of(t: gradviz.Trace, name: str) -> list[str | None]:
    return [n.module for n in t.nodes.values() if n.name == name]


def test_no_global_module_hook_while_tracing_and_nodes_keep_their_modules() -> None:
    torch.manual_seed(0)
    with gradviz.trace() as t:
        model = Net()
        hooks_while_tracing = (len(_global_forward_pre_hooks), len(_global_forward_hooks))
        model(torch.randn(2, 3)).sum().backward()
    assert hooks_while_tracing == (0, 0)
    assert _modules_of(t, "AddmmBackward0") == ["model.body.0", "model.head"]
    assert _modules_of(t, "TanhBackward0") == ["model.body.1"]
    assert _modules_of(t, "SumBackward0") == [None]  # .sum() in the program, outside any module
    assert t.tensor("model.head.weight").parameter == "model.head.weight"


def test_a_forward_hook_runs_outside_its_module_and_a_pre_hook_inside() -> None:
    torch.manual_seed(0)
    with gradviz.trace() as t:
        model = Net()
        model.head.register_forward_pre_hook(lambda module, args: (args[0] * 2,))
        model.head.register_forward_hook(lambda module, args, out: out.exp())
        model(torch.randn(2, 3)).sum().backward()
    assert _modules_of(t, "MulBackward0") == ["model.head"]  # the pre-hook's doubling: inside `head`
    assert _modules_of(t, "ExpBackward0") == ["model"]  # the forward hook's exp: after `head` returned, in `model`
    assert _modules_of(t, "AddmmBackward0") == ["model.body.0", "model.head"]


class Direct(torch.nn.Module):
    """Calls its submodule's forward itself: the submodule never runs as a module call of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner.forward(x).relu()


def test_a_forward_called_directly_belongs_to_the_module_calling_it() -> None:
    with gradviz.trace() as t:
        model = Direct()
        model(torch.randn(2, 3)).sum().backward()
    assert _modules_of(t, "AddmmBackward0") == ["model"]
    assert _modules_of(t, "ReluBackward0") == ["model"]


def run(net: torch.nn.Module) -> torch.Tensor:
    return net(torch.randn(2, 3)).sum()


def test_a_model_first_seen_deep_in_its_forward_is_named_by_the_outermost_holder() -> None:
    """The model is first seen running deep inside its own forward, called through a helper's argument (`net`); it
    is named as the naming rule names a model passed to a function: by the outermost variable holding it (`model`),
    the same name a pre-hook at the call gave it, with and without a window."""
    global model
    model = Net()
    try:
        with gradviz.trace() as t:
            run(model).backward()
    finally:
        del model
    assert _modules_of(t, "AddmmBackward0") == ["model.body.0", "model.head"]
    assert t.tensor("model.head.weight").origin == "parameter"


def test_an_in_place_write_names_the_module_running() -> None:
    with gradviz.trace() as t:
        model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(inplace=True))
        model(torch.randn(2, 3)).sum().backward()
    *init, write = t.events_of(EventKind.INPLACE_WRITE)
    assert [e.op for e in init] == ["nn.init.kaiming_uniform_", "nn.init.uniform_"]  # Linear's own init, no module
    assert all("module" not in e.data for e in init)
    assert (write.op, write.data["module"], write.data["module_call"]) == ("nn.functional.relu", "model.1", "nn.ReLU(inplace=True)")


def test_a_module_called_by_functional_call_is_running() -> None:
    with gradviz.trace() as t:
        model = Net()
        params = {name: p.detach().clone().requires_grad_() for name, p in model.named_parameters()}
        torch.func.functional_call(model, params, (torch.randn(2, 3),)).sum().backward()
    assert _modules_of(t, "AddmmBackward0") == ["model.body.0", "model.head"]


class TracesItself(torch.nn.Module):
    """Starts tracing inside its own forward: it was running before the tracer started, and is not seen as running."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> gradviz.Trace:
        with gradviz.trace() as t:
            self.lin(x).sum().backward()
            x.exp()
        return t


def test_a_module_running_when_tracing_began_is_not_a_running_module() -> None:
    outer = TracesItself()
    t = outer(torch.randn(4, 3, requires_grad=True))
    assert _modules_of(t, "AddmmBackward0") == ["outer.lin"]
    assert _modules_of(t, "SumBackward0") == [None] and _modules_of(t, "ExpBackward0") == [None]


class Rotate(torch.nn.Module):
    """A function wrapped in a module kept outside any model (transformers' `apply_rotary_pos_emb` is such a `Func`)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([-x[..., 1:], x[..., :1]], dim=-1) * 2


rotate = Rotate()  # module level: no model holds it


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(rotate(x)).tanh()


def test_a_module_outside_the_models_tree_belongs_to_the_module_calling_it() -> None:
    """Its ops are the calling block's, not a module of their own that splits the block in two; the models' own
    modules keep theirs, and called from the program it is a model of its own."""
    with gradviz.trace() as t:
        model = torch.nn.Sequential(Block(), Block())
        model(torch.randn(2, 3, requires_grad=True)).sum().backward()
        rotate(torch.randn(2, 3, requires_grad=True)).sum().backward()
    assert _modules_of(t, "NegBackward0") == ["model.0", "model.1", "rotate"]
    assert _modules_of(t, "MulBackward0") == ["model.0", "model.1", "rotate"]
    assert _modules_of(t, "TanhBackward0") == ["model.0", "model.1"]
    assert _modules_of(t, "AddmmBackward0") == ["model.0.proj", "model.1.proj"]
