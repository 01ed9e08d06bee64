"""A torch.compile'd model runs under the tracer with the same results and no warnings the program did not cause."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = """\
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
fast = torch.compile(model, backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = fast(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
print("loss", round(loss.item(), 6))
"""


@pytest.mark.slow
def test_compiled_model_is_traced_without_extra_warnings(tmp_path: Path) -> None:
    (tmp_path / "compiled.py").write_text(SCRIPT)
    plain = subprocess.run([sys.executable, "compiled.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    traced = subprocess.run(
        [sys.executable, "-m", "gradviz", "render", "compiled.py", "-q", "-o", "g.dot"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert plain.returncode == 0 and traced.returncode == 0, traced.stderr
    assert plain.stdout.splitlines()[-1] == traced.stdout.splitlines()[0]  # the same loss, printed by the script
    assert traced.stderr == plain.stderr  # the program's own warnings, and none of gradviz's
    # (torch warns the plain program on Python 3.13.0 that its guards may run slower there: the only one it may give)
    assert re.sub(r".*: RuntimeWarning: Guards may run slower on Python 3\.13\.0\..*\n  warnings\.warn\(\n", "",
                  plain.stderr) == ""
    assert "AddmmBackward0" in (tmp_path / "g.dot").read_text()


def _compiled_run(backend: str, fullgraph: bool) -> list[torch.Tensor]:
    """Two steps of a compiled function and a compiled module: every output and gradient, copied."""
    torch._dynamo.reset()  # compile afresh: the traced run must compile under the tracer, not reuse the plain one's code
    torch.manual_seed(0)

    @torch.compile(backend=backend, fullgraph=fullgraph)
    def f(a: torch.Tensor) -> torch.Tensor:
        return (a.sin() * 2 + a.cos()).sum()

    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    compiled = torch.compile(model, backend=backend, fullgraph=fullgraph)
    a = torch.arange(5.0, requires_grad=True)
    results = []
    for _ in range(2):
        out = f(a)
        out.backward()
        loss = compiled(torch.randn(3, 4)).pow(2).mean()
        loss.backward()
        results += [out.detach().clone(), a.grad.clone(), loss.detach().clone()]
        results += [p.grad.clone() for p in model.parameters()]
    return results


@pytest.mark.parametrize(
    "backend",
    ["eager", "aot_eager", pytest.param("inductor", marks=[pytest.mark.slow, pytest.mark.skipif(
        shutil.which("gcc") is None and shutil.which("cc") is None, reason="inductor needs a C compiler")])],
)
@pytest.mark.parametrize("fullgraph", [False, True], ids=["graph-breaks-allowed", "fullgraph"])
def test_compiled_values_are_bit_identical_under_tracing(backend: str, fullgraph: bool) -> None:
    """While dynamo compiles, the recorder steps aside: a scalar stays a scalar, gradients stay exact."""
    import gradviz

    plain = _compiled_run(backend, fullgraph)
    with gradviz.trace() as trace:
        traced = _compiled_run(backend, fullgraph)
    assert [t.shape for t in traced] == [t.shape for t in plain]
    assert traced[0].shape == torch.Size([])  # the sum, not the first op's [5] result
    for got, want in zip(traced, plain):
        assert torch.equal(got, want)
    assert trace.internal_errors == []
    # the program around the compiled calls is still recorded: the loss's pow and mean, and its backward
    assert any(n.name == "MeanBackward0" for n in trace.nodes.values())
    assert sum(e.kind.value == "backward" for e in trace.events) == 4
    # the compiled code's own aten ops (run under no_grad by aot_eager and inductor) are not taken for the program's:
    # no parameter looks dead, no finding points into torch.fx's generated code
    assert gradviz.diagnose(trace) == []


def _ops_recorded(backend: str) -> list[str]:
    """The ops of the tensors recorded over two steps of a compiled model (the first step compiles it)."""
    import gradviz

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    compiled = torch.compile(model, backend=backend)
    with gradviz.trace() as trace:
        for _ in range(2):
            compiled(torch.randn(3, 4)).pow(2).mean().backward()
    assert trace.internal_errors == [] and gradviz.diagnose(trace) == []
    return sorted(t.op for t in trace.tensors.values() if t.op is not None)


def test_a_graph_the_compiler_runs_through_torch_fx_interpreter_is_not_recorded_as_the_programs() -> None:
    """torch 2.8's aot_eager (and eager_debug on every torch) runs the compiled graph with torch.fx's Interpreter, not
    as generated code: its ops (aot_eager's `aten.t` of a weight under no_grad, a leaf that requires grad) were taken
    for the program's, and the weights looked dead. Recorded as for the eager backend: the program's own ops only."""
    assert _ops_recorded("eager_debug") == _ops_recorded("eager")
    assert "nn.functional.linear" not in _ops_recorded("eager_debug")


def test_the_programs_own_fx_interpreter_is_recorded() -> None:
    """An Interpreter the program runs itself (not the compiler) runs the program's ops: they are recorded."""
    import gradviz

    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
    graph = torch.fx.symbolic_trace(model)
    with gradviz.trace() as trace:
        torch.fx.Interpreter(graph).run(torch.randn(3, 4)).sum().backward()
    ops = [t.op for t in trace.tensors.values()]
    assert "nn.functional.linear" in ops and "nn.functional.relu" in ops
    assert gradviz.diagnose(trace) == []
