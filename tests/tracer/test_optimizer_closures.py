"""Optimizer steps with a closure (LBFGS) and steps that raise: what runs in the closure is recorded, and a step
that raised does not leave the tracer paused for the rest of the program."""

from __future__ import annotations

import pytest
import torch

import gradviz
from gradviz import EventKind


def _lbfgs_program() -> tuple[list[float], list[torch.Tensor]]:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=3)
    x, y = torch.randn(16, 3), torch.randn(16, 1)

    def closure():
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    losses = [optimizer.step(closure).item() for _ in range(2)]
    return losses, [p.detach().clone() for p in model.parameters()]


def test_lbfgs_closure_is_recorded_and_the_program_unchanged() -> None:
    expected_losses, expected_params = _lbfgs_program()
    with gradviz.trace() as t:
        losses, params = _lbfgs_program()
    assert losses == expected_losses
    assert all(torch.equal(a, b) for a, b in zip(params, expected_params))
    kinds = [e.kind for e in t.events if e.kind in (EventKind.BACKWARD, EventKind.OPTIMIZER_STEP)]
    # max_iter=3: three evaluations of the closure (each one backward) inside each of the two steps
    assert kinds == [EventKind.BACKWARD] * 3 + [EventKind.OPTIMIZER_STEP] + [EventKind.BACKWARD] * 3 + [EventKind.OPTIMIZER_STEP]
    backward = t.events_of(EventKind.BACKWARD)[0]
    assert backward.location.code.strip() == "loss.backward()"
    weight, bias = t.tensor("weight"), t.tensor("bias")
    assert set(backward.data["reached_leaves"]) == {weight.id, bias.id}
    step = t.events_of(EventKind.OPTIMIZER_STEP)[0]
    assert step.location.code.strip() == "losses = [optimizer.step(closure).item() for _ in range(2)]"
    assert step.data["grads"] == {weight.id: "fresh", bias.id: "fresh"}  # the closure's gradients, not the ones before
    assert step.data["changed"] == [weight.id, bias.id]
    assert "outcome" not in step.data
    assert gradviz.diagnose(t) == []


def test_closure_error_propagates_unchanged() -> None:
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def closure():
        raise ValueError("no data this step")

    with gradviz.trace(), pytest.raises(ValueError, match="^no data this step$"):
        optimizer.step(closure)


def test_a_step_that_raised_is_recorded_and_tracing_resumes() -> None:
    torch.manual_seed(0)
    with gradviz.trace() as t:
        model = torch.nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        def closure():
            raise ValueError("no data this step")

        try:
            optimizer.step(closure)
        except ValueError:
            pass
        y = torch.ones(2) * 2  # a plain op right after: no module call, no backward
        y.add_(1)
        loss = model(torch.randn(4, 3)).sum()
        loss.backward()
        optimizer.step()
    failed, ok = t.events_of(EventKind.OPTIMIZER_STEP)
    assert failed.data["outcome"] == "error" and failed.data["changed"] == []
    assert failed.location.code.strip() == "optimizer.step(closure)"
    assert "outcome" not in ok.data and len(ok.data["changed"]) == 2
    write = t.events_of(EventKind.INPLACE_WRITE)[-1]
    assert write.op == "Tensor.add_" and write.tensor == t.tensor("y").id
    assert write.location.code.strip() == "y.add_(1)"
    assert [e.data["outcome"] for e in t.events_of(EventKind.BACKWARD)] == ["ok"]
