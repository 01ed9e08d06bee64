"""Differential testing of graph lifetime: generated training loops that store values with and without history
(lists, dicts of lists, attributes, a method's list, a global summed in a function, validation with and without
`no_grad`), carry state with and without `.detach()` and call backward every step, every other step, every two
steps on a summed loss (gradient accumulation) or never, on one loss or on two summed (GAN-style). The truth comes
from PyTorch itself, running the plain program.

Live values: what the program's namespace holds at the end (variables, module globals a function assigned),
walked through lists, tuples, dicts and the attributes of instances of the program's own classes down to tensors
(a library object's internals, a Distribution's cached `probs`, are not values the program stored).

A node saves tensors when it has `_raw_saved_<name>` attributes; a backward freed them when reading
`_saved_<name>` raises "... after they have already been freed".

- backward_through_freed_graph (error) <=> the program raised "Trying to backward through the graph a second time".
- backward_through_freed_graph (predicted) <=> some live value is *built on a freed graph*: its backward
  (`v.sum().backward(retain_graph=True)`) raises "second time" and its own graph is not spent. The probes share one
  run: with retain_graph=True a backward frees nothing, so one probe cannot change what another sees (they only add
  to `.grad`). A node that saves nothing (a `mean`, an `add`) shows no trace of a backward that ran through it, so a
  value's own graph is the nodes that save tensors nearest to its `grad_fn` (found walking through nodes that save
  nothing), and it is spent when a backward freed any of them. So the last step's `loss` and `h` (the last backward
  ran through them) are no prediction, nor is a running sum of losses some backward ran through (`acc = acc +
  loss`: graph_kept_alive is its finding); an `h` computed from a state whose graph was freed is one (its graph enters
  the freed one through a node made after the backward that freed it: the program's next backward reaches it), but
  a stored loss of a step no backward ran through, whose hidden state a later backward freed through the carried
  state, is not: it entered the freed graph on a side branch made before that backward, which nothing the program
  runs backpropagates (issue 36: no warning, no note).
  A value that reaches the freed graph only through a loss the program differentiated (a root of `backward` or
  `autograd.grad`: `acc = acc + loss * x.size(0)`) is no prediction: its backward would backpropagate that loss a
  second time, which is bookkeeping, not a carried state.
- graph_kept_alive <=> the autograd nodes (AccumulateGrad aside) that live values reach grow with the loop: more
  after N + 2 iterations than after N. Same parity, so "every other step" and "every two steps" end at the same
  point of their cycle and the last step's own graph counts the same in both. A graph whose saved tensors a
  backward freed still counts: its nodes (and the tensors they point at) stay in memory and grow per step, which is
  PyTorch FAQ's `total_loss += loss` (backward every step), the finding's first purpose. But the walk stops at a
  freed node (the node counts, what lies behind it not): reaching earlier steps only through a graph a backward
  freed is a state carried without `.detach()` across backward calls, a value built on a freed graph; that one
  mistake gets one finding, backward_through_freed_graph, whose fix (detach) also ends the growth. Where the longer
  run raises (such a state with backward every other step runs 3 steps at most), the same loop with the state
  detached gives the answer: the stop makes what the state reaches behind its freed graph a bounded count, so
  detaching it does not change whether the count grows.

Findings must agree exactly on all three. The named regression cases below also pin each finding's line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import gradviz
from gradviz.analysis import Finding, FindingKind, diagnose

STORES = {
    "none": "",
    "list": "store.append(loss)",
    "list_item": "store.append(loss.item())",
    "list_detach": "store.append(loss.detach())",
    "dict_list": "history['loss'].append(loss)",
    "sum": "acc = acc + loss",
    "scaled_sum": "acc = acc + loss * x.size(0)",  # the epoch average: a product saving a tensor no backward freed
    "iadd_item": "acc += loss.item()",
    "sum_float": "acc = acc + float(loss)",
    "attr": "rec.last = loss",  # one value, replaced each step: the last step's graph only
    "attr_list": "rec.log(h)",  # self.history.append(out) in a method
    "global_sum": "track(loss)",  # `running = running + value` in a function, on a module global
    "previous": "previous, last = last, loss",  # two names: the last two steps' graphs, no growth
}
CARRIES = {"none": "", "graph": "state = h", "detached": "state = h.detach()"}
BACKWARDS = ("each_step", "never", "every_other", "accumulate")
VALIDATIONS = {
    "none": [],
    "no_grad_sum": ["with torch.no_grad():", "    val = val + (x @ w).sum()"],
    "sum": ["val = val + (x @ w).sum()"],
    "no_grad_list": ["with torch.no_grad():", "    val_losses.append((x @ w).sum())"],
    "list": ["val_losses.append((x @ w).sum())"],
}
LOSSES = {
    "one": ["loss = h.pow(2).mean()"],
    # GAN-style: two losses summed, one backward
    "two": ["g_loss = h.pow(2).mean()", "d_loss = h.sigmoid().mean()", "loss = g_loss + d_loss"],
    # second order (MAML's inner step, a gradient penalty): a gradient taken with create_graph=True is part of
    # the loss, not a step; it frees nothing and its graph joins the loss's
    "second_order": [
        "g, = torch.autograd.grad(h.pow(2).sum(), w, create_graph=True)",
        "loss = h.pow(2).mean() + (g * g).mean()",
    ],
}
PRELUDE = """\
import torch
torch.manual_seed(0)
w = torch.randn(3, 3, requires_grad=True)
state = torch.zeros(2, 3)
store, history, acc, val, total, running, val_losses, last = [], {'loss': []}, 0.0, 0.0, 0.0, 0.0, [], 0.0


