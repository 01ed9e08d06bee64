"""Custom autograd.Functions as fused kernels write them (issue 36, item 1), each with its twin: what they save with
`ctx.save_for_backward`, what they write in forward and in backward, `mark_dirty`, `once_differentiable`, a
Liger-style cross-entropy that stores the gradient over its input. PyTorch is the judge: whether backward raises, and
whether the gradients equal those of the same run with every saved tensor cloned at save time. gradviz is met as users
meet it: `gradviz check` in a subprocess, its exit status and the lines it reports."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import torch

import gradviz
from gradviz import EventKind
from gradviz.analysis import FindingKind

from . import truth as pytorch
from .test_reports import _check, _findings, _line, _write

PROGRAM = """
    import torch, torch.nn as nn
    from torch.autograd.function import once_differentiable


    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            return grad * w, (grad * x).sum(0)


    class OnceScale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        @once_differentiable
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            return grad * w, (grad * x).sum(0)


    class NoisyScale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            print("NoisyScale.backward")
            gx = grad * w
            SCALE_GRAD
            return gx, (grad * x).sum(0)


    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            MARK
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 2


    class FusedCE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, target):
            p = logits.softmax(-1)
            ctx.save_for_backward(logits, target)
            return -p.gather(1, target[:, None]).log().mean()

        @staticmethod
        def backward(ctx, grad):
            logits, target = ctx.saved_tensors
            buf = BUFFER
            buf.copy_(logits.softmax(-1))
            buf[torch.arange(len(target)), target] -= 1
            buf.mul_(grad / len(target))
            return buf, None


    class LigerCE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, _input, target):
            n = _input.shape[0]
            p = _input.softmax(-1)
            loss = -p.gather(1, target[:, None]).log().mean()
            p[torch.arange(n), target] -= 1
            _input.copy_(p / n)
            ctx.save_for_backward(_input.detach())
            return loss

        @staticmethod
        def backward(ctx, grad_output):
            (_input,) = ctx.saved_tensors
            if not torch.equal(grad_output, torch.tensor(1.0)):
                _input.mul_(grad_output)
            return _input, None


    torch.manual_seed(0)
    net = nn.Linear(8, 5)
    gain = nn.ParameterDict({"w": nn.Parameter(torch.rand(5) + 0.5)})
    w = gain["w"]
    opt = torch.optim.SGD([*net.parameters(), *gain.parameters()], lr=0.1)
    for step in range(3):
        x, y = torch.randn(16, 8), torch.randint(0, 5, (16,))
        BODY
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
SAVE = """h = net(x)
        out = FUNCTION.apply(h, w)
        WRITE
        loss = out.pow(2).mean()"""
# the z-loss's logsumexp saves the logits; made before the cross-entropy, its node runs after it in backward
Z_FIRST = """logits = net(x)
        z_loss = 1e-1 * torch.logsumexp(logits, 1).pow(2).mean()
        loss = z_loss + FusedCE.apply(logits, y)"""
Z_LAST = """logits = net(x)
        ce = FusedCE.apply(logits, y)
        loss = 1e-1 * torch.logsumexp(logits, 1).pow(2).mean() + ce"""


def _program(
    tmp: Path,
    name: str,
    body: str,
    *,
    mark: str = "pass",
    buffer: str = "torch.empty_like(logits)",
    scale: str = "pass",
    retain: str = "",
) -> Path:
    source = PROGRAM.replace("BODY", body).replace("MARK", mark).replace("BUFFER", buffer).replace("SCALE_GRAD", scale)
    source = source.replace("loss.backward()", f"loss.backward({retain})")
    return _write(tmp, name, source)


def _raises_inplace(script: Path) -> str:
    """PyTorch's own verdict on a program expected to raise: its error, checked to be the version check's."""
    truth = pytorch.run(script)
    assert truth.error is not None and "modified by an inplace operation" in truth.error, truth.error
    return truth.error


