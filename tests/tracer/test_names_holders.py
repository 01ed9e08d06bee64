"""Names of models the program keeps in dicts, lists and objects, reaches through a loop variable, or wraps
(torch.compile, DDP, checkpoint wrappers): the same parameter and module-box names in the trace and in the graph,
with and without a step window."""

from __future__ import annotations

import html
import re
import textwrap
from pathlib import Path

import pytest
import torch

import gradviz
from gradviz.model import Trace
from gradviz.render import render

# (the sentinel off: with one step in the window, step 2's zero_grad runs code step 1's did not, and is traced again)
WINDOWS = [pytest.param({}, id="whole-run"), pytest.param({"steps": 1, "sentinel": False}, id="steps-1")]


def _trace(tmp_path: Path, text: str, argv: tuple[str, ...] = (), **window: int) -> Trace:
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    trace = gradviz.trace_script(script, argv, **window)
    assert trace.exception is None, trace.exception
    return trace


def _parameters(trace: Trace) -> list[str]:
    return sorted(r.parameter for r in trace.tensors.values() if r.parameter)


def _modules(trace: Trace) -> list[str]:
    return sorted({n.module for n in trace.nodes.values() if n.module})


def _boxes(trace: Trace, depth: int) -> list[str]:
    """The titles of the module boxes the graph view draws at `depth`, read back from the DOT."""
    source = render(trace, "graph", depth=depth).source
    return sorted(html.unescape(m) for m in re.findall(r"group\d+ \[label=<<B>(.*?)</B>", source))


def _parameter_nodes(trace: Trace) -> list[str]:
    """The parameters the graph view draws (every op, depth "all"), read back from the DOT."""
    source = render(trace, "graph", depth="all").source
    return sorted({html.unescape(m) for m in re.findall(r"_var \[label=<(.*?)<BR/>", source)})


GAN_IN_A_DICT = """
import torch
from torch import nn

class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 3))
    def forward(self, z):
        return self.main(z)

def main():
    models = {"G": Generator(), "D": nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))}
    nets = [nn.Linear(3, 3), nn.Linear(3, 3)]
    params = [p for m in [*models.values(), *nets] for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.1)
    for _ in range(3):
        loss = models["D"](nets[1](nets[0](models["G"](torch.randn(2, 2))))).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()

main()
"""
GAN_IN_A_DICT_PARAMETERS = sorted(
    f"{model}.{layer}.{kind}"
    for model in ('models["G"].main', 'models["D"]') for layer in (0, 2) for kind in ("weight", "bias")
) + ["nets[0].bias", "nets[0].weight", "nets[1].bias", "nets[1].weight"]


@pytest.mark.parametrize("window", WINDOWS)
def test_models_kept_in_a_dict_or_list_are_named_by_subscript(tmp_path: Path, window: dict[str, int]) -> None:
    """`models["G"](z)`, `nets[0](x)`: named as the program reaches them, never `Generator`, `main.0.weight` or a
    bare `weight`."""
    trace = _trace(tmp_path, GAN_IN_A_DICT, **window)
    assert _parameters(trace) == GAN_IN_A_DICT_PARAMETERS
    assert _modules(trace) == ['models["D"].0', 'models["D"].1', 'models["D"].2', 'models["G"].main.0',
                               'models["G"].main.1', 'models["G"].main.2', "nets[0]", "nets[1]"]
    assert _boxes(trace, 0) == ['models["D"]', 'models["G"]', "nets[0]", "nets[1]"]
    assert _parameter_nodes(trace) == GAN_IN_A_DICT_PARAMETERS


MODELS_IN_A_TRAINER = """
import torch
from torch import nn

class Trainer:
    def __init__(self):
        self.models = {"enc": nn.Linear(4, 3), "dec": nn.Linear(3, 4)}
        self.heads = [nn.Linear(4, 1)]
        params = [p for m in [*self.models.values(), *self.heads] for p in m.parameters()]
        self.opt = torch.optim.SGD(params, lr=0.1)

    def step(self):
        x = torch.randn(2, 4)
        loss = self.heads[0](self.models["dec"](self.models["enc"](x))).sum()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

def main():
    trainer = Trainer()
    for _ in range(3):
        trainer.step()

main()
"""


@pytest.mark.parametrize("window", WINDOWS)
def test_models_in_an_objects_dict_are_named_from_the_programs_variable(tmp_path: Path, window: dict[str, int]) -> None:
    """`self.models["enc"](x)` in a trainer's method: `trainer.models["enc"]` (main's variable), not `self.…`."""
    trace = _trace(tmp_path, MODELS_IN_A_TRAINER, **window)
    expected = ['trainer.heads[0].bias', 'trainer.heads[0].weight', 'trainer.models["dec"].bias',
                'trainer.models["dec"].weight', 'trainer.models["enc"].bias', 'trainer.models["enc"].weight']
    assert _parameters(trace) == expected
    assert _boxes(trace, 1) == ["trainer.heads[0]", 'trainer.models["dec"]', 'trainer.models["enc"]']
    assert _parameter_nodes(trace) == expected


LAYERS_IN_A_LOOP = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

def run(model, x):
    enc = model.encoder
    x = enc(x)
    for layer in model.layers:
        x = layer(x)
    return x

