"""The picture model: what every view of one (trace, findings) reads, each fact derived once, on first use.

Steps and their rolls, the module hierarchy, graph lifetimes and the memory profile, tensor names (one `Namer`),
the graph annotations of the findings, which autograd nodes are leaves and which are "the same op" of a loop, the
timeline's rows and the memory headline. `render()` builds one per call, or takes one to share between outputs
(the CLI's several `-o` files, the page and the static picture in a notebook); no view derives these again."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from ..analysis.findings import Finding
from ..analysis.hierarchy import Hierarchy, module_hierarchy
from ..analysis.lifetime import Lifetimes, lifetimes
from ..analysis.memory_profile import MemoryProfile, memory_profile
from ..analysis.names import Namer
from ..analysis.steps import is_leaf
from .annotate import Annotations, annotate
from .headline import headline
from .steps import Step, StepRoll, roll_steps, split_steps
from .timeline_rows import TimelineRow, timeline_rows

if TYPE_CHECKING:
    from ..model import Trace

__all__ = ["Picture"]


class Picture:
    """One trace and its findings (in report order), with every derived fact the views share."""

    def __init__(
        self, trace: Trace, findings: Sequence[Finding] = (), *, life: Lifetimes | None = None, namer: Namer | None = None
    ) -> None:
        """`life` and `namer`: the trace's lifetimes and names when the caller has them (a `Diagnosis` holds both)."""
        self.trace = trace
        self.findings: list[Finding] = sorted(findings, key=Finding.sort_key)
        if life is not None:
            self.__dict__["lifetimes"] = life  # the cached property's value, computed once by the analysis
        if namer is not None and namer.trace is trace:
            self.__dict__["namer"] = namer  # the names the findings' messages already use

    def of(self, trace: Trace, findings: Sequence[Finding]) -> bool:
        """Whether this picture is the one of `trace` and `findings` (a caller passing both checks it can reuse it)."""
        return trace is self.trace and sorted(findings, key=Finding.sort_key) == self.findings

    @cached_property
    def namer(self) -> Namer:
        return Namer(self.trace)

    @cached_property
    def annotations(self) -> Annotations:
        steps = self.steps
        step_of = {nid: step.number for step in steps for nid in step.nodes} if len(steps) > 1 else None
        return annotate(self.trace, self.findings, self.namer, step_of)

    @cached_property
    def steps(self) -> list[Step]:
        return split_steps(self.trace)

    @cached_property
    def rolls(self) -> tuple[list[StepRoll], dict[str, str]]:
        """Steps of one shape as one roll, and node -> its representative's node ((), {} for a single step)."""
        if len(self.steps) <= 1:
            return [], {}
        return roll_steps(self.trace, self.steps, self.annotations)

    @cached_property
    def hierarchy(self) -> Hierarchy:
        return module_hierarchy(self.trace)

    @cached_property
    def lifetimes(self) -> Lifetimes:
        return lifetimes(self.trace)

    @cached_property
    def memory_profile(self) -> MemoryProfile:
        return memory_profile(self.trace, life=self.lifetimes)

    @cached_property
    def leaves(self) -> frozenset[str]:
        """The autograd nodes that stand for a leaf tensor (its AccumulateGrad): the one leaf test every view reads."""
        return frozenset(nid for nid, node in self.trace.nodes.items() if is_leaf(node))

    @cached_property
    def op_tokens(self) -> dict[str, Hashable]:
        """Autograd node -> what makes two nodes "the same op" of a loop: kind, module, line, inputs, and the
        parameters it feeds (a loop reuses its weights; a stack of identical layers, each with its own weights, is
        not a loop). The graph view rolls loops by it, the page finds its loop boxes by it."""
        trace = self.trace
        tokens: dict[str, Hashable] = {}
        for nid, node in trace.nodes.items():
            params = []
            for nxt in node.next:
                record = trace.nodes.get(nxt) if nxt is not None else None
                tensor = trace.tensors.get(record.variable) if record is not None and record.variable else None
                if tensor is not None and (tensor.parameter is not None or tensor.origin == "parameter"):
                    params.append(tensor.id)
            tokens[nid] = (node.name, node.module, node.created.line if node.created else None, len(node.next),
                           tuple(params))
        return tokens

    @cached_property
    def headline(self) -> str:
        """The graph-memory chart's one line (the chart and the page's chart show it)."""
        return headline(self.trace, self.memory_profile)

    def timeline_rows(self, max_rows: int | None) -> list[TimelineRow]:
        """The timeline's rows, at most `max_rows` (the timeline view and the page's scrubber bound them apart)."""
        cache: dict[int | None, list[TimelineRow]] = self.__dict__.setdefault("_timeline_rows", {})
        if max_rows not in cache:
            cache[max_rows] = timeline_rows(self.trace, self.findings, max_rows=max_rows, namer=self.namer)
        return cache[max_rows]
