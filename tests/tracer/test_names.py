"""Names: the user's variable names for tensors, qualified parameter names from nn.Modules, and labels."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import gradviz
from gradviz import EventKind

GALLERY = Path(__file__).resolve().parents[2] / "gallery"


def test_seed_variables_named() -> None:
    trace = gradviz.trace_script(GALLERY / "plot_02_data_silent.py")
    a, out, c = trace.tensor("a"), trace.tensor("out"), trace.tensor("c")
    assert (a.names, out.names, c.names) == (["a"], ["out"], ["c"])
    assert (a.label, out.label, c.label) == ("a", "out", "c")
    assert len({a.id, out.id, c.id}) == 3
    assert trace.nodes[out.grad_fn].name == "TanhBackward0"


def test_testdetach_parameters_and_modules_named() -> None:
    trace = gradviz.trace_script(GALLERY / "plot_01_testdetach.py")
    w1, w2 = trace.tensor("layer1.weight"), trace.tensor("layer2.weight")
    assert (w1.shape, w2.shape) == ([3, 4], [2, 3])
    assert (w1.label, w2.label) == ("model.layer1.weight", "model.layer2.weight")  # found by attribute path too
    assert w1.origin == w2.origin == "parameter"
    leaves = {trace.nodes[n].variable for n in trace.nodes if trace.nodes[n].name == "AccumulateGrad"}
    assert leaves == {w1.id, w2.id}
    # the nodes a module's forward made are attributed to it
    mm_modules = [n.module for n in trace.nodes.values() if n.name == "MmBackward0"]
    assert set(mm_modules) == {"model.layer1", "model.layer2"}  # from the variable holding the model
    assert trace.tensor("w1_before").names == ["w1_before"]


def test_names_in_functions_and_aliases(trace_of, line_of) -> None:
    text = """
    import torch

    def poison(weights):
        hidden = weights * 2
        view_of_hidden = hidden[1:]
        alias = hidden.data
        alias.mul_(0)
        return hidden

    w = torch.ones(3, requires_grad=True)
    result = poison(w)
    """
    trace = trace_of(text)
    assert trace.exception is None
    hidden = trace.tensor("hidden")
    assert "result" in hidden.names  # the same tensor under its name at the call site
    assert trace.tensor("weights").id == trace.tensor("w").id
    assert trace.tensor("view_of_hidden").source == hidden.id
    alias = trace.tensor("alias")
    assert alias.source == hidden.id and alias.origin == "data"
    event = trace.events_of(EventKind.DATA_GET)[0]
    assert event.data["expression"] == "hidden"
    assert event.location.line == line_of(text, "alias = hidden.data")


def test_unnamed_temporaries_are_labelled_by_where_they_were_made() -> None:
    with gradviz.trace() as t:
        a = torch.ones(2, requires_grad=True)
        total = (a * 2).sum()
    line = sys._getframe().f_lineno - 1
    temporary = [r for r in t.tensors.values() if not r.names and r.parameter is None]
    assert temporary, "the product a * 2 is never bound to a name"
    for record in temporary:  # the one naming rule: shape and line, never the recorder's id (`t1`)
        assert record.label.endswith(f"] tensor made at line {line}") and record.id not in record.label
    assert t.tensor("total").label == "total"


def test_parameter_name_wins_over_variable_name() -> None:
    with gradviz.trace() as t:
        model = torch.nn.Sequential(torch.nn.Linear(2, 2))
        w = model[0].weight
        model(torch.ones(1, 2)).sum().backward()
    record = t.tensor("model.0.weight")
    assert record.parameter == "model.0.weight"
    assert "w" in record.names
    assert record.label == "model.0.weight"
    assert t.tensor("0.weight").id == record.id  # the attribute path alone finds it while only one model has it
    assert t.tensor("w").id == record.id


def test_parameters_called_only_through_submodules_get_the_outer_name() -> None:
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = torch.nn.Sequential(torch.nn.Linear(2, 2))
            self.head = torch.nn.Linear(2, 1)

    net = Net()
    frozen = torch.nn.Linear(2, 2)
    with gradviz.trace() as t:
        net.head(net.encoder(torch.randn(3, 2))).sum().backward()
        torch.optim.SGD(frozen.parameters(), lr=0.1).step()
    names = {x.parameter for x in t.tensors.values() if x.parameter}
    assert names == {"net.encoder.0.weight", "net.encoder.0.bias", "net.head.weight", "net.head.bias",
                     "frozen.weight", "frozen.bias"}


def test_parameters_named_alike_in_two_models_get_the_model_variable_in_front() -> None:
    """A GAN's generator and discriminator both have `0.weight`: findings must say which one."""
    with gradviz.trace() as t:
        G = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
        D = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
        head = torch.nn.Linear(3, 1)  # its `weight` is unique: stays short
        frozen = torch.nn.Linear(2, 2)  # never called: named at the end, from the namespace
        D(G(torch.randn(5, 2))).sum().backward()
        head(torch.randn(1, 3))
    labels = {t.tensors[tid].label for tid in t.tensors if t.tensors[tid].parameter}
    assert {"G.0.weight", "G.0.bias", "G.2.weight", "D.0.weight", "D.2.bias"} <= labels
    assert not {"0.weight", "2.bias"} & labels
    # `weight` of head and of frozen are alike too: both get their variable
    assert {"head.weight", "frozen.weight"} <= labels
    backward = t.events_of(EventKind.BACKWARD)[0]
    assert t.tensor("G.0.weight").id in backward.data["reached_leaves"]


