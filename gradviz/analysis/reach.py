"""Where values flow, for many questions at once, in one sweep over the dataflow: linear in the trace's length.

Asking `Dataflow.descendants` or `.ancestors` once per cut, per backward or per leaf walks the history again each
time, which is quadratic over a training run (a hidden state detached every step flows into every later step).
These sweeps answer all the questions of a pass together, in one pass over the steps in (or against) time order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..model import Event
from .graphs import Dataflow


@dataclass(frozen=True)
class Reach:
    """The first backward a value reaches, and the roots of that backward it flows into."""

    backward: Event
    roots: frozenset[str]


def _earlier(a: Reach | None, b: Reach | None) -> Reach | None:
    """The earlier of two reaches; at the same backward, the roots of both."""
    if a is None:
        return b
    if b is None or a.backward.seq < b.backward.seq:
        return a
    if b.backward.seq < a.backward.seq:
        return b
    if b.roots <= a.roots:
        return a
    return Reach(a.backward, a.roots | b.roots)


def first_backward_reached(
    flow: Dataflow, backwards: Sequence[Event], queries: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], Reach]:
    """For each (tensor, time): the first backward whose roots `tensor`'s value as of `time` flows into before it.

    The same answer as `flow.descendants(tensor, time)` met with each backward's roots, for every query in one
    sweep against time order: `reach[t]` holds, for the time the sweep has reached, the first backward that
    anything consuming `t` from then on flows into. Queries without an answer are left out.
    """
    # (time, order, item): at one time, queries see only what comes strictly later; backwards seed their roots
    items: list[tuple[int, int, object]] = [(step.seq, 2, index) for index, step in enumerate(flow.steps)]
    items += [(event.seq, 1, event) for event in backwards]
    items += [(time, 0, (tensor, time)) for tensor, time in set(queries)]
    items.sort(key=lambda item: (item[0], item[1]), reverse=True)
    steps = flow.steps
    reach: dict[str, Reach] = {}
    answers: dict[tuple[str, int], Reach] = {}
    for _, order, item in items:
        if order == 2:
            assert isinstance(item, int)
            step = steps[item]
            best: Reach | None = None
            for dst in step.outputs:
                best = _earlier(best, reach.get(dst))
            if best is None:
                continue
            for src in step.inputs:
                merged = _earlier(reach.get(src), best)
                if merged is not None:
                    reach[src] = merged
        elif order == 1:
            assert isinstance(item, Event)
            event = item
            for root in event.data.get("roots", []):
                reach[root] = Reach(event, frozenset((root,)))  # nothing can be reached earlier than this backward
        else:
            assert isinstance(item, tuple)
            tensor, time = item
            found = reach.get(tensor)
            if found is not None:
                answers[(tensor, time)] = found
    return answers


def first_source_reached(
    flow: Dataflow, candidates: set[str], queries: Sequence[tuple[int, str]]
) -> dict[int, set[str]]:
    """For each query (time, tensor), sorted by time: the candidates whose values flowed into `tensor` by `time`
    (calls at `time` included), `tensor` itself if it is one. Candidates are few (parameters): sets stay small.

    The same as `tensor in candidates` or `flow.ancestors(tensor, time + 1)` met with `candidates`, in one sweep.
    """
    taint: dict[str, frozenset[str]] = {}
    empty: frozenset[str] = frozenset()
    answers: dict[int, set[str]] = {}
    steps = flow.steps
    position = 0
    for number, (time, tensor) in enumerate(queries):
        while position < len(steps) and steps[position].seq <= time:
            step = steps[position]
            position += 1
            for dst in step.outputs:
                incoming = taint.get(dst, empty)
                for src in step.inputs:
                    if src == dst:
                        continue
                    carried = taint.get(src, empty)
                    if src in candidates:
                        carried = carried | {src}
                    if not carried <= incoming:
                        incoming = incoming | carried
                if incoming:
                    taint[dst] = incoming
        found = set(taint.get(tensor, empty))
        if tensor in candidates:
            found.add(tensor)
        answers[number] = found
    return answers
