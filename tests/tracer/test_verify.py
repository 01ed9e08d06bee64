"""--verify: the gradient error gradviz measures for a silent write equals what PyTorch itself gives when every saved
tensor is cloned at save time; the program runs unchanged (outputs, gradients, versions, printed text)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

import gradviz
from gradviz import EventKind, Trace
from gradviz.analysis import FindingKind, Severity, diagnose
from gradviz.analysis.findings import Finding

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "verify"

# every program with a silent write whose gradients come out wrong: the gallery's `.data` examples, the realistic
# programs of tests/programs, and a few more shapes of the same mistake (accumulation, autograd.grad, a data swap)
WRONG = [
    ROOT / "gallery" / "plot_02_data_silent.py",
    ROOT / "gallery" / "plot_14_ema_data_between.py",
    ROOT / "gallery" / "plot_16_wgan_clip_between.py",
    ROOT / "tests" / "programs" / "data_seed.py",
    ROOT / "tests" / "programs" / "ema_data_between.py",
    ROOT / "tests" / "programs" / "wgan_clip_between.py",
    ROOT / "tests" / "programs" / "p_data_reassign_saved.py",
    DATA / "accumulate.py",
    DATA / "autograd_grad.py",
    DATA / "relu_unmasked.py",
    DATA / "post_accumulate.py",
]
IDENTICAL = [DATA / "relu_masked.py", DATA / "zeros_over_zeros.py", DATA / "relu_clamp_saved_again.py"]
HOOKED = [DATA / "hooked.py", DATA / "node_hooked.py", DATA / "module_hooked.py", DATA / "old_module_hooked.py"]
# the measured backward adds onto an earlier one's .grad: the programs' gradients differ by the measured backward's
# error, but relative error and cosine are against that backward's own gradient, not the sum
ACCUMULATED = {"accumulate.py"}
# gradients a program keeps elsewhere than in .grad (autograd.grad returns them; a hook stepping in backward clears
# .grad after taking a copy): input -> the variable holding its gradient
RETURNED = {"autograd_grad.py": {"x": "gx", "w": "gw"}, "post_accumulate.py": {"w": "grad"}}


# ---------------------------------------------------------------------------------------------- running a program
@contextlib.contextmanager
def _as_main(path: Path) -> Iterator[None]:
    argv, path0 = list(sys.argv), sys.path[0]
    sys.argv, sys.path[0] = [str(path)], str(path.parent)
    try:
        yield
    finally:
        sys.argv, sys.path[0] = argv, path0


def _names(namespace: dict[str, Any]) -> dict[int, str]:
    """id(tensor) -> the name gradviz gives it: a variable, or `model.0.weight` for a model's parameter."""
    names: dict[int, str] = {}
    for variable, value in namespace.items():
        if isinstance(value, torch.nn.Module):
            for name, p in value.named_parameters():
                names.setdefault(id(p), f"{variable}.{name}")
        elif isinstance(value, torch.Tensor):
            names.setdefault(id(value), variable)
    return names


def run(path: Path, mode: str) -> tuple[str, dict[str, torch.Tensor], dict[str, dict[str, Any]], Trace | None]:
    """Run the script as `python path` would, in `mode`: plain, reference (every saved tensor cloned at save time:
    PyTorch's own answer for intact saved values), traced, verify. Returns what it printed, the gradients of its
    first optimizer step (or, without one, its leaves' .grad at the end, and the gradients autograd.grad returned),
    a snapshot of its tensors, and the trace."""
    out = io.StringIO()
    first: dict[int, torch.Tensor] = {}

    def capture(optimizer: Any, args: Any, kwargs: Any) -> None:
        if not first:
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        first[id(p)] = p.grad.clone()

    handle = register_optimizer_step_pre_hook(capture)
    tracer = gradviz.trace(verify=mode == "verify") if mode in ("traced", "verify") else None
    hooks = (
        torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t)
        if mode == "reference"
        else contextlib.nullcontext()
    )
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": str(path)}
    code = compile(path.read_text(), str(path), "exec")
    try:
        with _as_main(path), contextlib.redirect_stdout(out), hooks, tracer or contextlib.nullcontext():
            try:
                exec(code, namespace)
            except AssertionError:  # a program checking its gradients are wrong: with the reference they are right
                if mode != "reference":
                    raise
    finally:
        handle.remove()
    names = _names(namespace)
    grads = {names[key]: g for key, g in first.items() if key in names}
    if not grads:
        for key, name in names.items():
            value = next(v for v in _tensors(namespace) if id(v) == key)
            if value.is_leaf and value.grad is not None:
                grads[name] = value.grad.clone()
    for tensor, variable in RETURNED.get(path.name, {}).items():
        grads[tensor] = namespace[variable].clone()
    snapshot = {
        name: {
            "value": t.detach().clone(),
            "grad": t.grad.clone() if t.is_leaf and t.grad is not None else None,
            "version": t._version,
        }
        for name, t in ((n, v) for n, v in namespace.items() if isinstance(v, torch.Tensor) and not n.startswith("__"))
    }
    for variable, value in namespace.items():
        if isinstance(value, torch.nn.Module):
            for name, p in value.named_parameters():
                snapshot[f"{variable}.{name}"] = {
                    "value": p.detach().clone(),
                    "grad": p.grad.clone() if p.grad is not None else None,
                    "version": p._version,
                }
    return out.getvalue(), grads, snapshot, tracer.trace if tracer is not None else None


