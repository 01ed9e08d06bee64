"""Optimizer steps with a closure (LBFGS) and steps that raise: what runs in the closure is recorded, and a step
that raised does not leave the tracer paused for the rest of the program."""

from __future__ import annotations

import threading

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


def _step_that_raises(optimizer: torch.optim.Optimizer) -> None:
    """optimizer.step() raising from its closure, the error caught by the program."""

    def closure():
        raise ValueError("no data this step")

    try:
        optimizer.step(closure)
    except ValueError:
        pass


def test_a_step_that_raised_is_recorded_and_tracing_resumes() -> None:
    torch.manual_seed(0)
    with gradviz.trace() as t:
        model = torch.nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        _step_that_raises(optimizer)
        y = torch.ones(2) * 2  # a plain op right after: no module call, no backward
        y.add_(1)
        loss = model(torch.randn(4, 3)).sum()
        loss.backward()
        optimizer.step()
    failed, ok = t.events_of(EventKind.OPTIMIZER_STEP)
    assert failed.data["outcome"] == "error" and failed.data["changed"] == []
    assert failed.location.code.strip() == "optimizer.step(closure)"  # the program's call, in the helper
    assert "outcome" not in ok.data and len(ok.data["changed"]) == 2
    write = t.events_of(EventKind.INPLACE_WRITE)[-1]
    assert write.op == "Tensor.add_" and write.tensor == t.tensor("y").id
    assert write.location.code.strip() == "y.add_(1)"
    assert [e.data["outcome"] for e in t.events_of(EventKind.BACKWARD)] == ["ok"]


def test_a_step_retried_right_after_it_raised() -> None:
    """No torch call between the failed step and its retry: the failed one is closed by the exit of its own
    record_function mark, before the retry begins."""
    tracer = gradviz.trace()
    with tracer as t:
        model = torch.nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        _step_that_raises(optimizer)
        optimizer.step()  # the retry
        assert tracer._recorder._paused == 0
        z = torch.ones(2)
        z.add_(1)
        model(torch.ones(1, 3)).sum().backward()
    kinds = [(e.kind, e.data.get("outcome")) for e in t.events if e.kind != EventKind.INPLACE_WRITE or e.op == "Tensor.add_"]
    assert kinds == [
        (EventKind.OPTIMIZER_STEP, "error"),
        (EventKind.OPTIMIZER_STEP, None),
        (EventKind.INPLACE_WRITE, None),
        (EventKind.BACKWARD, "ok"),
    ]


def test_module_calls_in_another_thread_during_a_step_change_nothing() -> None:
    """Optimizer hooks are process-wide; the tracer follows its own thread only (its mode is per thread, and the
    modules running are read off its own stack)."""
    tracer = gradviz.trace()
    with tracer as t:
        model, augment = torch.nn.Linear(3, 1), torch.nn.Linear(3, 3)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        in_step, done = threading.Event(), threading.Event()

        def worker() -> None:
            in_step.wait()
            with torch.no_grad():
                augment(torch.randn(2, 3))
            done.set()

        thread = threading.Thread(target=worker)
        thread.start()
        optimizer.register_step_pre_hook(lambda *_: (in_step.set(), done.wait()) and None)  # noqa: SIM223 - both calls, then None
        model(torch.randn(4, 3)).sum().backward()
        optimizer.step()
        thread.join()
        assert tracer._recorder._paused == 0
        y = torch.ones(2)
        y.add_(1)
    (step,) = t.events_of(EventKind.OPTIMIZER_STEP)
    assert "outcome" not in step.data and len(step.data["changed"]) == 2
    writes = [e.op for e in t.events_of(EventKind.INPLACE_WRITE)]
    assert writes[-1] == "Tensor.add_" and "Tensor.add_" not in writes[:-1]  # SGD's own updates are not writes
    assert "module" not in t.events_of(EventKind.INPLACE_WRITE)[-1].data  # the other thread's module is not ours


