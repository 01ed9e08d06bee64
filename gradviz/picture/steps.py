"""Training steps in the graph view: split the autograd graph by backward call, and draw steps of one shape once."""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Hashable

from ..analysis.steps import is_leaf as _is_leaf, numbered_steps, thread_of
from ..text import in_thread
from .simplify import MIN_REPEATS

if TYPE_CHECKING:
    from ..model import Trace
    from .annotate import Annotations

__all__ = [
    "Step", "StepRoll", "after_window", "only_step", "optimizer_steps", "rearmed_kind", "roll_steps", "split_steps",
    "traced_text",
]


@dataclass
class Step:
    """The autograd nodes one backward call reached first (leaves excluded: parameters are shared by all steps)."""

    number: int  # 1-based, in the whole run (a step traced again after the window: its own number): `--step K`
    seq: int  # the backward event
    line: int | None
    nodes: list[str]  # in creation order
    kind: str | None = None  # a step the sentinel traced again after the window: `validation after step 500`
    thread: str | None = None  # the program's thread that made it, where not the tracing thread: its steps are its own


@dataclass
class StepRoll:
    """Steps that built the same graph, drawn once (on `nodes`, the representative's) for all `numbers`."""

    id: str
    numbers: list[int]
    nodes: list[str]
    line: int | None
    marks: dict[str, list[int]] = field(default_factory=dict)  # representative node -> steps a finding was in
    notes: list[str] = field(default_factory=list)  # members drawn with other shapes: `step 38: batch of 17`
    difference: str | None = None  # how it differs from the main group of its backward line: `no carried state`
    # representative node of a loop whose iteration count differs between the members -> (fewest, most) of its copies
    # in one member; the representative's own count is its `most`: an RL episode of 5-7 moves
    spread: dict[str, tuple[int, int]] = field(default_factory=dict)
    # with gradient accumulation: the optimizer steps its members belong to (what `--steps N` counts), else None
    optimizer_steps: list[int] | None = None
    kind: str | None = None  # steps traced again after the window (Step.kind), rolled only with their own kind
    thread: str | None = None  # the program's thread that ran them, where several trained (Step.thread)

    @property
    def count(self) -> int:
        return len(self.numbers)


def split_steps(trace: Trace) -> list[Step]:
    """One `Step` per backward call that reached nodes no earlier backward had reached, in program order."""
    nodes = trace.nodes
    steps: list[Step] = []
    claimed: set[str] = set()
    for number, event, reached in numbered_steps(trace):  # re-traced steps keep their numbers in the run
        claimed.update(reached)
        line = event.location.line if event.location else None
        steps.append(Step(number, event.seq, line, reached, thread=thread_of(event)))
    # what a step built but its backward did not use (an LSTM's final state, a logged metric) belongs to that step
    # too, or every step would leave its own copy of it outside the picture of the step. A node made after a
    # backward, reading the graph that backward just used (`output.mean().item()` after `loss.backward()`), belongs
    # to that step, not to the next step: it carries nothing into that one.
    ends = [s.seq for s in steps]
    owner = {nid: index for index, step in enumerate(steps) for nid in step.nodes}
    for nid, node in sorted(nodes.items(), key=lambda item: (item[1].seq, item[0])):
        if nid in claimed or _is_leaf(node):
            continue
        at = bisect.bisect_left(ends, node.seq)
        read = [owner[n] for n in node.next if n is not None and n in owner and owner[n] < at]
        if read and max(read) == at - 1:  # the metric of the backward just made; an older graph read after the
            at -= 1  # loop (`print((err_real + err_fake).item())`) is drawn in no step, as before
        if at < len(steps):
            steps[at].nodes.append(nid)
            owner[nid] = at
    for step in steps:
        step.nodes.sort(key=lambda n: (nodes[n].seq, n))
        step.kind = rearmed_kind(trace, step.seq, step.number)
    return steps


