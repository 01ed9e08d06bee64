"""--verify puts back, for each saved tensor, the bytes it held at its own save: a tensor saved again after the
write keeps the written bytes. Every number is checked against PyTorch with every saved tensor cloned at save time,
at every step of a training loop."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

import gradviz
from gradviz import EventKind
from gradviz.analysis import FindingKind, Severity, diagnose

DATA = Path(__file__).parent / "data" / "verify"
LOOP = DATA / "loop_clamp.py"


def _clone_at_save() -> Any:
    return torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t)


def replay(program: Path) -> tuple[list[dict[str, torch.Tensor]], list[dict[str, torch.Tensor]]]:
    """Per optimizer step of the program run plainly: the gradients it got, and the ones PyTorch gives from the same
    parameters and batch with every saved tensor cloned at save time (the program's `train_step` run again)."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    got: list[dict[str, torch.Tensor]] = []
    params: list[dict[str, torch.Tensor]] = []

    def capture(optimizer: Any, args: Any, kwargs: Any) -> None:
        modules = {k: v for k, v in namespace.items() if isinstance(v, torch.nn.Module)}
        named = {f"{m}.{n}": p for m, module in modules.items() for n, p in module.named_parameters()}
        got.append({name: p.grad.clone() for name, p in named.items()})
        params.append({name: p.detach().clone() for name, p in named.items()})

    handle = register_optimizer_step_pre_hook(capture)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(program.read_text(), str(program), "exec"), namespace)
    finally:
        handle.remove()
    modules = {k: v for k, v in namespace.items() if isinstance(v, torch.nn.Module)}
    named = {f"{m}.{n}": p for m, module in modules.items() for n, p in module.named_parameters()}
    intact = []
    for step, (x, y) in enumerate(zip(namespace["batches"], namespace["targets"])):
        with torch.no_grad():
            for name, p in named.items():
                p.copy_(params[step][name])
        for p in named.values():
            p.grad = None
        with _clone_at_save():
            loss = namespace["train_step"](x, y)
        loss.backward()
        intact.append({name: p.grad.clone() for name, p in named.items()})
    return got, intact


def measured_rows(trace: gradviz.Trace) -> list[dict[str, dict[str, Any]]]:
    """Each backward's measurement, its rows by parameter name."""
    out = []
    for event in trace.events_of(EventKind.BACKWARD):
        record = event.data["verify"]
        out.append({trace.tensors[row["tensor"]].parameter: row for row in record["gradients"]})
    return out


def _expected(got: torch.Tensor, intact: torch.Tensor) -> dict[str, float]:
    a, b = got.double().flatten(), intact.double().flatten()
    difference = (a - b).abs().max().item()
    return {
        "max_abs": difference,
        "max_rel": difference / b.abs().max().item(),
        "cosine": (a @ b / (a.norm() * b.norm())).item(),
        "norm_ratio": (a.norm() / b.norm()).item(),
    }


def test_every_step_of_a_loop_matches_clone_at_save() -> None:
    got, intact = replay(LOOP)
    assert len(got) == 24
    with contextlib.redirect_stdout(io.StringIO()):
        trace = gradviz.trace_script(LOOP, verify=True)
    rows = measured_rows(trace)
    assert len(rows) == 24
    wrong_steps = []
    for step, (program, truth, measured) in enumerate(zip(got, intact, rows), start=1):
        assert measured.keys() == program.keys()
        for name, row in measured.items():
            expected = _expected(program[name], truth[name])
            assert row["max_abs"] == pytest.approx(expected["max_abs"], rel=1e-5, abs=1e-7), (step, name)
            assert row["max_rel"] == pytest.approx(expected["max_rel"], rel=1e-4, abs=1e-7), (step, name)
            assert row["cosine"] == pytest.approx(expected["cosine"], abs=1e-6), (step, name)
            assert row["norm_ratio"] == pytest.approx(expected["norm_ratio"], rel=1e-6), (step, name)
            if expected["max_abs"] > 0:
                wrong_steps.append((step, name))
    # tanh's backward reads 1 - h^2: wrong only where the clamp bit (steps 3 and 9), and never for fc2, which saved
    # h after the clamp (restoring the old bytes for it too gave fc2.weight a made-up error at every loud step)
    assert {step for step, _ in wrong_steps} == {3, 9}
    assert {name for _, name in wrong_steps} == {"fc1.weight", "fc1.bias"}