def test_frozen_parameters_are_not_copied_at_each_step() -> None:
    """Parameters without a gradient are skipped by standard optimizers: no copy of their values is taken."""
    tracer = gradviz.trace()
    copies: list[object] = []
    with tracer as t:
        backbone, head = torch.nn.Linear(64, 64), torch.nn.Linear(64, 1)
        backbone.requires_grad_(False)
        optimizer = torch.optim.AdamW([*backbone.parameters(), *head.parameters()], lr=0.1)
        # a per-optimizer pre-hook runs after gradviz's global one: the step's recorded state is there
        optimizer.register_step_pre_hook(
            lambda opt, *_: copies.extend(entry[3] for entry in tracer._recorder._steps[id(opt)].state) and None
        )
        head(backbone(torch.randn(4, 64))).sum().backward()
        optimizer.step()
    assert len(copies) == 4 and copies == [None] * 4
    (step,) = t.events_of(EventKind.OPTIMIZER_STEP)
    assert step.data["changed"] == [t.tensor("head.weight").id, t.tensor("head.bias").id]


def test_a_callable_that_is_not_a_closure_is_passed_on_untouched() -> None:
    class ModelAwareSGD(torch.optim.SGD):
        @torch.no_grad()
        def step(self, model=None):  # takes the model, not a closure
            assert isinstance(model, torch.nn.Module)
            return super().step()

    net = torch.nn.Linear(2, 1)
    optimizer = ModelAwareSGD(net.parameters(), lr=0.1)
    with gradviz.trace() as t:
        net(torch.ones(1, 2)).sum().backward()
        optimizer.step(net)
    assert [e.data.get("outcome") for e in t.events_of(EventKind.OPTIMIZER_STEP)] == [None]


def test_a_closure_called_after_its_step_is_recorded_in_order() -> None:
    tracer = gradviz.trace()
    with tracer as t:
        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        kept = []

        def closure():
            loss = model(torch.ones(1, 2)).sum()
            loss.backward()
            return loss

        optimizer.register_step_pre_hook(lambda opt, args, kwargs: kept.append(args[1]) and None)
        optimizer.step(closure)
        kept[0]()  # the wrapped closure, called once its step has ended
        assert tracer._recorder._paused == 0
    kinds = [e.kind for e in t.events if e.kind in (EventKind.BACKWARD, EventKind.OPTIMIZER_STEP)]
    assert kinds == [EventKind.BACKWARD, EventKind.OPTIMIZER_STEP, EventKind.BACKWARD]


@pytest.mark.parametrize("raises", [False, True])
def test_a_step_calling_its_parent_step_is_one_step(raises: bool) -> None:
    """A subclass's step() calling super().step(): both are wrapped by torch; one optimizer_step is recorded."""

    class Clipped(torch.optim.SGD):
        @torch.no_grad()
        def step(self, closure=None):
            return super().step(closure)

    tracer = gradviz.trace()
    with tracer as t:
        model = torch.nn.Linear(2, 1)
        optimizer = Clipped(model.parameters(), lr=0.1)
        model(torch.ones(1, 2)).sum().backward()

        def closure():
            if raises:
                raise ValueError("no batch")
            return None

        try:
            optimizer.step(closure)
        except ValueError:
            pass
        assert tracer._recorder._paused == 0
        after = torch.ones(2)
        after.mul_(2)
    (step,) = t.events_of(EventKind.OPTIMIZER_STEP)
    assert step.data.get("outcome") == ("error" if raises else None)
    assert len(step.data["changed"]) == (0 if raises else 2)
    assert t.events_of(EventKind.INPLACE_WRITE)[-1].tensor == t.tensor("after").id


def test_an_error_escaping_through_a_step_leaves_the_step_recorded(tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "model = torch.nn.Linear(2, 1)\n"
        "optimizer = torch.optim.LBFGS(model.parameters())\n"
        "def closure():\n"
        "    raise RuntimeError('the data loader is empty')\n"
        "optimizer.step(closure)\n"
    )
    t = gradviz.trace_script(script)
    assert t.exception is not None and t.exception.type == "RuntimeError"
    step = t.events_of(EventKind.OPTIMIZER_STEP)[0]
    assert step.data["outcome"] == "error" and step.location.line == 6
    assert [e.kind for e in t.events][-2:] == [EventKind.OPTIMIZER_STEP, EventKind.EXCEPTION]