def rearmed_kind(trace: Trace, seq: int, number: int | None = None) -> str | None:
    """`validation after step 500` for what the sentinel recorded again after the window at `seq` (the step the new
    thing ran in, step 501); `traced again after the validation after step 500` for the next step, which it recorded
    whole to see the changed program run (`number`: the step's number, 502); else None."""
    window = trace.window
    for entry in window.rearmed if window is not None else ():
        if entry.covers(seq):
            if number is not None and number > entry.step + 1:
                return f"traced again after the {entry.label()}"
            return entry.label()
    return None


class _Labels:
    """Structural labels of autograd nodes, shared by all steps: two nodes get the same label when they are the same
    op (kind, module, line) fed by inputs of the same labels. Shapes are left out (a last partial batch is the same
    graph), and so is the order nodes were first seen in (the first step meets some of them in another order)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.intern: dict[Hashable, int] = {}

    def _input(self, nxt: str | None, inside: dict[str, int]) -> Hashable:
        if nxt is None:
            return None
        if nxt in inside:
            return inside[nxt]
        node = self.trace.nodes.get(nxt)
        if node is not None and _is_leaf(node):
            tensor = self.trace.tensors.get(node.variable) if node.variable else None
            if tensor is not None and tensor.parameter:
                return ("leaf", tensor.parameter)
            # an input that requires grad, a new tensor every step: the same input if it has the same name
            return ("leaf", tensor.names[0] if tensor is not None and tensor.names else None)
        return "earlier"  # a value carried from an earlier step (state not detached)

    def loose(self, step: Step) -> dict[str, Hashable]:
        """node id -> a label that forgets how often a loop ran: the op (kind, module, line) and the ops feeding it,
        repeated inputs counted once (`torch.cat(log_probs)` of 5 or of 7 episode moves is the same op)."""
        nodes = self.trace.nodes
        members = set(step.nodes)
        out: dict[str, Hashable] = {}
        for nid in step.nodes:
            node = nodes[nid]
            inputs: list[Hashable] = []
            for nxt in node.next:
                if nxt in members:
                    other = nodes[nxt]
                    key: Hashable = (other.name, other.module, other.created.line if other.created else None)
                else:
                    key = self._input(nxt, {})
                if not inputs or inputs[-1] != key:
                    inputs.append(key)
            out[nid] = (node.name, node.module, node.created.line if node.created else None, tuple(inputs))
        return out

    def of(self, step: Step) -> dict[str, int]:
        """node id -> label, for every node of `step` (inputs first: an iterative post-order walk)."""
        nodes = self.trace.nodes
        members = set(step.nodes)
        labels: dict[str, int] = {}
        for start in step.nodes:
            if start in labels:
                continue
            stack: list[tuple[str, bool]] = [(start, False)]
            while stack:
                nid, ready = stack.pop()
                if nid in labels:
                    continue
                node = nodes[nid]
                if not ready:
                    stack.append((nid, True))
                    stack.extend((n, False) for n in node.next if n in members and n not in labels)
                    continue
                key = (
                    node.name,
                    node.module,
                    node.created.line if node.created else None,
                    tuple(self._input(n, labels if n in members else {}) for n in node.next),
                )
                labels[nid] = self.intern.setdefault(key, len(self.intern))
        return labels


def _shape(trace: Trace, nid: str) -> tuple[int, ...] | None:
    node = trace.nodes[nid]
    tensor = trace.tensors.get(node.output) if node.output else None
    return tuple(tensor.shape) if tensor is not None else None


def _pairs(labels: dict[str, Hashable], step: Step) -> dict[Hashable, list[str]]:
    """label -> the step's nodes with that label, in creation order (how nodes of two steps are paired)."""
    out: dict[Hashable, list[str]] = {}
    for nid in step.nodes:
        out.setdefault(labels[nid], []).append(nid)
    return out


