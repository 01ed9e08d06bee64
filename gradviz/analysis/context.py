"""What the cut, dead-parameter, saved-tensor and update passes share: the trace's graphs and backwards, computed
once (`Context`), and how messages word tensors, aliases and lines (`source_line` serves the lifetime passes too)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import networkx as nx

from ..model import Event, EventKind, Trace
from .evidence import Facts
from .graphs import Dataflow, autograd_graph, freed_at
from .steps import numbered_steps


@dataclass
class Context:
    """What every pass needs, computed once per trace."""

    trace: Trace
    flow: Dataflow
    autograd: nx.DiGraph
    backwards: list[Event]
    freed_at: dict[str, int]  # node id -> seq of the backward that freed its saved tensors
    _backwards_through: dict[str, list[int]] | None = None  # node id -> indexes in `backwards` that ran through it
    _alive_reach: set[str] | None = None  # nodes a tensor alive at the end can still backpropagate through
    _facts: Facts | None = None
    _steps: tuple[list[int], list[int]] | None = None  # each step's first backward and its number (analysis/steps.py)

    @property
    def facts(self) -> Facts:
        """The indexes evidence is read from (aliases, first uses), built on first use."""
        if self._facts is None:
            self._facts = Facts(self.trace)
        return self._facts

    @classmethod
    def of(cls, trace: Trace) -> Context:
        backwards = trace.events_of(EventKind.BACKWARD)
        return cls(trace, Dataflow.of(trace), autograd_graph(trace), backwards, freed_at(backwards))

    def step_of(self, backward: Event | None) -> int | None:
        """The step a backward ran in, as the views number steps (the last one started at or before it)."""
        if backward is None:
            return None
        if self._steps is None:
            numbered = numbered_steps(self.trace)
            self._steps = ([event.seq for _, event, _ in numbered], [number for number, _, _ in numbered])
        seqs, numbers = self._steps
        at = bisect.bisect_right(seqs, backward.seq)
        return numbers[at - 1] if at > 0 else None

    # ------------------------------------------------------------ wording helpers
    def at(self, file: str | None, line: int | None) -> str:
        return line_at(self.trace, file, line)

    def line_of(self, event: Event | None) -> str:
        """`at` for an event's line (a backward's, a write's)."""
        return line_at(self.trace, event.location.file, event.location.line) if event and event.location else "an unknown line"

    def name(self, tid: str | None) -> str:
        if tid is None:
            return "a tensor"
        record = self.trace.tensors[tid]
        if record.parameter or record.buffer or record.names:
            return f"`{record.label}`"
        if record.source is not None:
            source = self.trace.tensors[record.source]
            made = {"data": ".data", "detach": ".detach()"}.get(record.origin)
            if made and (source.parameter or source.names):
                return f"`{source.label}{made}`"
            return f"a view of {self.name(source.id)}"
        made_at = f" made at {self.at(record.created.file, record.created.line)}" if record.created is not None else ""
        made = self.facts.namer.made(tid)  # the name every view gives it (`err_real.add(err_fake)`)
        if made is not None:
            return f"`{made}`{made_at}"
        return f"an unnamed tensor of shape {tuple(record.shape)}{made_at}"  # never our ids: the user has no `t66`

    def names(self, tids: list[str]) -> str:
        """Each name once, in first-seen order, with how often it came up: "`loss` (47 times)"."""
        counts: dict[str, int] = {}
        for tid in tids:
            name = self.name(tid)
            counts[name] = counts.get(name, 0) + 1
        return ", ".join(name if n == 1 else f"{name} ({n} times)" for name, n in counts.items())

    def alias(self, tid: str) -> str:
        """`c`, which is `out.data` — how a tensor came to share memory with another."""
        record = self.trace.tensors[tid]
        if record.source is None or not (record.names or record.parameter):
            return self.name(tid)
        source = self.trace.tensors[record.source]
        made = {"data": ".data", "detach": ".detach()"}.get(record.origin)
        if made:
            return f"{self.name(tid)}, which is `{source.label}{made}`"
        if record.origin == "view":
            return f"{self.name(tid)}, a view of {self.name(source.id)}"
        return self.name(tid)

    def node_name(self, nid: str) -> str:
        return self.trace.nodes[nid].name

    def where(self, event: Event) -> tuple[str | None, int | None, str]:
        loc = event.location
        return (loc.file, loc.line, loc.code.strip()) if loc else (None, None, "")

    def backward_after(self, seq: int, node: str) -> Event | None:
        """The first backward after `seq` that runs through `node`."""
        if self._backwards_through is None:
            through: dict[str, list[int]] = {}
            for index, event in enumerate(self.backwards):
                for nid in event.data.get("reached_nodes", ()):
                    through.setdefault(nid, []).append(index)
            self._backwards_through = through
        indexes = self._backwards_through.get(node, [])
        # backwards are in program order: bisect on their seqs
        at = bisect.bisect_right(indexes, seq, key=lambda i: self.backwards[i].seq)
        return self.backwards[indexes[at]] if at < len(indexes) else None

    def backward_at(self, seq: int) -> Event | None:
        """The backward event numbered `seq`."""
        return next((event for event in self.backwards if event.seq == seq), None)

    def pending_at_end(self, node: str) -> bool:
        """Whether `node` may still be backpropagated: alive at the end, and the program has not moved on.

        A graph that later backward calls passed by (a target computed with grad and only used detached) is one
        the program never differentiates; warning about it would be noise.
        """
        record = self.trace.nodes[node]
        if node in self.freed_at or (self.backwards and self.backwards[-1].seq > record.seq):
            return False
        if self._alive_reach is None:
            # one walk from every graph still alive at the end, not one per question
            alive = {t.grad_fn for t in self.trace.tensors.values() if t.freed is None and t.grad_fn is not None}
            reach = set(alive)
            stack = list(alive)
            while stack:
                for nxt in self.autograd.successors(stack.pop()):
                    if nxt not in reach:
                        reach.add(nxt)
                        stack.append(nxt)
            self._alive_reach = reach
        return node in self._alive_reach


def line_at(trace: Trace, file: str | None, line: int | None) -> str:
    """A line as its reader finds it: `line 5`, or `cell In[3], line 5` in a notebook (files IPython names)."""
    if line is None:
        return "an unknown line"
    label = trace.file_labels.get(file) if file else None
    return f"cell {label}, line {line}" if label else f"line {line}"


def source_line(trace: Trace, file: str | None, line: int | None) -> str:
    """The line of `file` as the program wrote it, stripped; "" when the trace has no such line."""
    if file is None or line is None or file not in trace.sources:
        return ""
    lines = trace.sources[file].splitlines()
    # the line as written, as a finding's `code` quotes it (a message quotes `statement(code)`: no comment)
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""