def traced(program: Path, *, verify: bool = True) -> Trace:
    """The trace `gradviz check --verify` makes of the program (its front door, naming parameters as it does)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return gradviz.trace_script(program, verify=verify)


def _tensors(namespace: dict[str, Any]) -> Iterator[torch.Tensor]:
    for value in namespace.values():
        if isinstance(value, torch.nn.Module):
            yield from value.parameters()
        elif isinstance(value, torch.Tensor):
            yield value


def _measured(trace: Trace) -> tuple[Any, dict[str, dict[str, Any]]]:
    """The first backward with a measurement, and its rows by tensor name."""
    for event in trace.events_of(EventKind.BACKWARD):
        record = event.data.get("verify")
        if record is not None and "gradients" in record:
            rows = {}
            for row in record["gradients"]:
                tensor = trace.tensors[row["tensor"]]
                rows[tensor.parameter or tensor.names[0]] = row
            return event, rows
    raise AssertionError("no backward was measured")


def _silent(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.kind is FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR]


# ---------------------------------------------------------------------------------------------- the measured error
@pytest.mark.parametrize("program", WRONG, ids=[p.stem for p in WRONG])
def test_measured_error_is_the_difference_to_cloned_saved_tensors(program: Path) -> None:
    _, plain, _, _ = run(program, "plain")
    _, reference, _, _ = run(program, "reference")
    trace = traced(program)
    assert not trace.internal_errors
    _, rows = _measured(trace)
    assert rows.keys() == plain.keys()
    wrong = 0
    for name, row in rows.items():
        got, intact = plain[name].double(), reference[name].double()
        difference = (got - intact).abs().max().item()
        assert row["max_abs"] == pytest.approx(difference, rel=1e-5, abs=1e-7), name
        wrong += difference > 0
        if program.name in ACCUMULATED:
            continue
        scale = intact.abs().max().item()
        if scale > 0:
            assert row["max_rel"] == pytest.approx(difference / scale, rel=1e-4, abs=1e-7), name
        if got.norm() > 0 and intact.norm() > 0:
            cosine = (got.flatten() @ intact.flatten() / (got.norm() * intact.norm())).item()
            assert row["cosine"] == pytest.approx(cosine, abs=1e-6), name
            assert row["flipped"] is (cosine < 0)
    assert wrong > 0  # the write does reach a gradient in each of these programs
    findings = _silent(diagnose(trace))
    assert findings and all(f.measured is not None and not f.measured.identical for f in findings)
    assert any(f.severity is Severity.ERROR and "Measured with --verify" in f.message for f in findings)


def test_gallery_data_example_numbers() -> None:
    """tanh's saved output zeroed: the program gets 1 where 1 - tanh(a)^2 is right (a = 1, 2, 3)."""
    trace = traced(ROOT / "gallery" / "plot_02_data_silent.py")
    event, rows = _measured(trace)
    right = 1 - torch.tanh(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)) ** 2
    assert rows["a"]["max_abs"] == pytest.approx(float((1 - right).max()), rel=1e-6)  # 0.990 at a = 3
    assert rows["a"]["flipped"] is False
    (finding,) = _silent(diagnose(trace))
    assert finding.measured is not None and finding.measured.backward == event.seq
    assert finding.measured.writes == [finding.events[0]]
    assert "`a`: max abs error 0.99, relative error 2.36, cosine 0.678" in finding.message


# ---------------------------------------------------------------------------------------------- writes the backward ignores
@pytest.mark.parametrize("program", IDENTICAL, ids=[p.stem for p in IDENTICAL])
def test_write_the_backward_does_not_read_is_identical_and_info(program: Path) -> None:
    _, plain, _, _ = run(program, "plain")
    _, reference, _, _ = run(program, "reference")
    assert plain.keys() == reference.keys() and plain
    for name in plain:  # PyTorch: the same gradients with the saved tensors cloned before the write
        assert torch.equal(plain[name], reference[name]), name
    trace = traced(program)
    _, rows = _measured(trace)
    assert rows and all(row["max_abs"] == 0.0 and row["cosine"] == 1.0 for row in rows.values())
    findings = _silent(diagnose(trace))
    assert findings
    for finding in findings:
        assert finding.severity is Severity.INFO
        assert finding.measured is not None and finding.measured.identical
        assert "the write changed values the backward does not read: gradients identical" in finding.message
        assert "silently wrong" not in finding.message
    # without --verify gradviz cannot tell: the same write is an error
    assert [f.severity for f in _silent(diagnose(traced(program, verify=False)))] == [Severity.ERROR] * len(findings)