def roll_steps(trace: Trace, steps: list[Step], notes: Annotations) -> tuple[list[StepRoll], dict[str, str]]:
    """Group steps with equal graphs; returns the groups and node id -> its representative's node id.

    The representative is the last step of a group with the group's most common shapes, unless a finding sits in
    only some steps: then the first of those, so that what is drawn is a step the finding was in. Groups of one
    step are returned too (drawn as a step of their own when the trace has several steps). A group whose members
    differ in shapes says so in words (`step 5: batch of 6`); a group that differs from a larger group with the same
    backward line says how (`step 1: no carried state`).
    """
    labelling = _Labels(trace)
    labels: dict[int, dict[str, Hashable]] = {}
    groups: dict[tuple[Hashable, ...], list[Step]] = {}
    for step in steps:
        labels[step.number] = dict(labelling.of(step))
        signature = (step.kind, step.thread, *sorted(Counter(labels[step.number].values()).items()))
        groups.setdefault(signature, []).append(step)
    grouped = _merge_loop_counts(trace, labelling, sorted(groups.values(), key=lambda g: g[0].number), labels)
    rolls: list[StepRoll] = []
    mapping: dict[str, str] = {}
    for members in grouped:
        rolls.append(_roll(trace, members, labels, notes, f"step{len(rolls)}", mapping))
    _name_differences(trace, rolls, notes)
    accumulated = optimizer_steps(trace, steps)
    if accumulated is not None:
        for roll in rolls:
            roll.optimizer_steps = [accumulated[n] for n in roll.numbers]
    return rolls, mapping


def _roll(
    trace: Trace, members: list[Step], labels: dict[int, dict[str, Hashable]], notes: Annotations, roll_id: str,
    mapping: dict[str, str],
) -> StepRoll:
    """One group of steps as one roll, drawn as its representative; `mapping` learns node -> its representative's."""
    flagged = {nid for nid, _ in notes.saved}
    paired = {s.number: _pairs(labels[s.number], s) for s in members}
    counts = {label: [len(paired[s.number].get(label, [])) for s in members] for label in paired[members[0].number]}
    varying = {label for label, seen in counts.items() if len(set(seen)) > 1}
    # shapes compared on what every member has once per loop-free part: a longer episode's cat is longer
    order = sorted((label for label in paired[members[0].number] if label not in varying), key=repr)
    later = _downstream(trace, members, paired, varying)
    shapes = {
        s.number: tuple(_shape(trace, nid) for label in order for nid in paired[s.number][label] if nid not in later)
        for s in members
    }
    common = Counter(shapes.values()).most_common(1)[0][0]
    # a saved tensor's finding belongs to one step; cut edges repeat at one line and are drawn once anyway
    marked = [s for s in members if flagged.intersection(s.nodes)]
    protected = [s for s in members if notes.protected.intersection(s.nodes)]
    if marked and len(marked) < len(members):
        rep = marked[0]
    elif protected and len(protected) < len(members):
        rep = protected[0]
    elif varying:  # the longest run of the loop: every member's nodes have a node to be drawn as
        rep = max(reversed(members), key=lambda s: len(s.nodes))
    else:
        rep = [s for s in members if shapes[s.number] == common][-1]
    roll = StepRoll(roll_id, [s.number for s in members], list(rep.nodes), rep.line)
    for label in varying:
        for target in paired[rep.number].get(label, []):
            roll.spread[target] = (min(counts[label]), max(counts[label]))
    unknown = _map_members(roll, members, paired, rep, notes, mapping)
    if len(marked) == len(members):
        roll.marks = {}  # in every step: nothing to single out
    for target in unknown:  # "finding in steps 1-10" of a finding seen in more steps than kept would be false
        roll.marks.pop(target, None)
    data = {s.number: _data_rows(trace, s) for s in members}
    roll.notes = _shape_notes(shapes, shapes[rep.number], [s.number for s in members], data)
    roll.kind = rep.kind
    if roll.kind is not None:  # (the pictures' step titles end with the notes)
        roll.notes.insert(0, roll.kind)
    roll.thread = rep.thread
    if rep.thread is not None:  # (steps of different threads are never rolled together)
        roll.notes.insert(0, in_thread(rep.thread))
    return roll


