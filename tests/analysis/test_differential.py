"""Differential testing: gradviz's findings must agree with what PyTorch itself does on generated programs.

Ground truth comes from PyTorch: a plain run tells whether backward raises and which participating leaves end
with `grad is None`; the same program with every saved tensor cloned at save time gives the true gradients, so a
clean plain run whose gradients differ is silent corruption. gradviz must predict each of the three exactly.

The true gradients come from `saved_tensors_hooks` that clone on pack, not from
`allow_mutation_on_saved_tensors()`: that one keys its clones by (id, data_ptr, version), which a write through
`.data` does not change, so a tensor saved again after such a write is handed the stale pre-write clone
(regression `resaved_after_data_write` below).
"""

from __future__ import annotations

import contextlib
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, assume, event, given, settings, strategies as st

import gradviz
from gradviz.analysis import FindingKind, diagnose

LEAVES = ("a", "b")
UNARY = ("tanh", "exp", "sigmoid", "sin")  # backward formulas that depend smoothly on what they save
BINARY = ("*", "+", "@")
WRITES = ("add_(0.5)", "mul_(1.5)")
# weighted so that writes through aliases of saved tensors, the interesting case, come up often
KINDS = ("unary",) * 3 + ("binary",) * 2 + ("view", "data", "data", "detach", "detach", "detach_", "no_grad") + ("write",) * 4


@dataclass
class Program:
    lines: list[str] = field(default_factory=list)
    deps: dict[str, frozenset[str]] = field(default_factory=dict)  # variable -> leaves its value came from
    graph: dict[str, bool] = field(default_factory=dict)  # variable -> has a grad_fn (non-leaf in a graph)
    is_view: dict[str, bool] = field(default_factory=dict)
    loss_deps: frozenset[str] = frozenset()

    def source(self) -> str:
        head = ["import torch", "torch.manual_seed(0)"]
        head += [f"{leaf} = torch.randn(2, 2, requires_grad=True)" for leaf in LEAVES]
        return "\n".join(head + self.lines) + "\n"


@st.composite
def programs(draw: st.DrawFn) -> Program:
    prog = Program()
    for leaf in LEAVES:
        prog.deps[leaf] = frozenset({leaf})
        prog.graph[leaf] = False
        prog.is_view[leaf] = False
    counter = 0
    for _ in range(draw(st.integers(2, 9))):
        names = sorted(prog.deps)
        kind = draw(st.sampled_from(KINDS))
        x = draw(st.sampled_from(names))
        new = f"t{counter}"
        if kind == "unary":
            prog.lines.append(f"{new} = {x}.{draw(st.sampled_from(UNARY))}()")
            prog.deps[new], prog.graph[new], prog.is_view[new] = prog.deps[x], True, False
        elif kind == "binary":
            y = draw(st.sampled_from(names))
            prog.lines.append(f"{new} = {x} {draw(st.sampled_from(BINARY))} {y}")
            prog.deps[new], prog.graph[new], prog.is_view[new] = prog.deps[x] | prog.deps[y], True, False
        elif kind == "view":
            prog.lines.append(f"{new} = {x}.{draw(st.sampled_from(['t()', 'view(2, 2)', 'view(4)[:4].view(2, 2)']))}")
            prog.deps[new], prog.graph[new], prog.is_view[new] = prog.deps[x], True, True
        elif kind in ("data", "detach"):
            prog.lines.append(f"{new} = {x}.{'data' if kind == 'data' else 'detach()'}")
            prog.deps[new], prog.graph[new], prog.is_view[new] = prog.deps[x], False, False
        elif kind == "no_grad":
            prog.lines.append(f"with torch.no_grad():\n    {new} = {x}.{draw(st.sampled_from(UNARY))}()")
            prog.deps[new], prog.graph[new], prog.is_view[new] = prog.deps[x], False, False
        elif kind == "detach_":
            if x in LEAVES or prog.is_view[x]:
                continue  # raises at once ("Can't detach views in-place"): not a backward question
            prog.lines.append(f"{x}.detach_()")
            prog.graph[x] = False
            continue
        else:  # an in-place write through any alias, or through a fresh .data / .detach() of any tensor
            through = draw(st.sampled_from(["", ".data", ".detach()"]))
            if x in LEAVES and not through:
                continue  # in-place on a leaf that requires grad raises at once
            prog.lines.append(f"{x}{through}.{draw(st.sampled_from(WRITES))}")
            continue
        counter += 1
    candidates = [n for n in prog.deps if n not in LEAVES and prog.graph[n]]
    assume(candidates)
    chosen = draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=3, unique=True))
    prog.lines.append("loss = " + " + ".join(f"{n}.sum()" for n in chosen))
    prog.lines.append("loss.backward()")
    prog.loss_deps = frozenset().union(*(prog.deps[n] for n in chosen))
    return prog