# ---------------------------------------------------------------------------------------------- the program unchanged
@pytest.mark.parametrize("program", WRONG + IDENTICAL + HOOKED, ids=[p.stem for p in WRONG + IDENTICAL + HOOKED])
def test_program_unchanged_by_verify(program: Path) -> None:
    plain_out, _, plain, _ = run(program, "plain")
    traced_out, _, traced, _ = run(program, "traced")
    verify_out, _, verified, trace = run(program, "verify")
    assert verify_out == traced_out == plain_out
    assert plain.keys() == verified.keys() == traced.keys()
    for name, p in plain.items():
        for other in (traced[name], verified[name]):
            assert torch.equal(p["value"], other["value"]), name
            assert p["version"] == other["version"], name  # our restores moved no version counter
            assert (p["grad"] is None) == (other["grad"] is None), name
            if p["grad"] is not None:
                assert torch.equal(p["grad"], other["grad"]), name  # bit for bit: nothing accumulated twice
    assert trace is not None and trace.verified and not trace.internal_errors


@pytest.mark.parametrize(
    ("program", "printed", "reason"),
    [
        ("hooked.py", "hook saw", "a hook (`register_hook` at line 6) would run a second time"),
        ("node_hooked.py", "prehook ran", "a hook (`<lambda>` at node_hooked.py:6) would run a second time"),
        (
            "module_hooked.py",
            "module hook ran",
            "BackwardHookFunctionBackward (a custom autograd.Function or a module's backward hook) would run a second "
            "time",
        ),
        (
            "old_module_hooked.py",
            "old hook ran",
            "a backward hook (run through torch's `_WrappedHook.__call__`) would run a second time",
        ),
    ],
)
def test_hooks_run_once_and_the_measurement_says_why_not(program: str, printed: str, reason: str) -> None:
    out, _, _, trace = run(DATA / program, "verify")
    assert out.count(printed) == 1
    assert trace is not None
    (finding,) = _silent(diagnose(trace))
    assert finding.measured is not None and finding.measured.skipped == reason
    assert finding.severity is Severity.ERROR
    assert f"Not measured (--verify) at step 1: {reason}." in finding.message


def test_retain_grad_is_not_written_by_the_measurement() -> None:
    text = (
        "import torch\n"
        "a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)\n"
        "h = a * 2\n"
        "h.retain_grad()\n"
        "out = h.tanh()\n"
        "out.data.zero_()\n"
        "out.sum().backward()\n"
    )
    namespace: dict[str, Any] = {}
    with gradviz.trace(verify=True) as trace:
        exec(compile(text, "<retain>", "exec"), namespace)
    assert torch.equal(namespace["h"].grad, torch.ones(3))  # once: not accumulated twice
    (finding,) = _silent(diagnose(trace))
    assert finding.measured is not None and finding.measured.skipped is not None
    assert "retain_grad()" in finding.measured.skipped


# ---------------------------------------------------------------------------------------------- cost and memory
def test_bytes_kept_are_the_bytes_overwritten_and_go_at_backward() -> None:
    tracer = gradviz.trace(verify=True)
    check = tracer._recorder._check
    with tracer:
        a = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        out = a.tanh()
        free = torch.zeros(8)
        free.data.add_(1)  # not saved by anything: nothing kept
        assert check._kept == {}
        out.data[1:3].zero_()  # 2 of tanh's 4 saved floats
        (kept,) = [item for store in check._kept.values() for item in store.items]
        assert (kept.lo, kept.hi, kept.data.numel()) == (4, 12, 8)
        out.sum().backward()
        assert check._kept == {} and check.watched == {}
    del a, out, free


def test_kept_bytes_go_with_a_graph_dropped_without_backward() -> None:
    tracer = gradviz.trace(verify=True)
    check = tracer._recorder._check
    with tracer:
        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.exp()
        out.data.mul_(2)
        assert len(check._kept) == 1
        del out  # the graph (and the node holding the token) goes
        assert check._kept == {} and check.watched == {}
    del a


def test_without_verify_nothing_is_measured() -> None:
    trace = traced(ROOT / "gallery" / "plot_02_data_silent.py", verify=False)
    assert not trace.verified
    assert not any("verify" in e.data or "verify_kept" in e.data for e in trace.events)
    (finding,) = _silent(diagnose(trace))
    assert finding.measured is None and "measured" not in finding.to_dict() and "Measured" not in finding.message


# ---------------------------------------------------------------------------------------------- the record
def test_measurement_survives_the_json_trace_and_the_finding_dict(tmp_path: Path) -> None:
    trace = traced(DATA / "relu_unmasked.py")
    path = tmp_path / "run.json"
    trace.to_json(path)
    again = Trace.load(path)
    assert again.verified
    (first,) = _silent(diagnose(trace))
    (second,) = _silent(diagnose(again))
    assert first.to_dict() == second.to_dict()
    data = json.loads(json.dumps(first.to_dict()))
    assert Finding.from_dict(data).measured == first.measured
    (row,) = data["measured"]["gradients"]
    # x.relu() with -1 turned into 5 at position 0: that position's gradient is 3 instead of 0
    assert (row["name"], row["max_abs"], row["max_rel"]) == ("x", 3.0, 1.0)
    assert math.isclose(row["cosine"], 18 / math.sqrt(27 * 18), rel_tol=1e-9)  # [3, 3, 0, 3] against [0, 3, 0, 3]