def main():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = run(model, torch.randn(2, 4)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()

main()
"""


@pytest.mark.parametrize("window", WINDOWS)
def test_a_loop_variable_over_layers_names_each_layer_from_the_model(tmp_path: Path, window: dict[str, int]) -> None:
    """`for layer in model.layers: layer(x)` and `enc = model.encoder; enc(x)`: each layer by the model's path
    (`model.layers.1`), never three boxes called `layer` or a bare `weight`."""
    trace = _trace(tmp_path, LAYERS_IN_A_LOOP, **window)
    expected = sorted(f"model.{layer}.{kind}" for layer in ("encoder", "layers.0", "layers.1", "layers.2")
                      for kind in ("weight", "bias"))
    assert _parameters(trace) == expected
    assert _modules(trace) == ["model.encoder", "model.layers.0", "model.layers.1", "model.layers.2"]
    assert _boxes(trace, 2) == ["model.encoder", "model.layers.0", "model.layers.1", "model.layers.2"]
    assert _parameter_nodes(trace) == expected


WRAPPED_GPT = """
import sys, tempfile
import torch
from torch import nn
from torch.nn import functional as F

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(8)
        self.c_attn = nn.Linear(8, 8)
    def forward(self, x):
        return x + self.c_attn(self.ln_1(x))

class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(16, 8), h=nn.ModuleList([Block(), Block()])))
        self.lm_head = nn.Linear(8, 16)
    def forward(self, idx):
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(x)

torch.manual_seed(0)
wrapper = sys.argv[1]
model = GPT()
if wrapper == "compile":
    model = torch.compile(model, backend="eager")
elif wrapper == "ddp":
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{tempfile.mkdtemp()}/store", rank=0, world_size=1)
    model = nn.parallel.DistributedDataParallel(model)
elif wrapper == "checkpoint_wrapper":
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    for i, block in enumerate(model.transformer.h):
        model.transformer.h[i] = checkpoint_wrapper(block)
raw_model = model.module if wrapper == "ddp" else getattr(model, "_orig_mod", model)  # bound after `model`
optimizer = torch.optim.AdamW(raw_model.parameters(), lr=1e-3)
for _ in range(3):
    idx = torch.randint(0, 16, (2, 4))
    loss = F.cross_entropy(model(idx).view(-1, 16), idx.view(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
if wrapper == "ddp":
    dist.destroy_process_group()
"""
GPT_PARAMETERS = sorted(
    ["model.lm_head.bias", "model.lm_head.weight", "model.transformer.wte.weight"]
    + [f"model.transformer.h.{i}.{layer}.{kind}" for i in (0, 1) for layer in ("ln_1", "c_attn") for kind in ("weight", "bias")]
)
GPT_MODULES = sorted(
    ["model.lm_head", "model.transformer.wte"]
    + [f"model.transformer.h.{i}{part}" for i in (0, 1) for part in ("", ".ln_1", ".c_attn")]
)


@pytest.mark.parametrize("wrapper", ["ddp", "checkpoint_wrapper", pytest.param("compile", marks=pytest.mark.slow)])
@pytest.mark.parametrize("window", WINDOWS)
def test_wrappers_leave_the_names_of_the_model_they_wrap(tmp_path: Path, wrapper: str, window: dict[str, int]) -> None:
    """`torch.compile(model)` (`_orig_mod`), DDP (`module`), `checkpoint_wrapper` (`_checkpoint_wrapped_module`):
    the parameters and module boxes are named as without the wrapper, by the variable the program calls (nanoGPT's
    `model`, not the `raw_model` it keeps the unwrapped model in)."""
    plain = _trace(tmp_path, WRAPPED_GPT, ("none",), **window)
    wrapped = _trace(tmp_path, WRAPPED_GPT, (wrapper,), **window)
    assert _parameters(plain) == _parameters(wrapped) == GPT_PARAMETERS
    assert _parameter_nodes(wrapped) == GPT_PARAMETERS
    assert _modules(plain) == GPT_MODULES
    if wrapper != "compile":  # compiled code runs without module hooks: its ops carry no module at all
        assert _modules(wrapped) == GPT_MODULES
        assert _boxes(wrapped, 3) == _boxes(plain, 3) == ["model.lm_head", "model.transformer.h.0",
                                                          "model.transformer.h.1", "model.transformer.wte"]


def test_only_small_containers_are_looked_into() -> None:
    """A list of up to 64 entries names its models; a bigger table (a vocabulary, a dataset) is never searched, so
    naming stays as cheap as before: its model keeps its attribute path (`weight`)."""

    def run(nets: list) -> None:
        nets[-1](torch.ones(1, 2)).sum().backward()

    with gradviz.trace() as t:
        small = [torch.nn.Linear(2, 1) for _ in range(64)]
        run(small)
    with gradviz.trace() as big_trace:
        table = [None] * 100_000 + [torch.nn.Linear(2, 1)]
        run(table)
    assert t.tensor("small[63].weight").parameter == "small[63].weight"
    assert sorted(r.parameter for r in big_trace.tensors.values() if r.parameter) == ["bias", "weight"]


MODEL_PASSED_TO_A_HELPER = """
import torch
from torch import nn

def train(net, opt):
    loss = net(torch.randn(2, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()

def main():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        train(model, opt)

main()
"""


@pytest.mark.parametrize("window", WINDOWS)
def test_a_model_passed_to_a_helper_is_named_by_the_outer_variable(tmp_path: Path, window: dict[str, int]) -> None:
    """pytorch/examples' `train(net, ...)` called with main()'s `model`: `model.0.weight` and a `model` box with and
    without a window (it was `net` in a whole run, `model` when a window closed while main() was still running)."""
    trace = _trace(tmp_path, MODEL_PASSED_TO_A_HELPER, **window)
    expected = ["model.0.bias", "model.0.weight", "model.2.bias", "model.2.weight"]
    assert _parameters(trace) == expected
    assert _modules(trace) == ["model.0", "model.1", "model.2"]
    assert _boxes(trace, 0) == ["model"]
    assert _parameter_nodes(trace) == expected