def test_tensor_saved_again_after_the_write_keeps_the_written_bytes() -> None:
    program = DATA / "relu_clamp_saved_again.py"
    with contextlib.redirect_stdout(io.StringIO()):
        trace = gradviz.trace_script(program, verify=True)
    (rows,) = measured_rows(trace)
    assert {name: row["max_abs"] for name, row in rows.items()} == dict.fromkeys(
        ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"], 0.0
    )
    (finding,) = [f for f in diagnose(trace) if f.kind is FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR]
    assert finding.severity is Severity.INFO
    assert "gradients identical" in finding.message and "silently wrong" not in finding.message


def test_bytes_and_data_given_back_after_the_measurement() -> None:
    """The measuring run swaps fc2's saved h onto a private copy and writes relu's bytes back: afterwards the
    program's h holds its own storage, the clamped values and version, as untraced."""
    namespace: dict[str, Any] = {}
    forward, backward = (DATA / "relu_clamp_saved_again.py").read_text().split("out.pow(2)")
    with gradviz.trace(verify=True):
        exec(compile(forward, "forward", "exec"), namespace)
        h = namespace["h"]
        where, values = h.untyped_storage().data_ptr(), h.clone()
        exec(compile("out.pow(2)" + backward, "backward", "exec"), namespace)
    assert h.untyped_storage().data_ptr() == where  # its data swapped back, not left on the private copy
    assert torch.equal(h, values) and h.max().item() == 1.0 and h._version == 0


def _run_grads(text: str) -> dict[str, torch.Tensor]:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(text, "program", "exec"), namespace)
    modules = {k: v for k, v in namespace.items() if isinstance(v, torch.nn.Module)}
    return {f"{m}.{n}": p.grad.clone() for m, module in modules.items() for n, p in module.named_parameters()}


@pytest.mark.parametrize(
    ("line", "write"), [(11, "h.data.clamp_(max=1.0)"), (13, "gate.data.mul_(0.5)")], ids=["harmless", "harmful"]
)
def test_each_write_of_a_graph_is_measured_alone(line: int, write: str) -> None:
    """Two silent writes into one graph: each finding says what undoing its own write changes, the other left in
    place, as PyTorch gives it with a clone taken just before that write (every earlier save keeps the old bytes)."""
    program = DATA / "two_bugs.py"
    text = program.read_text()
    variable = write.split(".", 1)[0]
    plain = _run_grads(text)
    intact = _run_grads(text.replace(write, f"{variable} = {variable}.clone(); {write}"))
    with contextlib.redirect_stdout(io.StringIO()):
        trace = gradviz.trace_script(program, verify=True)
    (finding,) = [
        f for f in diagnose(trace) if f.kind is FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR and f.line == line
    ]
    measured = finding.measured
    assert measured is not None and measured.alone and measured.others == [24 - line]
    rows = {g.name.strip("`"): g for g in measured.gradients}
    assert rows.keys() == plain.keys()
    for name, row in rows.items():
        expected = (plain[name].double() - intact[name].double()).abs().max().item()
        assert row.max_abs == pytest.approx(expected, rel=1e-5, abs=1e-9), name
    # and the graph's measurement with both undone: PyTorch with every saved tensor cloned at save time
    with _clone_at_save():
        both = _run_grads(text)
    (joint,) = measured_rows(trace)
    for name, row in joint.items():
        expected = (plain[name].double() - both[name].double()).abs().max().item()
        assert row["max_abs"] == pytest.approx(expected, rel=1e-5, abs=1e-9), name
    if line == 11:  # relu reads the sign, fc2 saved the clamped h: nothing changes
        assert measured.identical and finding.severity is Severity.INFO
        assert "undoing this line's write alone (the other silent write into this graph, line 13, left in place)" in finding.message
    else:
        assert not measured.identical and finding.severity is Severity.ERROR
        assert {name for name, row in rows.items() if not row.identical} == {"fc3.weight", "fc3.bias"}