@dataclass
class Outcome:
    body_error: bool
    backward_error: str | None
    grads: dict[str, torch.Tensor | None]


def run_plain(source: str, *, mutation_safe: bool = False) -> Outcome:
    body, backward = source.rsplit("loss.backward()", 1)
    namespace: dict[str, object] = {}
    context = _clone_on_save() if mutation_safe else contextlib.nullcontext()
    with context:
        try:
            exec(compile(body, "<program>", "exec"), namespace)
        except RuntimeError:
            return Outcome(True, None, {})
        error = None
        try:
            namespace["loss"].backward()  # type: ignore[union-attr]
        except RuntimeError as exc:
            error = str(exc)
        grads = {leaf: namespace[leaf].grad for leaf in LEAVES}  # type: ignore[union-attr]
    return Outcome(False, error, grads)


def _clone_on_save() -> torch.autograd.graph.saved_tensors_hooks:
    """Every saved tensor frozen at save time: what backward should have seen."""
    return torch.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t)


def _differs(got: dict[str, torch.Tensor | None], true: dict[str, torch.Tensor | None]) -> bool:
    for leaf in LEAVES:
        a, b = got[leaf], true[leaf]
        if (a is None) != (b is None):
            return True
        if a is not None and b is not None and not torch.allclose(a, b, rtol=1e-4, atol=1e-5):
            return True
    return False


def check_program(source: str, loss_deps: frozenset[str], tmp: Path, *, generated: bool = True) -> None:
    note = event if generated else (lambda _label: None)
    plain = run_plain(source)
    true = run_plain(source, mutation_safe=True)
    runnable = not plain.body_error and not true.body_error and true.backward_error is None
    if generated:
        assume(runnable)
    else:
        assert runnable, source

    script = tmp / "program.py"
    script.write_text(source)
    trace = gradviz.trace_script(script)
    assert not trace.internal_errors, trace.internal_errors
    findings = diagnose(trace)
    kinds = {f.kind for f in findings if f.affected_backward is not None}

    raises = plain.backward_error is not None
    note("backward raises" if raises else "backward runs")
    predicted_raise = bool(kinds & {FindingKind.POISONED_SAVED_TENSOR, FindingKind.DETACH_INPLACE_SAVED})
    assert predicted_raise == raises, (source, plain.backward_error, findings)
    if raises:
        return
    silent = _differs(plain.grads, true.grads)
    note("silently wrong gradients" if silent else "right gradients")
    assert (FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR in kinds) == silent, (source, findings)
    dead_expected = {leaf for leaf in loss_deps if plain.grads[leaf] is None}
    dead_found = {name for f in findings if f.kind is FindingKind.DEAD_PARAMETER for name in f.parameters}
    note(f"{len(dead_expected)} dead leaves")
    assert dead_found == dead_expected, (source, findings)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])
@given(program=programs())
def test_findings_agree_with_pytorch(program: Program, tmp_path: Path) -> None:
    check_program(program.source(), program.loss_deps, tmp_path)