class Recorder:
    def __init__(self):
        self.history = []
        self.last = None

    def log(self, out):
        self.history.append(out)


def track(value):
    global running
    running = running + value


rec = Recorder()
"""


def source(store: str, carry: str, backward: str, steps: int, validation: str = "none", losses: str = "one") -> str:
    body = [
        f"for step in range({steps}):",
        "    x = torch.randn(2, 3)",
        "    h = torch.tanh(x @ w + state)",
    ]
    body += ["    " + line for line in LOSSES[losses]]
    if backward == "each_step":
        body.append("    loss.backward()")
    elif backward == "every_other":
        body += ["    if step % 2 == 1:", "        loss.backward()"]
    elif backward == "accumulate":  # gradient accumulation: a summed loss, backward every two steps
        body += ["    total = total + loss", "    if step % 2 == 1:", "        total.backward()", "        total = 0.0"]
    for line in (STORES[store], CARRIES[carry]):
        if line:
            body.append("    " + line)
    body += ["    " + line for line in VALIDATIONS[validation]]
    return PRELUDE + "\n".join(body) + "\n"


# ------------------------------------------------------------------------------------------ the truth
def _live_tensors(namespace: dict[str, object]) -> list[torch.Tensor]:
    """Tensors the program's live values hold, each once, through lists, tuples, dicts and instance attributes."""
    seen: set[int] = set()
    out: list[torch.Tensor] = []
    pending = [v for k, v in namespace.items() if not k.startswith("__")]
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, torch.Tensor):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())
        elif type(value).__module__ == "__main__" and hasattr(value, "__dict__"):
            pending.extend(vars(value).values())  # an instance of a class the program defined
    return out


def _saves_tensors(node: object) -> list[str]:
    return [name.removeprefix("_raw") for name in dir(node) if name.startswith("_raw_saved_")]


def _freed(node: object) -> bool:
    """A backward freed the node's saved tensors: reading them raises."""
    for name in _saves_tensors(node):
        try:
            getattr(node, name)
        except RuntimeError as exc:
            if "freed" in str(exc):
                return True
            raise
    return False


def _next(node: object) -> list[object]:
    return [n for n, _ in node.next_functions if n is not None]  # type: ignore[attr-defined]