def test_alike_parameters_named_from_the_calling_function() -> None:
    """Models that live only inside a function: their variable names come from the frame that calls them."""

    def train_once() -> None:
        encoder, head = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
        head(encoder(torch.ones(1, 2))).sum().backward()

    with gradviz.trace() as t:
        train_once()
    labels = sorted(r.label for r in t.tensors.values() if r.parameter)
    assert labels == ["encoder.bias", "encoder.weight", "head.bias", "head.weight"]


def test_an_outer_model_names_its_submodules_parameters_uniquely() -> None:
    class Pair(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)

    with gradviz.trace() as t:
        pair = Pair()
        pair.a(torch.ones(1, 2))
        pair.b(torch.ones(1, 2))
    labels = sorted(r.label for r in t.tensors.values() if r.parameter)
    assert labels == ["pair.a.bias", "pair.a.weight", "pair.b.bias", "pair.b.weight"]  # the outer model's variable


def test_model_names_come_from_the_program_not_from_a_helper() -> None:
    """`forward(model, x)` called for both models: `model` tells nothing apart; the program's own names do."""

    def forward(model, x):
        return model(x)

    with gradviz.trace() as t:
        G = torch.nn.Sequential(torch.nn.Linear(2, 2))
        layer = torch.nn.Linear(2, 1)
        D = torch.nn.Sequential(layer)  # named from `layer` first, then from `D` at the end
        forward(D, forward(G, torch.randn(3, 2))).sum().backward()
    labels = sorted(r.label for r in t.tensors.values() if r.parameter)
    assert labels == ["D.0.bias", "D.0.weight", "G.0.bias", "G.0.weight"]


def test_two_models_held_by_one_variable_one_after_the_other_never_share_names() -> None:
    def build_and_run() -> None:
        for _ in range(2):  # two models, both only ever called `model`
            model = torch.nn.Linear(2, 1)
            model(torch.ones(1, 2)).sum().backward()

    with gradviz.trace() as t:
        build_and_run()
    labels = sorted(r.label for r in t.tensors.values() if r.parameter)
    assert labels == ["model#2.bias", "model#2.weight", "model.bias", "model.weight"]


