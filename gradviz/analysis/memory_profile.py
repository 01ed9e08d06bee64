"""The memory profile: bytes of saved tensors held by live autograd graphs over the run, its peak and its holders, and
the growth of kept-alive graphs (what the graph-memory view draws)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import EventKind, Trace
from .kept_alive import kept_alive
from .lifetime import END, Lifetimes, lifetimes


@dataclass
class MemoryProfile:
    """Bytes of saved tensors held by live autograd graphs over the run, for the graph-memory view."""

    points: list[tuple[int, int]]  # (seq, bytes held from then on)
    backwards: list[tuple[int, int | None]]  # (seq, line) of each backward
    peak: tuple[int, int] | None  # (seq, bytes)
    top_holders: list[tuple[str, int]]  # ("Linear at train.py:12", bytes) at the peak, largest first
    # (seq growth starts, line, bytes per step, nodes per step, "step" or "iteration": what the graphs are of)
    kept: list[tuple[int, int | None, int, int, str]]
    end: int  # the last seq of the run
    live_nodes: list[tuple[int, int]] = field(default_factory=list)  # (seq, autograd nodes alive from then on)


def memory_profile(trace: Trace, *, top: int = 5, life: Lifetimes | None = None) -> MemoryProfile:
    """`life`: the trace's lifetimes when the caller has them already (the picture model)."""
    life = lifetimes(trace) if life is None else life
    points = life.held_bytes()
    peak = max(points, key=lambda p: p[1]) if points and max(p[1] for p in points) > 0 else None
    holders: dict[str, int] = {}
    if peak is not None:
        for start, stop, nid in life.intervals:
            if start <= peak[0] < stop:
                node = trace.nodes[nid]
                where = trace.where(node.created.file, node.created.line) if node.created else "?"
                key = f"module {node.module} at {where}" if node.module else f"{node.name} at {where}"
                holders[key] = holders.get(key, 0) + life.saved_bytes[nid]
    kept = [
        (g.first_seq, g.line, g.saved_bytes // max(g.steps, 1), len(g.nodes) // max(g.steps, 1),
         "step" if g.across_backwards else "iteration")
        for g in kept_alive(trace, life)
    ]
    seqs = [e.seq for e in trace.events] + [op.seq for op in trace.ops[-1:]] + [p[0] for p in points[-1:]]
    backwards = [(e.seq, e.location.line if e.location else None) for e in trace.events_of(EventKind.BACKWARD)]
    changes: dict[int, int] = {}  # a node lives from its creation until nothing holds it (death)
    for nid, node in trace.nodes.items():
        changes[node.seq] = changes.get(node.seq, 0) + 1
        death = life.death.get(nid, END)
        if death != END:
            changes[death] = changes.get(death, 0) - 1
    live, alive = [], 0
    for seq in sorted(changes):
        alive += changes[seq]
        live.append((seq, alive))
    return MemoryProfile(
        points, backwards, peak, sorted(holders.items(), key=lambda kv: -kv[1])[:top], kept, max(seqs, default=0),
        live,
    )