def _nodes_reachable(tensors: list[torch.Tensor]) -> int:
    """Autograd nodes (AccumulateGrad aside) reachable from `tensors`; a freed node counts, what lies behind it not."""
    seen: set[int] = set()
    keep = []  # hold the nodes while walking: ids stay unique
    stack = [t.grad_fn for t in tensors if t.grad_fn is not None]
    count = 0
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        keep.append(node)
        if type(node).__name__ != "AccumulateGrad":
            count += 1
        if not _freed(node):
            stack.extend(_next(node))
    return count


def _spent(tensor: torch.Tensor) -> bool:
    """A backward freed the nodes that save tensors nearest to the tensor's grad_fn: its own graph is spent."""
    seen: set[int] = set()
    keep = []
    stack = [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        keep.append(node)
        if _saves_tensors(node):
            if _freed(node):
                return True
        else:
            stack.extend(_next(node))
    return False


def _walk(
    tensors: torch.Tensor | list[torch.Tensor], differentiated: set[int], follow: Callable[[object], list[object]]
) -> Iterator[object]:
    """Each node reachable from the tensors' grad_fns, once, not through losses the program differentiated;
    `follow`: the nodes to go on to from one (held while walking: ids stay unique)."""
    seen: set[int] = set()
    keep = []
    stack = [t.grad_fn for t in (tensors if isinstance(tensors, list) else [tensors]) if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen or id(node) in differentiated:
            continue
        seen.add(id(node))
        keep.append(node)
        yield node
        stack.extend(follow(node))


def _reaches_freed(tensor: torch.Tensor, differentiated: set[int]) -> bool:
    """A walk from the tensor's grad_fn, stopping at losses the program differentiated, meets a freed node."""
    return any(_freed(node) for node in _walk(tensor, differentiated, _next))


def _enters_after_freeing(tensor: torch.Tensor, differentiated: set[int], freed_by: dict[int, int]) -> bool:
    """Whether the tensor's graph enters a freed graph through a node made after the backward that freed it (a state
    carried into the next step's graph), rather than only through nodes made before it (a side branch the freeing
    backward passed by: a stored loss of a step no backward ran through). `freed_by`: a freed node's sequence number
    (unique in a thread; a node's Python object may be made anew at each visit on some torch versions, so its id is
    no key) -> the autograd sequence number when the backward that freed it started."""

    def freed_start(node: object) -> int | None:
        start = freed_by.get(node._sequence_nr())  # type: ignore[attr-defined]
        return start if start is not None and _freed(node) else None

    def follow(node: object) -> list[object]:  # up to the freed graph, not into it
        return [] if _freed(node) else [nxt for nxt in _next(node) if freed_start(nxt) is None]

    for node in _walk(tensor, differentiated, follow):
        if not _freed(node):
            starts = [start for nxt in _next(node) if (start := freed_start(nxt)) is not None]
            if any(node._sequence_nr() >= start for start in starts):  # type: ignore[attr-defined]
                return True
    return False


def _built_on_freed(
    tensor: torch.Tensor, differentiated: set[int] | None = None, freed_by: dict[int, int] | None = None
) -> bool:
    if tensor.grad_fn is None or _spent(tensor):
        return False
    if differentiated is not None and not _reaches_freed(tensor, differentiated):
        return False
    if freed_by is not None and not _enters_after_freeing(tensor, differentiated or set(), freed_by):
        return False
    try:
        tensor.sum().backward(retain_graph=True)
    except RuntimeError as exc:
        if "second time" in str(exc):
            return True
        raise
    return False


class Truth:
    """What PyTorch says about one program: the error it raised, the nodes live values reach, and whether a live
    value is built on a freed graph."""

    def __init__(self, text: str) -> None:
        namespace: dict[str, object] = {"__name__": "__main__"}
        self.error: str | None = None
        self.nodes = 0
        self.built_on_freed = False
        losses: list[object] = []  # the grad_fn of every root of backward / autograd.grad (held: ids stay unique)
        freed_by: dict[int, int] = {}  # a freed node's sequence number -> where its freeing backward started
        backward, grad = torch.autograd.backward, torch.autograd.grad

        def freed_now(roots: object, start: int) -> None:
            """The nodes a backward from `roots` just freed, with the sequence number when it started."""
            tensors = [r for r in (roots if isinstance(roots, (list, tuple)) else [roots]) if isinstance(r, torch.Tensor)]
            for node in _walk(tensors, set(), _next):
                if node._sequence_nr() not in freed_by and _freed(node):  # type: ignore[attr-defined]
                    freed_by[node._sequence_nr()] = start  # type: ignore[attr-defined]

        def note(roots: object) -> None:
            for root in roots if isinstance(roots, (list, tuple)) else [roots]:
                if isinstance(root, torch.Tensor) and root.grad_fn is not None:
                    losses.append(root.grad_fn)

        def noting_backward(tensors: object, *args: object, **kwargs: object) -> object:
            note(tensors)
            start = torch._C._autograd._get_sequence_nr()
            try:
                return backward(tensors, *args, **kwargs)  # type: ignore[arg-type]
            finally:
                freed_now(tensors, start)

        def noting_grad(outputs: object, *args: object, **kwargs: object) -> object:
            note(outputs)
            start = torch._C._autograd._get_sequence_nr()
            try:
                return grad(outputs, *args, **kwargs)  # type: ignore[arg-type]
            finally:
                freed_now(outputs, start)

        torch.autograd.backward, torch.autograd.grad = noting_backward, noting_grad  # type: ignore[assignment]
        try:
            exec(compile(text, "<program>", "exec"), namespace)
        except RuntimeError as exc:
            self.error = str(exc)
            return
        finally:
            torch.autograd.backward, torch.autograd.grad = backward, grad  # type: ignore[assignment]
        live = _live_tensors(namespace)
        self.nodes = _nodes_reachable(live)
        differentiated = {id(node) for node in losses}
        # after counting: probes add grads only
        self.built_on_freed = any(_built_on_freed(t, differentiated, freed_by) for t in live)

    @property
    def raised_second_time(self) -> bool:
        return self.error is not None and "second time" in self.error


def _grows(store: str, carry: str, backward: str, steps: int, validation: str, losses: str) -> bool:
    """More nodes after `steps` + 2 iterations than after `steps`. Where the longer run raises (a state carried
    without detach, backward every other step: only 1 to 3 steps run through), the same loop with the state
    detached answers: what the carried state reaches behind its freed graph is not counted, so detaching it
    changes the count by a bound, not its growth."""
    now = Truth(source(store, carry, backward, steps, validation, losses))
    more = Truth(source(store, carry, backward, steps + 2, validation, losses))
    if more.error is not None and carry == "graph":
        now = Truth(source(store, "detached", backward, steps, validation, losses))
        more = Truth(source(store, "detached", backward, steps + 2, validation, losses))
    assert now.error is None and more.error is None, (now.error, more.error)
    return more.nodes > now.nodes


# ------------------------------------------------------------------------------------------ the comparison
def findings_of(text: str, tmp: Path) -> list[Finding]:
    script = tmp / "program.py"
    script.write_text(text)
    trace = gradviz.trace_script(script)
    assert not trace.internal_errors, trace.internal_errors
    return [
        f for f in diagnose(trace) if f.kind in (FindingKind.GRAPH_KEPT_ALIVE, FindingKind.BACKWARD_THROUGH_FREED_GRAPH)
    ]


def check(
    store: str, carry: str, backward: str, steps: int, tmp: Path, validation: str = "none", losses: str = "one"
) -> list[Finding]:
    text = source(store, carry, backward, steps, validation, losses)
    truth = Truth(text)
    findings = findings_of(text, tmp)
    messages = [(f.kind.value, f.predicted, f.line, f.message) for f in findings]
    freed = [f for f in findings if f.kind is FindingKind.BACKWARD_THROUGH_FREED_GRAPH and not f.predicted]
    assert bool(freed) == truth.raised_second_time, (text, truth.error, messages)
    if truth.error is not None:
        return findings
    predicted = [f for f in findings if f.kind is FindingKind.BACKWARD_THROUGH_FREED_GRAPH and f.predicted]
    assert bool(predicted) == truth.built_on_freed, (text, messages)
    grows = _grows(store, carry, backward, steps, validation, losses)
    kept = [f for f in findings if f.kind is FindingKind.GRAPH_KEPT_ALIVE]
    assert bool(kept) == grows, (text, grows, messages)
    return findings


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    store=st.sampled_from(sorted(STORES)),
    carry=st.sampled_from(sorted(CARRIES)),
    backward=st.sampled_from(BACKWARDS),
    steps=st.integers(2, 5),
    validation=st.sampled_from(sorted(VALIDATIONS)),
    losses=st.sampled_from(sorted(LOSSES)),
)
def test_lifetime_findings_agree_with_pytorch(
    store: str, carry: str, backward: str, steps: int, validation: str, losses: str, tmp_path: Path
) -> None:
    check(store, carry, backward, steps, tmp_path, validation, losses)


KEPT, ERROR, PREDICTED = "graph_kept_alive", "backward_through_freed_graph", "predicted backward_through_freed_graph"
H_LINE = "h = torch.tanh(x @ w + state)"


def case(
    name: str, store: str, carry: str, backward: str, steps: int, *expected: tuple[str, str], **more: str
) -> object:
    """A named program and each finding it must get: (kind, the code of its line)."""
    return pytest.param(store, carry, backward, steps, more.get("validation", "none"), more.get("losses", "one"),
                        list(expected), id=name)  # fmt: skip


REGRESSIONS = [
    case("losses_appended", "list", "none", "each_step", 3, (KEPT, "store.append(loss)")),
    case("dict_of_lists", "dict_list", "none", "each_step", 3, (KEPT, "history['loss'].append(loss)")),
    case("item_stored", "list_item", "none", "each_step", 3),
    case("detach_stored", "list_detach", "none", "each_step", 3),
    # PyTorch FAQ's `total_loss += loss`: backward freed each loss's saved tensors, the nodes still grow
    case("running_sum", "sum", "none", "each_step", 3, (KEPT, "acc = acc + loss")),
    case("running_sum_no_backward", "sum", "none", "never", 3, (KEPT, "acc = acc + loss")),
    # `acc + loss * n` saves `n`, so its own graph is not spent, but it reaches the freed graph only through `loss`
    case("scaled_running_sum", "scaled_sum", "none", "each_step", 3, (KEPT, "acc = acc + loss * x.size(0)")),
    # ... and step 0's loss, never differentiated, reaches the state step 1's backward freed, but on a side branch
    # made before that backward: nothing the program runs backpropagates it (issue 36), no note either
    case(
        "scaled_running_sum_carried", "scaled_sum", "graph", "every_other", 3,
        (PREDICTED, H_LINE), (KEPT, "acc = acc + loss * x.size(0)"),
    ),
    case("item_summed", "iadd_item", "none", "each_step", 3),
    case("float_summed", "sum_float", "none", "each_step", 3),
    case("attribute_holds_last", "attr", "none", "each_step", 3),
    case("method_appends", "attr_list", "none", "each_step", 3, (KEPT, "self.history.append(out)")),
    case("global_summed_in_function", "global_sum", "none", "each_step", 3, (KEPT, "running = running + value")),
    case("last_two_in_variables", "previous", "none", "each_step", 3),
    case("validation_no_grad", "none", "none", "each_step", 3, validation="no_grad_sum"),
    case("validation_with_grad", "none", "none", "each_step", 3, (KEPT, "val = val + (x @ w).sum()"), validation="sum"),
    case("validation_list_no_grad", "none", "none", "each_step", 3, validation="no_grad_list"),
    case(
        "validation_list_with_grad", "none", "none", "each_step", 3, (KEPT, "val_losses.append((x @ w).sum())"),
        validation="list",
    ),
    case("gradient_accumulation_odd", "none", "none", "accumulate", 3),
    case("gradient_accumulation_even", "none", "none", "accumulate", 4),
    # both losses were made before the one backward, which runs in the loop: the next cycle stores more
    case("accumulated_losses_stored", "list", "none", "accumulate", 2, (KEPT, "store.append(loss)")),
    case("gan_two_losses_one_backward", "none", "none", "each_step", 3, losses="two"),
    case("gan_losses_stored", "list", "none", "each_step", 3, (KEPT, "store.append(loss)"), losses="two"),
    case("carried_backward_each_step", "none", "graph", "each_step", 3, (ERROR, H_LINE)),
    case("carried_no_backward", "none", "graph", "never", 3, (KEPT, H_LINE)),
    case("carried_every_other_odd", "none", "graph", "every_other", 3, (PREDICTED, H_LINE)),
    case("carried_every_other_even", "none", "graph", "every_other", 4, (ERROR, H_LINE)),
    case("carried_gradient_accumulation", "none", "graph", "accumulate", 3, (PREDICTED, H_LINE)),
    # loss0 was built before the step-1 backward freed its hidden state (through `state`): a side branch that
    # backward passed by, which the program never backpropagates: no prediction (issue 36)
    case("stored_loss_on_freed_state", "list", "graph", "every_other", 2, (KEPT, "store.append(loss)")),
    case(
        "method_appends_carried", "attr_list", "graph", "every_other", 3,
        (KEPT, "self.history.append(out)"), (PREDICTED, H_LINE),
    ),
    case("running_sum_carried", "sum", "graph", "every_other", 3, (PREDICTED, H_LINE), (KEPT, "acc = acc + loss")),
    case(
        "global_sum_carried", "global_sum", "graph", "every_other", 3,
        (KEPT, "running = running + value"), (PREDICTED, H_LINE),
    ),
    case("truncated_bptt", "none", "detached", "each_step", 3),
    case("truncated_bptt_every_other", "none", "detached", "every_other", 3),
    case("detached_no_backward", "none", "detached", "never", 3),
    case("losses_appended_no_backward", "list", "detached", "never", 3, (KEPT, "store.append(loss)")),
    # the carried chain grows, the two variables do not: one finding, at the chain
    case("carried_chain_split_by_variables", "previous", "graph", "never", 2, (KEPT, H_LINE)),
    case(
        "carried_and_validation_with_grad", "none", "graph", "never", 3,
        (KEPT, H_LINE), (KEPT, "val = val + (x @ w).sum()"), validation="sum", losses="two",
    ),
]


@pytest.mark.parametrize("store, carry, backward, steps, validation, losses, expected", REGRESSIONS)
def test_lifetime_regressions(
    store: str, carry: str, backward: str, steps: int, validation: str, losses: str,
    expected: list[tuple[str, str]], tmp_path: Path,
) -> None:  # fmt: skip
    text = source(store, carry, backward, steps, validation, losses)
    lines = [line.strip() for line in text.splitlines()]
    findings = check(store, carry, backward, steps, tmp_path, validation, losses)
    got = sorted(((f"predicted {f.kind.value}" if f.predicted else f.kind.value), f.line) for f in findings)
    assert all(lines.count(code) == 1 for _, code in expected), expected  # each expected line is one line
    assert got == sorted((kind, lines.index(code) + 1) for kind, code in expected), (text, got)


def test_a_library_cache_on_a_freed_graph_is_no_prediction(tmp_path: Path) -> None:
    """`dist.sample()` caches `probs` (a softmax of the logits) inside the Distribution; the loss's backward frees the
    logits' graph below it. PyTorch would raise on `dist.probs.sum().backward()`, but the program never stored it."""
    text = """\
import torch
torch.manual_seed(0)
w = torch.randn(4, 2, requires_grad=True)
for step in range(3):
    dist = torch.distributions.Categorical(logits=torch.randn(4) @ w)
    action = dist.sample()
    loss = -dist.log_prob(action)
    loss.backward()
"""
    namespace: dict[str, object] = {}
    exec(compile(text, "<program>", "exec"), namespace)
    probs = namespace["dist"].probs  # type: ignore[attr-defined]
    assert _built_on_freed(probs)  # what a walk into library objects would call a prediction
    truth = Truth(text)
    assert truth.error is None and not truth.built_on_freed
    assert findings_of(text, tmp_path) == []