# -------------------------------------------------------------------------- saved in forward, written after apply
@pytest.mark.parametrize("function", ["Scale", "OnceScale"])
def test_data_write_to_what_a_function_saved_is_silent_corruption(tmp_path: Path, function: str) -> None:
    body = SAVE.replace("FUNCTION", function).replace("WRITE", "h.data.mul_(10)")
    script = _program(tmp_path, f"save_data_{function}", body)
    plain, true = pytorch.run(script), pytorch.run(script, clone_saved=True)
    assert plain.error is None and pytorch.silently_wrong(plain, true)  # PyTorch: silent, and wrong
    findings = _findings(script)
    line = _line(script, "h.data.mul_(10)")
    assert {(f.kind, f.line) for f in findings} == {(FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR, line)}
    assert f"saved by {function}Backward" in findings[0].message
    code, out = _check(script)
    assert code == 1 and f":{line}  silently_corrupted_saved_tensor" in out, out


@pytest.mark.parametrize("function", ["Scale", "OnceScale"])
def test_function_whose_saved_tensor_is_only_read_is_clean(tmp_path: Path, function: str) -> None:
    body = SAVE.replace("FUNCTION", function).replace("WRITE", "shown = h.detach() * 10")
    script = _program(tmp_path, f"save_read_{function}", body)
    plain, true = pytorch.run(script), pytorch.run(script, clone_saved=True)
    assert plain.error is None and not pytorch.silently_wrong(plain, true)
    assert _findings(script) == []
    code, out = _check(script, "--strict")
    assert code == 0, out


@pytest.mark.parametrize("function", ["Scale", "OnceScale"])
def test_detach_write_to_what_a_function_saved_is_poisoned(tmp_path: Path, function: str) -> None:
    body = SAVE.replace("FUNCTION", function).replace("WRITE", "h.detach().clamp_(min=0)")
    script = _program(tmp_path, f"save_detach_{function}", body)
    _raises_inplace(script)  # ctx.saved_tensors checks the version: backward raises
    code, out = _check(script)
    line = _line(script, "h.detach().clamp_(min=0)")
    assert code == 1 and f":{line}  poisoned_saved_tensor" in out, out
    assert f"saved by {function}Backward" in out


# -------------------------------------------------------------------------- written in forward: mark_dirty
def test_mark_dirty_write_to_an_input_nobody_saved_is_clean(tmp_path: Path) -> None:
    script = _program(tmp_path, "dirty", "loss = Double.apply(net(x)).pow(2).mean()", mark="ctx.mark_dirty(x)")
    plain, true = pytorch.run(script), pytorch.run(script, clone_saved=True)
    assert plain.error is None and not pytorch.silently_wrong(plain, true)
    assert _findings(script) == []
    code, out = _check(script, "--strict")
    assert code == 0, out


def test_forward_write_without_mark_dirty_to_an_input_nobody_saved_is_clean(tmp_path: Path) -> None:
    """PyTorch: no error and the same gradients as with every saved tensor cloned (nothing read the old values)."""
    script = _program(tmp_path, "undirty", "loss = Double.apply(net(x)).pow(2).mean()")
    plain, true = pytorch.run(script), pytorch.run(script, clone_saved=True)
    assert plain.error is None and not pytorch.silently_wrong(plain, true)
    assert _findings(script) == []
    code, out = _check(script, "--strict")
    assert code == 0, out


@pytest.mark.parametrize("mark", ["pass", "ctx.mark_dirty(x)"])
def test_forward_write_to_an_input_tanh_saved_is_poisoned(tmp_path: Path, mark: str) -> None:
    script = _program(tmp_path, "dirty_saved", "loss = Double.apply(net(x).tanh()).pow(2).mean()", mark=mark)
    error = _raises_inplace(script)
    assert "output 0 of Tanh" in error
    code, out = _check(script)
    line = _line(script, "x.mul_(2)")
    assert code == 1 and f":{line}  poisoned_saved_tensor" in out and "TanhBackward0" in out, out


# -------------------------------------------------------------------------- written in backward
# with retain_graph=True autograd frees nothing, so which nodes are still to run is read off its order instead
@pytest.mark.parametrize("retain", ["", "retain_graph=True"])
def test_backward_writing_saved_logits_through_data_that_a_later_term_reads_is_silent(tmp_path: Path, retain: str) -> None:
    script = _program(tmp_path, "ce_backward_data", Z_FIRST, buffer="logits.data", retain=retain)
    plain, true = pytorch.run(script), pytorch.run(script, clone_saved=True)
    assert plain.error is None and pytorch.silently_wrong(plain, true)
    findings = _findings(script)
    line = _line(script, "buf.copy_(logits.softmax(-1))")
    assert {(f.kind, f.line) for f in findings} == {(FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR, line)}
    assert "LogsumexpBackward0" in findings[0].message and "FusedCEBackward's backward" in findings[0].message
    code, out = _check(script)
    assert code == 1 and f":{line}  silently_corrupted_saved_tensor" in out, out