def test_a_reloaded_model_is_named_apart_from_the_trained_one(tmp_path) -> None:
    """word_language_model: `import model`, `model = model.RNNModel(...)`, train, then `model = torch.load(f)`."""
    (tmp_path / "nets.py").write_text("from torch import nn\nclass Net(nn.Module):\n    def __init__(self):\n"
                                      "        super().__init__()\n        self.encoder = nn.Linear(2, 2)\n"
                                      "    def forward(self, x):\n        return self.encoder(x)\n", encoding="utf-8")
    script = tmp_path / "main.py"
    script.write_text(
        "import sys, torch\nsys.path.insert(0, %r)\nimport nets as model\nmodel = model.Net()\n"
        "model(torch.ones(1, 2)).sum().backward()\ntorch.save(model, %r)\n"
        "model = torch.load(%r, weights_only=False)\nmodel(torch.ones(1, 2)).sum().backward()\n"
        % (str(tmp_path), str(tmp_path / "m.pt"), str(tmp_path / "m.pt")), encoding="utf-8")
    trace = gradviz.trace_script(script)
    assert trace.exception is None
    assert sorted(r.parameter for r in trace.tensors.values() if r.parameter) == [
        "model#2.encoder.bias", "model#2.encoder.weight", "model.encoder.bias", "model.encoder.weight"]
    assert {n.module for n in trace.nodes.values() if n.module} == {"model.encoder", "model#2.encoder"}


def _parameters_named(tmp_path: Path, text: str, **window: int) -> list[str]:
    script = tmp_path / "program.py"
    script.write_text(text, encoding="utf-8")
    trace = gradviz.trace_script(script, **window)
    return sorted(r.parameter for r in trace.tensors.values() if r.parameter)


SUBMODULES_CALLED_IN_MAIN = """
import torch
from torch import nn

class AE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.decoder = nn.Linear(4, 2), nn.Linear(2, 4)

def main():
    model = AE()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(3, 4)
        loss = ((model.decoder(model.encoder(x)) - x) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

main()
"""


def test_submodules_called_on_their_own_are_named_from_the_model_with_and_without_a_window(tmp_path) -> None:
    """`model.encoder(x)` in a function: `model.encoder.weight` whether the run ends in main() or a window closes."""
    expected = ["model.decoder.bias", "model.decoder.weight", "model.encoder.bias", "model.encoder.weight"]
    assert _parameters_named(tmp_path, SUBMODULES_CALLED_IN_MAIN) == expected
    assert _parameters_named(tmp_path, SUBMODULES_CALLED_IN_MAIN, steps=1) == expected


ALIASED_MODEL = """
import torch
from torch import nn
model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
raw_model = model
opt = torch.optim.SGD(raw_model.parameters(), lr=0.1)
for _ in range(3):
    loss = model(torch.randn(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_two_variables_holding_one_model_name_it_by_the_first_bound(tmp_path) -> None:
    """nanoGPT's `raw_model = model`: `model.…` in every run, never `raw_model.…` at the end of one."""
    expected = ["model.0.bias", "model.0.weight", "model.2.bias", "model.2.weight"]
    assert _parameters_named(tmp_path, ALIASED_MODEL) == expected
    assert _parameters_named(tmp_path, ALIASED_MODEL, steps=1) == expected


LIGHTNING_STYLE = """
import torch
from torch import nn

class Lit(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 1)
    def forward(self, x):
        return self.net(x)
    def training_step(self, x):
        return self(x).pow(2).mean()

class Trainer:
    def fit(self, module, steps):
        opt = torch.optim.SGD(module.parameters(), lr=0.1)
        for _ in range(steps):
            loss = module.training_step(torch.randn(2, 4))
            opt.zero_grad()
            loss.backward()
            opt.step()

def main():
    m = Lit()
    Trainer().fit(m, 3)

main()
"""


def test_a_model_called_as_self_is_named_by_the_programs_variable(tmp_path) -> None:
    """A LightningModule calling `self(x)` from `training_step`: `m.net.weight` (the program's variable), not
    `self.net.weight`, with and without a window."""
    assert _parameters_named(tmp_path, LIGHTNING_STYLE) == ["m.net.bias", "m.net.weight"]
    assert _parameters_named(tmp_path, LIGHTNING_STYLE, steps=1) == ["m.net.bias", "m.net.weight"]


