"""Training steps as the views number them: each backward call that reached autograd nodes no earlier backward
had reached starts one (leaves excluded: parameters are shared by all steps). Derived here once; the graph view's
steps (picture/steps.py) and --verify's measurements (which step was measured) both read it."""

from __future__ import annotations

import re
from typing import Any

from ..model import Event, NodeRecord, Trace


def is_leaf(node: NodeRecord) -> bool:
    return node.variable is not None or node.name == "AccumulateGrad"


def backward_steps(trace: Trace) -> list[tuple[Event, list[str]]]:
    """Per step, in program order: its backward event and the nodes it reached first (in the order reached)."""
    nodes = trace.nodes
    claimed: set[str] = set()
    steps: list[tuple[Event, list[str]]] = []
    for event in trace.events:
        if event.kind.value != "backward":
            continue
        roots = event.data.get("roots") or ([event.tensor] if event.tensor else [])
        stack = []
        for tid in roots:
            record = trace.tensors.get(tid)
            if record is not None and record.grad_fn in nodes:
                stack.append(record.grad_fn)
        reached: list[str] = []
        while stack:  # iterative: graphs of 20,000 nodes are normal
            nid = stack.pop()
            if nid in claimed or nid not in nodes:
                continue
            node = nodes[nid]
            if is_leaf(node) or node.seq > event.seq:
                continue
            claimed.add(nid)
            reached.append(nid)
            stack.extend(n for n in node.next if n is not None)
        if reached:
            steps.append((event, reached))
    return steps


def numbered_steps(trace: Trace) -> list[tuple[int, Event, list[str]]]:
    """`backward_steps` with each step's number in the run: 1..N inside the window, and for the steps the sentinel
    traced again after it, their number in the whole run (`Trace.run_steps`).

    Each thread's steps are its own: where the program's other threads trained too (their backward events name the
    thread), the tracing thread's steps come first, then each other thread's in turn (by name), so that a step's
    number does not depend on how the threads were scheduled. Returned in program order."""
    run = trace.run_steps()
    steps = backward_steps(trace)
    by_thread: dict[str | None, list[tuple[Event, list[str]]]] = {}
    for event, reached in steps:
        by_thread.setdefault(thread_of(event), []).append((event, reached))
    numbers: dict[int, int] = {}
    last = 0
    for thread in sorted(by_thread, key=_thread_order):
        for event, _ in by_thread[thread]:
            number = run.get(event.seq, last + 1) if thread is None else last + 1
            if number <= last:  # gradient accumulation in a step traced again: numbered as traced
                number = last + 1
            numbers[event.seq] = last = number
    return [(numbers[event.seq], event, reached) for event, reached in steps]


def thread_of(event: Event) -> str | None:
    """The name of the program's thread that made a backward or optimizer step event; None: the tracing thread."""
    thread = event.data.get("thread")
    return thread if isinstance(thread, str) else None


def _thread_order(thread: str | None) -> tuple[Any, ...]:
    """The tracing thread first, then the others by name, numbers in names compared as numbers (Thread-2 < Thread-10)."""
    if thread is None:
        return ()
    return (1, *((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", thread)))


def step_numbers(trace: Trace) -> dict[int, int]:
    """Backward event seq -> the number of the step it starts in the run (the K of `--step K`)."""
    return {event.seq: number for number, event, _ in numbered_steps(trace)}