def test_backward_writing_the_saved_logits_themselves_is_poisoned(tmp_path: Path) -> None:
    script = _program(tmp_path, "ce_backward_direct", Z_FIRST, buffer="logits")
    assert "output 0 of Addmm" in _raises_inplace(script)
    code, out = _check(script)
    line = _line(script, "buf.copy_(logits.softmax(-1))")
    assert code == 1 and f":{line}  poisoned_saved_tensor" in out and "silently_corrupted" not in out, out


def test_backward_writing_a_fresh_buffer_is_clean(tmp_path: Path) -> None:
    script = _program(tmp_path, "ce_backward_fresh", Z_FIRST)
    plain, true = pytorch.run(script), pytorch.run(script, clone_saved=True)
    assert plain.error is None and not pytorch.silently_wrong(plain, true)
    assert _findings(script) == []
    code, out = _check(script, "--strict")
    assert code == 0, out


@pytest.mark.parametrize("retain", ["", "retain_graph=True"])
def test_backward_writing_saved_logits_after_their_last_reader_ran_is_clean(tmp_path: Path, retain: str) -> None:
    """The z-loss made after the cross-entropy: autograd runs its logsumexp first, so the overwrite harms nothing."""
    script = _program(tmp_path, "ce_backward_after", Z_LAST, buffer="logits.data", retain=retain)
    plain, true = pytorch.run(script), pytorch.run(script, clone_saved=True)
    assert plain.error is None and not pytorch.silently_wrong(plain, true)
    assert _findings(script) == []
    code, out = _check(script, "--strict")
    assert code == 0, out


# -------------------------------------------------------------------------- Liger-style: the gradient over the input
LIGER_SAVE_FIRST = ("_input.copy_(p / n)\n        ctx.save_for_backward(_input.detach())",
                    "ctx.save_for_backward(_input)\n        _input.copy_(p / n)")


@pytest.mark.parametrize("scale", ["", "0.5 * "])
@pytest.mark.parametrize("save_first", [False, True])
def test_liger_style_gradient_stored_over_the_input_is_clean(tmp_path: Path, scale: str, save_first: bool) -> None:
    """The forward writes d(loss)/d(logits) over the logits and saves that; backward scales it in place when the loss
    is scaled. Nothing else saved the logits: PyTorch raises nothing, and the gradients are the clone-at-save ones.
    Saved before the write (`save_for_backward` names it, autograd saves it, at its version then, when apply
    returns): no poison either."""
    script = _program(tmp_path, "liger", f"logits = net(x)\n        loss = {scale}LigerCE.apply(logits, y)")
    if save_first:
        source = script.read_text()
        assert LIGER_SAVE_FIRST[0] in source
        script.write_text(source.replace(*LIGER_SAVE_FIRST))
    plain, true = pytorch.run(script), pytorch.run(script, clone_saved=True)
    assert plain.error is None and not pytorch.silently_wrong(plain, true)
    assert _findings(script) == []
    code, out = _check(script, "--strict")
    assert code == 0, out


def test_liger_style_overwrite_of_logits_a_z_loss_saved_is_poisoned(tmp_path: Path) -> None:
    """The same kernel after a z-loss on the logits: its in-place store moves their version, and backward raises."""
    body = "logits = net(x)\n        z_loss = 1e-1 * torch.logsumexp(logits, 1).pow(2).mean()\n" \
        "        loss = z_loss + LigerCE.apply(logits, y)"
    script = _program(tmp_path, "liger_z", body)
    assert "output 0 of Addmm" in _raises_inplace(script)
    code, out = _check(script)
    line = _line(script, "_input.copy_(p / n)")
    assert code == 1 and f":{line}  poisoned_saved_tensor" in out and "LogsumexpBackward0" in out, out