REGRESSIONS = {
    # the document's two examples, written as generated programs would be
    "seed_data": ("t0 = a.tanh()\nt1 = t0.data\nt1.zero_()\nloss = t0.sum()\nloss.backward()", {"a"}),
    "seed_detach": ("t0 = a.tanh()\nt1 = t0.detach()\nt1.zero_()\nloss = t0.sum()\nloss.backward()", {"a"}),
    "detach_cuts_leaf": ("t0 = a.exp()\nt1 = t0.detach()\nt2 = t1 * b\nloss = t2.sum()\nloss.backward()", {"a", "b"}),
    "leaf_data_used": ("t0 = a.data\nt1 = t0 * b\nloss = t1.sum()\nloss.backward()", {"a", "b"}),
    "write_view_of_saved": ("t0 = a.sin()\nt1 = t0.tanh()\nt2 = t1.t()\nt2.add_(0.5)\nloss = t1.sum()\nloss.backward()", {"a"}),
    "resaved_after_data_write": (
        "t0 = a.sin()\nt1 = a.tanh()\na.data.add_(0.5)\nt2 = a.sin()\nloss = t1.sum() + t2.sum()\nloss.backward()",
        {"a"},
    ),
    # copy constructions: the values without their history, a cut like `.detach().clone()`
    "copy_constructed": ("t0 = a.exp()\nt1 = torch.tensor(t0)\nt2 = t1 * b\nloss = t2.sum()\nloss.backward()", {"a", "b"}),
    "leaf_new_tensor": ("t0 = b.new_tensor(a)\nt1 = t0 * b\nloss = t1.sum()\nloss.backward()", {"a", "b"}),
    # detach_() on a base whose view feeds the loss: PyTorch keeps the view's history (a gets its gradient) until the
    # base is written in place; then the view's grad_fn is rebuilt from the detached base and a gets none
    # a second detach_() of a tensor detached already changes nothing autograd saved (found by hypothesis on torch 2.8:
    # the tracer named the node the tensor was made by as the one detached, and reported detach_inplace_saved)
    "detach_twice_saved_between": ("t0 = a.tanh()\nt0.detach_()\nt1 = t0 * a\nt0.detach_()\nloss = t1.sum()\nloss.backward()", {"a"}),
    "detach_base_view_feeds_loss": ("t0 = a.tanh()\nt1 = t0.t()\nt0.detach_()\nloss = t1.sum()\nloss.backward()", {"a"}),
    "detach_base_written_view_feeds_loss": (
        "t0 = a.tanh()\nt1 = t0.t()\nt0.detach_()\nt0.mul_(2)\nloss = t1.sum()\nloss.backward()",
        {"a"},
    ),
    # written through a `.detach()` alias (its counter is the base's) before the detach_, the view unused between
    "detach_base_written_through_alias_first": (
        "t0 = a.tanh()\nt1 = t0.t()\nt2 = t0.detach()\nt2.add_(0.5)\nt0.detach_()\nloss = t1.sum()\nloss.backward()",
        {"a"},
    ),
    # the counter a writing alias has, however it was made: `.data`'s own through a view of it, its `.detach()`, or
    # its own `.data`; the saved tensor's through a `.detach()` then viewed
    "write_view_of_data": ("t0 = a.tanh()\nt1 = t0.data.view(4)\nt1.add_(0.5)\nloss = t0.sum()\nloss.backward()", {"a"}),
    "write_detach_of_data": ("t0 = a.tanh()\nt1 = t0.data.detach()\nt1.add_(0.5)\nloss = t0.sum()\nloss.backward()", {"a"}),
    "write_data_of_data": ("t0 = a.tanh()\nt1 = t0.data\nt2 = t1.data\nt2.add_(0.5)\nloss = t0.sum()\nloss.backward()", {"a"}),
    "write_view_of_detach": ("t0 = a.tanh()\nt1 = t0.detach().t()\nt1.add_(0.5)\nloss = t0.sum()\nloss.backward()", {"a"}),
    # a write to another row of t0 moves the saved row t1's version too, though not its bytes: a later write through
    # `.data` that brings its own (other) counter to the same number is no evidence that the two share one
    "stale_row_version_data_write": (
        "t0 = a * 2\nt1 = t0[0]\nt0[1].mul_(0.5)\nt2 = t1.sin()\nt3 = t0.data\nt3[0].add_(1.0)\nloss = t2.sum()\nloss.backward()",
        {"a"},
    ),
    # autograd compares versions, not bytes: writing another row of a saved row's base makes backward raise
    "write_other_row_of_saved": ("t0 = a * 2\nt1 = t0[0]\nt2 = t1.sin()\nt0[1].mul_(0.5)\nloss = t2.sum()\nloss.backward()", {"a"}),
    "no_grad_path": ("with torch.no_grad():\n    t0 = a.exp()\nt1 = t0 * b\nloss = t1.sum()\nloss.backward()", {"a", "b"}),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regressions(name: str, tmp_path: Path) -> None:
    body, deps = REGRESSIONS[name]
    source = "import torch\ntorch.manual_seed(0)\n" + "".join(
        f"{leaf} = torch.randn(2, 2, requires_grad=True)\n" for leaf in LEAVES
    ) + textwrap.dedent(body) + "\n"
    check_program(source, frozenset(deps), tmp_path, generated=False)