def _map_members(
    roll: StepRoll, members: list[Step], paired: dict[int, dict[Hashable, list[str]]], rep: Step, notes: Annotations,
    mapping: dict[str, str],
) -> set[str]:
    """Each member step's node -> the representative's node of the same label (`mapping`), the steps each marked
    node's finding is in (`roll.marks`); returns the drawn nodes of findings whose every step is not known
    (annotate's `partial`)."""
    flagged = {nid for nid, _ in notes.saved}
    unknown: set[str] = set()
    for step in members:
        for label, ids in paired[step.number].items():
            targets = paired[rep.number].get(label, [])
            for i, nid in enumerate(ids):
                if not targets:
                    break
                target = targets[min(i, len(targets) - 1)]
                if nid in notes.partial:
                    unknown.add(target)
                elif nid in flagged:
                    roll.marks.setdefault(target, []).append(step.number)
                if nid != target:
                    mapping[nid] = target
    return unknown


def optimizer_steps(trace: Trace, steps: list[Step]) -> dict[int, int] | None:
    """Backward call number -> the optimizer step it contributes to (1-based), when the program accumulates
    gradients or calls a closure several times (L-BFGS): one optimizer, stepped after 2 or more backward calls.
    None otherwise: without an optimizer, or with a step per backward, or with several optimizers (a GAN), steps
    are counted as backward calls."""
    optimizers = {e.data.get("optimizer_id") for e in trace.events if e.kind.value == "optimizer_step"}
    if len(optimizers) != 1 or not steps:
        return None
    by_seq = {s.seq: s.number for s in steps}
    out: dict[int, int] = {}
    done, since, sizes = 0, 0, []
    for event in trace.events:
        if event.kind.value == "backward" and event.seq in by_seq:
            out[by_seq[event.seq]] = done + 1
            since += 1
        elif event.kind.value == "optimizer_step" and event.data.get("outcome") is None:
            sizes.append(since)
            done, since = done + 1, 0
    if not sizes or max(sizes) < 2:
        return None
    return out


def _merge_loop_counts(
    trace: Trace, labelling: _Labels, groups: list[list[Step]], labels: dict[int, dict[str, Hashable]]
) -> list[list[Step]]:
    """Join groups of steps whose graphs are the same but for how often a loop ran (RL episodes of 5-7 moves):
    the same backward line and the same ops, each loop of them run at least MIN_REPEATS times, so that it is drawn
    rolled. Labels of the joined steps become the loose ones, which pair an episode's moves across steps."""
    by_key: dict[Hashable, list[list[Step]]] = {}
    loose: dict[int, dict[str, Hashable]] = {}
    for members in groups:
        first = members[0]
        loose[first.number] = labelling.loose(first)
        by_key.setdefault((first.kind, first.thread, first.line, frozenset(loose[first.number].values())), []).append(members)
    out: list[list[Step]] = []
    for joined in by_key.values():
        if len(joined) == 1:
            out.append(joined[0])
            continue
        tallies = [Counter(loose[g[0].number].values()) for g in joined]
        varying = {label for label in tallies[0] if len({t[label] for t in tallies}) > 1}
        if any(t[label] < MIN_REPEATS for t in tallies for label in varying):
            out.extend(joined)  # a loop of 2 or 3 is drawn unrolled: those steps really are drawn differently
            continue
        members = sorted((s for g in joined for s in g), key=lambda s: s.number)
        for step in members:
            labels[step.number] = labelling.loose(step)
        out.append(members)
    return sorted(out, key=lambda g: g[0].number)


