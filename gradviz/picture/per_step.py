"""Aliases a training loop makes again in every step (`x = fake.detach()`, `w = p.data`): one drawn for all, ×N."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..analysis.names import number_ranges
from ..model import Trace

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from .steps import Step

__all__ = ["Repeat", "fold_repeats", "per_step_repeats", "steps_text"]


@dataclass
class Repeat:
    """`.data` / `.detach()` aliases made by one line, of the same tensor (by name), one in each of several steps."""

    members: list[str]  # tensor ids, in creation order
    drawn: list[str]  # the members drawn: those a finding names, else the last one
    steps: list[int]  # the step of each member (1-based, as `--step K` and the graph view count them)
    line: int | None
    kind: str = "data"  # the tensors' origin: "data" or "detach"
    last_step: int = 0  # how many steps (backward calls) the trace has: a higher step number is after the last one

    @property
    def count(self) -> int:
        return len(self.members)

    @property
    def folded(self) -> list[str]:
        """The members not drawn: the drawn one stands for them."""
        return [tid for tid in self.members if tid not in self.drawn]

    def title(self) -> str:
        """ "×3 (steps 1, 3, 5)": how many, and in which steps."""
        return f"\N{MULTIPLICATION SIGN}{self.count} ({self.span()})"

    def span(self) -> str:
        """ "steps 1-32; 2 after the last backward": the steps the members were made in."""
        inside = sorted({n for n in self.steps if n <= self.last_step}) if self.last_step else sorted(set(self.steps))
        after = len([n for n in self.steps if self.last_step and n > self.last_step])
        where = f"steps {steps_text(inside)}" if inside else ""
        if after:
            where += ("; " if where else "") + f"{after} after the last backward"
        return where


def per_step_repeats(trace: Trace, findings: Sequence[Finding], steps: Sequence[Step]) -> list[Repeat]:
    """The aliases made at one line in two steps or more, grouped by (kind, line, what they alias, their order in the
    step: the k-th such alias of a step goes with every step's k-th); the ones left single go with the others of
    their line. Those made after the last backward (an evaluation) count as step len(steps) + 1; titles say so."""
    ends = [s.seq for s in steps]
    last = steps[-1].number if steps else 0
    named = {tid for f in findings for tid in f.tensors}
    groups: dict[tuple[object, ...], list[tuple[int, str]]] = {}
    per_step: dict[tuple[object, ...], int] = {}
    for t in sorted(trace.tensors.values(), key=lambda t: t.seq):
        if t.origin not in ("data", "detach") or t.source not in trace.tensors:
            continue
        at = bisect.bisect_left(ends, t.seq)  # len(ends): after the last backward (an evaluation)
        step = steps[at].number if at < len(steps) else last + 1  # (a step traced again keeps its run number)
        source = trace.tensors[t.source]
        of = source.parameter or (source.names[0] if source.names else
                                  (source.op, source.created.line if source.created else None, tuple(source.shape)))
        where = (t.created.file, t.created.line) if t.created else (None, None)
        key = (t.origin, *where, of)
        order = per_step[key + (step,)] = per_step.get(key + (step,), -1) + 1
        groups.setdefault(key + (order,), []).append((step, t.id))
    # what is left single (a step making more of them than the others: an evaluation loop between two training
    # steps detaching its state at the same line) goes with the others of its line, whatever its order in the step
    singles: dict[tuple[object, ...], list[tuple[int, str]]] = {}
    for key, members in list(groups.items()):
        if len(members) == 1:
            singles.setdefault(key[:-1], []).extend(members)
            del groups[key]
    for key, members in singles.items():
        groups[key + ("rest",)] = members
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        ids = [tid for _, tid in members]
        in_steps = [tid for step, tid in members if step <= last]  # the last of a training step, if any
        drawn = [tid for tid in ids if tid in named] or (in_steps or ids)[-1:]
        created = trace.tensors[ids[0]].created
        line = created.line if created else None
        out.append(Repeat(ids, drawn, [step for step, _ in members], line, trace.tensors[ids[0]].origin, last))
    return out


def fold_repeats(
    trace: Trace, findings: Sequence[Finding], repeats: Sequence[Repeat]
) -> tuple[set[str], dict[str, str]]:
    """The tensors left out because a drawn alias stands for them, and the ×N mark of each tensor drawn for several.

    With a folded alias goes what it aliases (`fake` of each step), unless something drawn shares that memory; the
    drawn alias and what shares its memory (its `fake`) carry the mark. A tensor a finding names is
    never left out. Parameters are never left out nor marked: one parameter serves every step. A tensor in the
    drawn alias's memory is marked only if copies of it (same kind, same line) were left out with the others."""
    named = {tid for f in findings for tid in f.tensors}
    folded = {tid for r in repeats for tid in r.folded} - named
    drawn = named | {tid for r in repeats for tid in r.drawn}
    kept_storages = {trace.tensors[tid].storage for tid in drawn if tid in trace.tensors}
    folded_storages = {trace.tensors[tid].storage for tid in folded} - kept_storages
    folded |= {t.id for t in trace.tensors.values()
               if t.storage in folded_storages and t.id not in named and t.parameter is None
               and t.origin != "parameter"}

    def place(tid: str) -> tuple[object, ...]:
        t = trace.tensors[tid]
        return (t.origin, t.created.file, t.created.line) if t.created else (t.origin, None, None)

    folded_places = {place(tid) for tid in folded}  # what other steps' copies were: `fake = G(z)` at line 24
    marks: dict[str, str] = {}
    for r in repeats:
        if len(r.drawn) == 1:
            marks[r.drawn[0]] = r.title()
    for r in repeats:
        if len(r.drawn) != 1:
            continue
        alias = trace.tensors[r.drawn[0]]
        for t in trace.tensors.values():
            if (t.storage == alias.storage and t.id not in marks and t.id not in folded and t.parameter is None
                    and place(t.id) in folded_places):
                marks[t.id] = r.title()
    return folded, marks


def steps_text(numbers: Sequence[int]) -> str:
    """`1-100`, `1-120, 122-150`, `3, 7, 9`, `1, 3, …, 199`: step numbers as a person writes them (runs as
    analysis.names.number_ranges writes them everywhere), at most six parts."""
    numbers = sorted(numbers)
    parts = number_ranges(numbers).split(", ")
    if len(parts) <= 6:
        return ", ".join(parts)
    gap = numbers[1] - numbers[0]
    if all(b - a == gap for a, b in zip(numbers, numbers[1:])):  # every other step, every third...
        return f"{numbers[0]}, {numbers[1]}, \N{HORIZONTAL ELLIPSIS}, {numbers[-1]}"
    return ", ".join(parts[:6]) + f", \N{HORIZONTAL ELLIPSIS} ({len(numbers)} steps)"