# -------------------------------------------------------------------------- --verify through a Function's backward
@pytest.mark.parametrize("function", ["Scale", "OnceScale", "NoisyScale"])
def test_verify_measures_a_function_s_saved_tensor_write_as_the_clone_at_save_run_differs(
    tmp_path: Path, function: str
) -> None:
    body = SAVE.replace("FUNCTION", function).replace("WRITE", "h.data.mul_(10)")
    script = _program(tmp_path, f"verify_{function}", body)
    plain, true = pytorch.run(script), pytorch.run(script, clone_saved=True)
    with contextlib.redirect_stdout(io.StringIO()):
        trace = gradviz.trace_script(script, verify=True)
    first = next(e for e in trace.events_of(EventKind.BACKWARD))
    rows = {trace.tensors[row["tensor"]].parameter: row for row in first.data["verify"]["gradients"]}
    assert set(rows) == set(plain.steps[0].grads) == {"net.weight", "net.bias", "gain.w"}
    for name, row in rows.items():  # the error measured is PyTorch's own: the program's gradient minus the intact one
        difference = (plain.steps[0].grads[name].double() - true.steps[0].grads[name].double()).abs().max().item()
        assert row["max_abs"] == pytest.approx(difference, rel=1e-5, abs=1e-7), name
    assert rows["gain.w"]["max_rel"] == pytest.approx(9, rel=1e-4)  # the write made w's gradient 10 times too big
    code, out = _check(script, "--verify")
    assert code == 1 and "Measured with --verify" in out and "`gain.w`: max abs error" in out, out
    # the backward run again for the measurement printed nothing: the program's one print per step, as without it
    assert out.count("NoisyScale.backward") == (3 if function == "NoisyScale" else 0)


def test_verify_does_not_run_a_backward_that_writes_in_place_twice(tmp_path: Path) -> None:
    body = SAVE.replace("FUNCTION", "NoisyScale").replace("WRITE", "h.data.mul_(10)")
    script = _program(tmp_path, "verify_writes", body, scale="gx.mul_(1.0)")
    code, out = _check(script, "--verify")
    line = _line(script, "h.data.mul_(10)")
    assert code == 1 and f":{line}  silently_corrupted_saved_tensor" in out, out
    written = _line(script, "gx.mul_(1.0)")
    assert (
        "Not measured (--verify) at step 1: the in-place `mul_` of NoisyScaleBackward's backward at "
        f"verify_writes.py:{written} would be made a second time" in out
    ), out
    assert out.count("NoisyScale.backward") == 3  # the program's own backward, once per step


# -------------------------------------------------------------------------- the program unchanged
@pytest.mark.parametrize(
    ("name", "body", "options"),
    [
        ("save_data", SAVE.replace("FUNCTION", "NoisyScale").replace("WRITE", "h.data.mul_(10)"), {}),
        ("backward_writes", Z_FIRST, {"buffer": "logits.data"}),
        ("backward_raises", Z_FIRST, {"buffer": "logits"}),
        ("liger", "logits = net(x)\n        loss = 0.5 * LigerCE.apply(logits, y)", {}),
        ("dirty", "loss = Double.apply(net(x)).pow(2).mean()", {"mark": "ctx.mark_dirty(x)"}),
    ],
)
@pytest.mark.parametrize("verify", [False, True])
def test_program_is_unchanged_by_tracing_its_functions(tmp_path: Path, name: str, body: str, options: dict, verify: bool) -> None:
    """Same printed text, error, parameters and gradients, bit for bit, with and without gradviz watching the
    Functions' forwards and backwards (and running them again for --verify)."""
    script = _program(tmp_path, name, body, **options)

    def run(traced: bool) -> tuple[str, str | None, dict[str, torch.Tensor]]:
        out = io.StringIO()
        namespace: dict[str, object] = {"__name__": "__main__"}
        error = None
        tracer = gradviz.trace(verify=verify) if traced else contextlib.nullcontext()
        with contextlib.redirect_stdout(out), tracer:
            try:
                exec(compile(script.read_text(), str(script), "exec"), namespace)
            except RuntimeError as exc:
                error = str(exc)
        net, gain = namespace["net"], namespace["gain"]
        values = {f"{n}{'.grad' * g}": (p.grad if g else p).detach().clone()
                  for module in (net, gain) for n, p in module.named_parameters()  # type: ignore[attr-defined]
                  for g in (0, 1) if not g or p.grad is not None}  # fmt: skip
        return out.getvalue(), error, values

    plain, traced = run(False), run(True)
    assert plain[0] == traced[0] and plain[1] == traced[1]
    assert plain[2].keys() == traced[2].keys()
    assert all(torch.equal(plain[2][key], traced[2][key]) for key in plain[2])