def _downstream(trace: Trace, members: list[Step], paired: dict[int, dict[Hashable, list[str]]], varying: set[Hashable]) -> set[str]:
    """Nodes of the members fed (directly or not) by a loop whose count varies: their shapes vary with it."""
    if not varying:
        return set()
    out: set[str] = set()
    for step in members:
        inside = set(step.nodes)
        tainted = {nid for label in varying for nid in paired[step.number].get(label, [])}
        for nid in step.nodes:  # creation order: inputs come first
            if nid in tainted or any(n in tainted for n in trace.nodes[nid].next if n in inside):
                tainted.add(nid)
        out |= tainted
    return out


def _data_rows(trace: Trace, step: Step) -> frozenset[int]:
    """First dims of the data a step's ops read: inputs that are neither parameters nor tensors needing grad (a batch
    of images, a target). A batch changes when these change; a layer taking 500 features instead of 784 does not."""
    members = {trace.nodes[nid].output for nid in step.nodes if trace.nodes[nid].output}
    rows: set[int] = set()
    for op in trace.ops:
        if not members.intersection(op.outputs):
            continue
        for tid in op.inputs:
            tensor = trace.tensors.get(tid)
            if tensor is not None and tensor.shape and not tensor.requires_grad and tensor.parameter is None:
                rows.add(tensor.shape[0])
    return frozenset(rows)


def _shape_notes(
    shapes: dict[int, tuple[tuple[int, ...] | None, ...]], drawn: tuple[tuple[int, ...] | None, ...], numbers: list[int],
    data: dict[int, frozenset[int]],
) -> list[str]:
    """`steps 5, 10: batch of 6` for the members whose shapes are not the ones drawn, `shapes differ: …` where the
    data's first dim is the same and something else changed."""
    odd: dict[str, list[int]] = {}
    drawn_data = next((data[n] for n in numbers if shapes[n] == drawn), frozenset())
    for number in numbers:
        if shapes[number] == drawn:
            continue
        pairs = [(a, b) for a, b in zip(drawn, shapes[number]) if a != b and a is not None and b is not None]
        batches = {b[0] for a, b in pairs if len(a) == len(b) and a[1:] == b[1:] and a[0] != b[0]}
        if (pairs and len(batches) == 1 and all(len(a) == len(b) and a[1:] == b[1:] for a, b in pairs)
                and data[number] != drawn_data and next(iter(batches)) in data[number]):
            words = f"batch of {batches.pop()}"
        elif pairs:
            a, b = pairs[0]
            words = f"shapes differ: {b} where the drawn step has {a}"
        else:
            words = "shapes differ"
        odd.setdefault(words, []).append(number)
    return [f"step{'s' if len(n) > 1 else ''} {', '.join(map(str, n))}: {words}" for words, n in odd.items()]


def _name_differences(trace: Trace, rolls: list[StepRoll], notes: Annotations) -> None:
    """Say in words how a group differs from the largest group with the same backward line (`no carried state`), of
    the same thread: two threads training models of their own run different modules by design, not by accident."""
    for roll in rolls:
        main = max((r for r in rolls if r.line == roll.line and r.thread == roll.thread),
                   key=lambda r: (r.count, -r.numbers[0]))
        if main is roll:
            continue
        roll.difference = _difference(trace, roll, main, notes)