HELD_BY_AN_OBJECT = """
import torch
from torch import nn

class Holder:
    pass

h = Holder()
h.net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
opt = torch.optim.SGD(h.net.parameters(), lr=0.1)
for _ in range(2):
    loss = h.net(torch.randn(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_model_held_by_an_attribute_is_named_by_its_path(tmp_path) -> None:
    """A `Sequential` no variable holds itself (`h.net`): `h.net.0.weight`, never a bare `0.weight`."""
    assert _parameters_named(tmp_path, HELD_BY_AN_OBJECT) == ["h.net.0.bias", "h.net.0.weight", "h.net.2.bias", "h.net.2.weight"]


HELD_BY_A_TRAINER = """
import torch
from torch import nn

class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
    def step(self):
        loss = self.model(torch.randn(2, 4)).sum()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

def main():
    trainer = Trainer(nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1)))
    for _ in range(3):
        trainer.step()

main()
"""


def test_a_model_no_variable_holds_is_named_by_the_object_holding_it(tmp_path) -> None:
    """A `Sequential` built inline and kept by a trainer object in main(): `trainer.model.0.weight` with and without
    a window, never a bare `0.weight`."""
    expected = ["trainer.model.0.bias", "trainer.model.0.weight", "trainer.model.2.bias", "trainer.model.2.weight"]
    assert _parameters_named(tmp_path, HELD_BY_A_TRAINER) == expected
    assert _parameters_named(tmp_path, HELD_BY_A_TRAINER, steps=1) == expected


def test_ops_are_named_by_the_function_the_program_called_not_a_sibling_sharing_its_binding() -> None:
    # torch.overrides.resolve_name(torch.mm) is "torch.spmm" (and dsmm -> spmm, saddmm -> sspaddmm)
    with gradviz.trace() as t:
        w = torch.randn(3, 4, requires_grad=True)
        x = torch.randn(2, 4)
        y = torch.relu(torch.mm(x, w.T))
        v = x.mm(w.T)
    ops = {name: t.tensor(name).op for name in ("y", "v")}
    assert ops == {"y": "relu", "v": "Tensor.mm"}
    unnamed = [r for r in t.tensors.values() if r.origin == "op" and not r.names]
    assert "mm" in {r.op for r in unnamed} and "spmm" not in {r.op for r in t.tensors.values()}


def test_buffers_are_named_like_parameters_not_by_their_factory(trace_of, line_of) -> None:
    text = """
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)
            self.batchnorm = nn.BatchNorm1d(3)

        def forward(self, x):
            return self.batchnorm(self.fc(x))

    model = Net()
    for step in range(2):
        model(torch.randn(5, 4)).sum().backward()
    """
    trace = trace_of(text)
    from gradviz.analysis.names import Namer

    namer = Namer(trace)
    buffers = sorted(t.buffer for t in trace.tensors.values() if t.buffer)
    assert buffers == [f"model.batchnorm.{b}" for b in ("num_batches_tracked", "running_mean", "running_var")]
    counter = trace.tensor("model.batchnorm.num_batches_tracked")
    assert counter.parameter is None and counter.origin != "parameter"  # a buffer is not a parameter
    assert namer.tensor(counter.id) == counter.label == "model.batchnorm.num_batches_tracked"
    writes = [e for e in trace.events_of(EventKind.INPLACE_WRITE) if e.location.line == line_of(text, "return self.batchnorm")]
    assert [e.tensor for e in writes if not e.data.get("unversioned")] == [counter.id] * 2  # `+= 1`, once a step
    # and the running statistics, updated in train mode without a version change: a write each, once a step
    stats = sorted(trace.tensors[e.tensor].buffer for e in writes if e.data.get("unversioned"))
    assert stats == [f"model.batchnorm.{b}" for b in ("running_mean", "running_mean", "running_var", "running_var")]
