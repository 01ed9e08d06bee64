"""What PyTorch itself shows about a program: per optimizer step, which parameters had a non-zero gradient and which
changed; whether the program raised; how many autograd nodes its live values keep. The judge of every finding."""

from __future__ import annotations

import contextlib
import runpy
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from gradviz.analysis import Finding, FindingKind, Severity


@dataclass
class Step:
    with_grad: set[str]  # parameters whose .grad was non-zero before the step
    changed: set[str]  # parameters whose values the step changed
    grads: dict[str, torch.Tensor] = field(default_factory=dict)  # a copy of each .grad before the step


@dataclass
class Truth:
    steps: list[Step] = field(default_factory=list)
    error: str | None = None  # the program's exception, if any
    live_nodes: int = 0  # autograd nodes (AccumulateGrad aside) reachable from the program's values at the end
    names: dict[int, str] = field(default_factory=dict)  # id(parameter) -> qualified name

    @property
    def ever_with_grad(self) -> set[str]:
        return {name for step in self.steps for name in step.with_grad}


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def _qualified(namespace: dict[str, object]) -> dict[int, str]:
    names: dict[int, str] = {}
    for variable, value in namespace.items():
        if isinstance(value, torch.nn.Module):
            for name, p in value.named_parameters():
                names.setdefault(id(p), f"{variable}.{name}")
    return names


def _nodes(values: Iterator[object]) -> int:
    """Autograd nodes reachable from the tensors among `values` (lists, tuples, dicts walked; AccumulateGrad aside)."""
    seen: set[int] = set()
    stack = []
    visited: set[int] = set()
    todo = list(values)
    while todo:
        value = todo.pop()
        if id(value) in visited:
            continue
        visited.add(id(value))
        if isinstance(value, torch.Tensor):
            if value.grad_fn is not None:
                stack.append(value.grad_fn)
        elif isinstance(value, (list, tuple, set)):
            todo.extend(value)
        elif isinstance(value, dict):
            todo.extend(value.values())
    count = 0
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        if type(fn).__name__ != "AccumulateGrad":
            count += 1
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return count


def run(script: Path, *, clone_saved: bool = False) -> Truth:
    """Run `script` as `python script` would (in this process), watching every optimizer step.

    `clone_saved`: every tensor autograd saves is cloned at save time, so backward sees the values the forward
    used, whatever the program writes afterwards: the gradients the program should have had."""
    truth = Truth()
    grads: list[dict[int, torch.Tensor]] = []
    state: dict[int, dict[int, torch.Tensor]] = {}

    def pre(optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        with torch.no_grad():
            params = [p for group in optimizer.param_groups for p in group["params"]]
            state[id(optimizer)] = {id(p): _local(p).detach().clone() for p in params}
            with_grad = {id(p) for p in params if p.grad is not None and bool(_local(p.grad).any())}
            grads.append({id(p): _local(p.grad).clone() for p in params if p.grad is not None})
        truth.steps.append(Step(with_grad, set()))  # type: ignore[arg-type]

    def post(optimizer: torch.optim.Optimizer, args: object, kwargs: object) -> None:
        before = state.pop(id(optimizer))
        with torch.no_grad():
            params = [p for group in optimizer.param_groups for p in group["params"]]
            truth.steps[-1].changed = {id(p) for p in params if not torch.equal(before[id(p)], _local(p))}  # type: ignore[assignment]

    handles = [register_optimizer_step_pre_hook(pre), register_optimizer_step_post_hook(post)]
    argv = sys.argv
    sys.argv = [str(script)]
    namespace: dict[str, object] = {}
    frozen = (
        torch.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t)
        if clone_saved
        else contextlib.nullcontext()
    )
    try:
        with frozen:
            namespace = runpy.run_path(str(script), run_name="__main__")
    except Exception as exc:  # noqa: BLE001 - the program's own error is part of the truth
        truth.error = f"{type(exc).__name__}: {exc}"
    finally:
        sys.argv = argv
        for handle in handles:
            handle.remove()
    truth.names = _qualified(namespace)
    for step in truth.steps:  # ids to names, now that the modules are known
        step.with_grad = {truth.names.get(i, str(i)) for i in step.with_grad}  # type: ignore[misc]
        step.changed = {truth.names.get(i, str(i)) for i in step.changed}  # type: ignore[misc]
    for step, before in zip(truth.steps, grads):
        step.grads = {truth.names.get(i, str(i)): g for i, g in before.items()}
    truth.live_nodes = _nodes(iter(v for k, v in namespace.items() if not k.startswith("__")))
    return truth


def silently_wrong(plain: Truth, true: Truth) -> bool:
    """Whether a run that raised nothing had other gradients at some step than the run with saved tensors cloned
    at save time (`run(script, clone_saved=True)`): what backward used was changed after the forward saved it."""
    assert plain.error is None and true.error is None, (plain.error, true.error)
    assert len(plain.steps) == len(true.steps) > 0
    for got, want in zip(plain.steps, true.steps):
        assert got.grads.keys() == want.grads.keys()
        if any(not torch.allclose(got.grads[name], want.grads[name], rtol=1e-4, atol=1e-6) for name in got.grads):
            return True
    return False


def _is(name: str, parameter: str | None) -> bool:
    """A truth name (`net.0.weight`) is gradviz's (`net.0.weight`, or `0.weight` for a model no variable held when
    it was first called)."""
    return parameter is not None and (name == parameter or name.endswith("." + parameter))


def contradictions(findings: list[Finding], truth: Truth, *, grows: bool | None = None) -> list[str]:
    """Every warning or error that what PyTorch showed contradicts (an empty list: they agree).

    `grows`: whether the live autograd nodes grow with the number of steps (None: not measured)."""
    wrong = []
    for finding in findings:
        if finding.severity is Severity.INFO:
            continue
        where = f"{finding.kind.value} line {finding.line} {finding.parameter or ''}: {finding.message[:160]}"
        if finding.kind is FindingKind.UPDATE_WITHOUT_GRADIENT:
            # PyTorch: some step changed it while its .grad was None or all zeros
            if not any(
                any(_is(n, finding.parameter) for n in s.changed) and not any(_is(n, finding.parameter) for n in s.with_grad)
                for s in truth.steps
            ):
                wrong.append("every step that moved it had a non-zero gradient: " + where)
        elif finding.kind is FindingKind.DEAD_PARAMETER:
            # one finding names every parameter its cause starves: each of them must have had no gradient
            if any(_is(n, name) for name in finding.parameters or [finding.parameter] for n in truth.ever_with_grad):
                wrong.append("it had a non-zero gradient: " + where)
        elif finding.kind is FindingKind.GRAPH_KEPT_ALIVE:
            if grows is not True:
                wrong.append("the live autograd nodes do not grow with the steps: " + where)
        elif finding.kind is FindingKind.BACKWARD_THROUGH_FREED_GRAPH:
            if finding.predicted or "second time" not in (truth.error or ""):
                wrong.append("the program never raised 'backward through the graph a second time': " + where)
        elif not (truth.error and "inplace operation" in truth.error):
            # saved-tensor kinds: the programs here write nothing a graph saved; PyTorch raised nothing
            wrong.append("PyTorch raised nothing and the program writes no saved tensor: " + where)
    if grows and not any(f.kind is FindingKind.GRAPH_KEPT_ALIVE for f in findings):
        wrong.append("the live autograd nodes grow with the steps, but no graph_kept_alive")
    return wrong