def _difference(trace: Trace, roll: StepRoll, main: StepRoll, notes: Annotations) -> str:
    nodes = trace.nodes
    # the graph an earlier `.detach()` cut off, built before this backward and used by none: drawn in this step
    mine_cut = [c for c in notes.cuts if c.source in set(roll.nodes)]
    if mine_cut and not any(c.source in set(main.nodes) for c in notes.cuts):
        what = mine_cut[0].label.removeprefix("\N{BLACK SCISSORS} ").replace("  line ", " at line ")
        return f"also holds the graph cut off by {what}"

    def carried(r: StepRoll) -> int:
        members = set(r.nodes)
        return sum(1 for nid in r.nodes for n in nodes[nid].next
                   if n is not None and n not in members and n in nodes and not _is_leaf(nodes[n]))

    mine, theirs = carried(roll), carried(main)
    if theirs and not mine:
        return "no carried state"
    if mine and not theirs:
        return "carries state from an earlier step"
    own = Counter(nodes[n].module for n in roll.nodes if nodes[n].module)
    other = Counter(nodes[n].module for n in main.nodes if nodes[n].module)
    more = [m for m in own if m is not None and m not in other]
    fewer = [m for m in other if m is not None and m not in own]
    words = []
    if more:
        words.append("also runs " + ", ".join(more[:3]) + (", \N{HORIZONTAL ELLIPSIS}" if len(more) > 3 else ""))
    if fewer:
        words.append("does not run " + ", ".join(fewer[:3]) + (", \N{HORIZONTAL ELLIPSIS}" if len(fewer) > 3 else ""))
    if words:
        return "; ".join(words)
    delta = len(roll.nodes) - len(main.nodes)
    if delta:
        names = Counter(nodes[n].name for n in roll.nodes) - Counter(nodes[n].name for n in main.nodes)
        if delta < 0:
            names = Counter(nodes[n].name for n in main.nodes) - Counter(nodes[n].name for n in roll.nodes)
        top = ", ".join(f"{n} \N{MULTIPLICATION SIGN}{c}" if c > 1 else n for n, c in names.most_common(2))
        return f"{abs(delta)} {'more' if delta > 0 else 'fewer'} op{'s' if abs(delta) != 1 else ''}" + (f" ({top})" if top else "")
    def parameters(r: StepRoll) -> list[str]:
        found: dict[str, None] = {}
        for nid in r.nodes:
            for nxt in nodes[nid].next:
                leaf = nodes.get(nxt) if nxt is not None else None
                tensor = trace.tensors.get(leaf.variable) if leaf is not None and leaf.variable else None
                if leaf is not None and _is_leaf(leaf) and tensor is not None and tensor.parameter:
                    found.setdefault(tensor.parameter, None)
        return list(found)

    theirs_params = set(parameters(main))
    other_params = [p for p in parameters(roll) if p not in theirs_params]
    if other_params:
        listed = ", ".join(other_params[:3]) + (", \N{HORIZONTAL ELLIPSIS}" if len(other_params) > 3 else "")
        return f"the same ops on other parameters ({listed})"
    return "the same ops, wired differently"


def after_window(trace: Trace, steps: list[Step]) -> set[str]:
    """The autograd nodes a closed step window recorded after its last backward: the start of step N + 1 (its forward,
    cut off by the window), which no picture of the first N steps draws."""
    window = trace.window
    if window is None or not window.closed or not steps:
        return set()
    last = max(s.seq for s in steps)
    claimed = {nid for s in steps for nid in s.nodes}
    return {nid for nid, node in trace.nodes.items() if node.seq > last and nid not in claimed and not _is_leaf(node)}


def traced_text(steps: list[Step]) -> str:
    """`1-100, 151-152`: the numbers of the traced steps, in the run's numbering."""
    numbers = [s.number for s in steps]
    spans: list[str] = []
    for number in numbers:
        if spans and spans[-1].split("-")[-1] == str(number - 1):
            spans[-1] = f"{spans[-1].split('-')[0]}-{number}"
        else:
            spans.append(str(number))
    return ", ".join(spans) if spans else "none"


def only_step(trace: Trace, steps: list[Step], number: int) -> set[str]:
    """The node ids to draw for `--step K`: the nodes backward K reached, and the leaves they feed from."""
    step = next((s for s in steps if s.number == number), None)
    if step is None:
        raise ValueError(f"step {number} does not exist: the program made {len(steps)} backward call(s) with a graph "
                         f"(steps {traced_text(steps)})")
    keep = set(step.nodes)
    for nid in list(keep):
        for nxt in trace.nodes[nid].next:
            if nxt is not None and nxt in trace.nodes and _is_leaf(trace.nodes[nxt]):
                keep.add(nxt)
    return keep
