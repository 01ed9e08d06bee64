"""The analysis passes: each reads a trace (no torch) and returns findings."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import networkx as nx

from ..model import Event, EventKind, Location, NodeRecord, SavedTensorRecord, TensorRecord, Trace, VersionChange
from .evidence import Facts
from .findings import CutEvidence, Finding, FindingKind, SavedTensorEvidence, version_text
from .graphs import Dataflow, autograd_graph, freed_at
from .names import statement
from .reach import first_backward_reached, first_source_reached
from .verify import measurement_of, then_sentence

CUT_EVENTS = (EventKind.DETACH, EventKind.DATA_GET, EventKind.DETACH_)


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

    # ------------------------------------------------------------ wording helpers
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
        made_at = f" made at line {record.created.line}" if record.created is not None else ""
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


def line_of(event: Event | None) -> str:
    return f"line {event.location.line}" if event is not None and event.location is not None else "an unknown line"


# ------------------------------------------------------------------------------------------ cut edges
@dataclass
class Cut:
    event: Event
    roots: list[str]  # backward roots the detached value reached
    backward: Event


def cuts(ctx: Context) -> Iterator[Cut]:
    """Detaches of graph tensors whose result later flows into a tensor that backward() is called on, each with
    the first backward it reaches and the roots of that backward it flows into."""
    starts: list[tuple[Event, str]] = []
    for event in ctx.trace.events:
        if event.kind not in CUT_EVENTS or event.tensor is None:
            continue
        if event.kind is EventKind.DETACH_:
            if event.data.get("source_grad_fn") is None or event.data.get("error"):
                continue
            starts.append((event, event.tensor))
        else:
            if event.data.get("source_grad_fn") is None and not event.data.get("source_requires_grad"):
                continue
            if event.result is not None:
                starts.append((event, event.result))
    starts += _rewraps(ctx)
    starts += _regenerated_views(ctx)
    starts.sort(key=lambda start: start[0].seq)
    # one sweep for all of them: asking per cut walks everything downstream of it, quadratic over a run
    reached = first_backward_reached(ctx.flow, ctx.backwards, [(start, event.seq) for event, start in starts])
    for event, start in starts:
        hit = reached.get((start, event.seq))
        if hit is not None:
            yield Cut(event, sorted(hit.roots), hit.backward)


def _regenerated_views(ctx: Context) -> list[tuple[Event, str]]:
    """`t1 = t0.t(); t0.detach_(); t0.mul_(2)`: a view made before its base's `detach_()` keeps its history until
    the base (or the view) is written in place; PyTorch then rebuilds the view's grad_fn from the base when the view
    is next used, and after the detach_ the base has none: the view carries the cut on into the loss (checked
    against PyTorch 2.13: the leaf gets no gradient; without a write it gets its full gradient)."""
    trace = ctx.trace
    views: dict[str, list[str]] = {}
    for record in trace.tensors.values():
        if record.origin == "view" and record.source is not None:
            views.setdefault(record.source, []).append(record.id)
    # the writes that moved a tensor's version: through itself, or through an alias sharing its counter (`t0.detach()`)
    writes: dict[str, list[int]] = {}
    for event in trace.events_of(EventKind.INPLACE_WRITE):
        moved = {c.tensor for c in event.versions if c.before != c.after}
        if event.tensor is not None:
            moved.add(event.tensor)
        for tid in moved:
            writes.setdefault(tid, []).append(event.seq)
    found = []
    for event in trace.events_of(EventKind.DETACH_):
        base = event.tensor
        if base is None or event.data.get("source_grad_fn") is None or event.data.get("error"):
            continue
        before = [v for v in views.get(base, []) if trace.tensors[v].seq < event.seq]
        for view in before:
            seqs = sorted(seq for tid in (base, *before) for seq in writes.get(tid, ()) if seq > trace.tensors[view].seq)
            if not seqs:
                continue  # its history stands: the leaf gets its full gradient through it
            if seqs[-1] < event.seq:
                # written before the detach_: PyTorch rebuilds the grad_fn when the view is next used; used between
                # the write and the detach_, it was rebuilt with the history still there
                used = any(seqs[-1] < seq < event.seq for seq, _ in ctx.flow.consumers.get(view, ()))
                if used:
                    continue
            found.append((event, view))
    return found


# calls that copy a tensor's values into a new tensor without its history (PyTorch warns "To copy construct from a
# tensor, it is recommended to use sourceTensor.detach().clone()")
_REWRAP_OPS = {"tensor": "torch.tensor", "Tensor.new_tensor": ".new_tensor", "autograd.Variable": "Variable"}


def _rewraps(ctx: Context) -> list[tuple[Event, str]]:
    """`torch.tensor(h)`, `h.new_tensor(h)`: a copy of a tensor that requires grad, as a cut of its own (an event
    made for the finding: the tracer records it as an op)."""
    trace = ctx.trace
    found = []
    for op in trace.ops:
        if op.name not in _REWRAP_OPS or len(op.outputs) != 1 or trace.tensors[op.outputs[0]].requires_grad:
            continue
        source = next((t for t in op.inputs if trace.tensors[t].requires_grad or trace.tensors[t].grad_fn), None)
        if source is None:
            continue
        location = Location(op.file, op.line, _code(trace, op.file, op.line)) if op.file and op.line else None
        record = trace.tensors[source]
        data = {"source_grad_fn": record.grad_fn, "source_requires_grad": True, "rewrap": _REWRAP_OPS[op.name]}
        found.append((Event(op.seq, EventKind.DETACH, location, source, op.outputs[0], op.name, [], data), op.outputs[0]))
    return found


def _leaf_cut(ctx: Context, event: Event) -> bool:
    """`p.data` of a leaf that requires grad, computed with out of place (`x @ self.weight.data`): the parameter's
    own gradient path is cut. Written in place into something else (`ema.mul_(d).add_(p.data)`) it is a copy of
    values under the program's control, not a path a gradient would take."""
    if event.kind is not EventKind.DATA_GET or event.result is None:
        return False
    steps = ctx.flow.steps
    for seq, index in ctx.flow.consumers.get(event.result, ()):
        step = steps[index]
        if seq > event.seq and step.alias_event is None and not set(step.inputs) & set(step.outputs):
            return True
    return False


def cut_edge_findings(ctx: Context, found: list[Cut]) -> list[Finding]:
    findings = []
    for cut in found:
        event = cut.event
        if event.data.get("source_grad_fn") is None and not event.data.get("rewrap") and not _leaf_cut(ctx, event):
            continue  # a leaf's `.detach()` (a state_dict copy, a frozen input): its dead parameters say it
        file, line, code = ctx.where(event)
        source = ctx.trace.tensors[event.tensor]  # type: ignore[index]  # (a cut's event names its tensor)
        node = event.data.get("source_grad_fn")
        expression = event.data.get("expression", source.label)
        how = {
            EventKind.DETACH: f"`{expression}.detach()`",
            EventKind.DATA_GET: f"`{expression}.data`",
            EventKind.DETACH_: f"`{source.label}.detach_()`",
        }[event.kind]
        rewrap = event.data.get("rewrap")
        if rewrap is not None:
            how = f"`{rewrap}(...)`, which copies the values without their history,"
        produced = f" (output of {ctx.node_name(node)})" if node else ""
        roots = ctx.names(cut.roots)
        message = (
            f"{how} at line {line} cuts the gradient path: {ctx.name(source.id)}{produced} flows on into "
            f"{roots}, but backward ({line_of(cut.backward)}) stops here, so nothing computed before it gets a "
            f"gradient through this path."
        )
        if node is None and rewrap is None:  # a leaf's own `.data`: the leaf is what loses its gradient
            how = f"`.data` of {ctx.name(source.id)}"
            message = (
                f"{how} at line {line} uses its values without its gradient path: they flow on into {roots}, but "
                f"backward ({line_of(cut.backward)}) gives {ctx.name(source.id)} no gradient through this use."
            )
        if rewrap is not None:
            fix = (
                f"To keep the gradient flowing use the tensor itself (or `{source.label}.clone()`); if cutting is "
                f"intended, say so with `{source.label}.detach().clone()`, as PyTorch's own warning recommends."
            )
        elif event.kind is EventKind.DATA_GET and node is None:
            fix = f"Use {ctx.name(source.id)} itself so it trains; `.detach()` if it must stay fixed here."
        elif event.kind is EventKind.DATA_GET:
            fix = (
                f"If cutting the graph is intended, write `{event.data.get('expression', source.label)}.detach()`: "
                "it cuts the same way but shares the version counter, so PyTorch catches in-place writes. "
                "Otherwise drop `.data`."
            )
        else:
            fix = (
                "If the layers before this point should train, remove the detach; keep it only where cutting is "
                "intended (a GAN discriminator step, truncated BPTT, a target network)."
            )
        findings.append(
            Finding(
                FindingKind.CUT_EDGE,
                file,
                line,
                message,
                fix,
                code=code,
                tensors=[t for t in (source.id, event.result) if t],
                nodes=[node] if node else [],
                events=[event.seq, cut.backward.seq],
                affected_backward=cut.backward.seq,
                evidence=[_cut_evidence(ctx, event, node)],
            )
        )
    return findings


def _cut_evidence(ctx: Context, event: Event, node: str | None) -> CutEvidence:
    """The cut's source node (a leaf's AccumulateGrad when the value is a leaf), its alias, the first use after."""
    rewrap = event.data.get("rewrap")
    if rewrap is not None:
        expression = f"{rewrap}(...)"
    elif event.kind is EventKind.DETACH_:
        expression = f"{ctx.facts.namer.tensor(event.tensor)}.detach_()"
    else:
        expression = ctx.facts.alias_expression(event)
    source = node if node is not None else ctx.facts.accumulator(event.tensor)
    alias = event.result or event.tensor
    return CutEvidence(
        source_node=source if source in ctx.trace.nodes else None,
        alias=alias,
        alias_expression=expression,
        use=ctx.facts.consumer(alias, event.seq),
        alias_event=event.seq,
        line=event.location.line if event.location else None,
    )


# ------------------------------------------------------------------------------------------ dead parameters
def _requires_grad_leaves(trace: Trace) -> set[str]:
    """Leaves that require grad as the program ends: `requires_grad_(False)` is how a user freezes one on purpose."""
    leaves = {t.id for t in trace.tensors.values() if t.is_leaf and t.requires_grad}
    for event in trace.events_of(EventKind.REQUIRES_GRAD_):
        if event.tensor is None or not trace.tensors[event.tensor].is_leaf:
            continue
        if event.data.get("requires_grad"):
            leaves.add(event.tensor)
        else:
            leaves.discard(event.tensor)
    return leaves


def dead_parameter_findings(ctx: Context, found: list[Cut]) -> list[Finding]:
    trace = ctx.trace
    leaves = _requires_grad_leaves(trace)
    steps = trace.events_of(EventKind.OPTIMIZER_STEP)
    # where the program trains with optimizers, a leaf kept out of them and used under no_grad (a target network)
    # is frozen on purpose; a detach in the path is a cut worth reporting either way
    optimized = {tid for step in steps for tid in step.data.get("grads", {})} if steps else None
    # a model none of whose parameters any optimizer holds (a distillation teacher, a target network) is frozen
    # on purpose, whatever cuts its output: the cut is reported (info), its parameters are not dead
    trained_models = {_model_of(trace.tensors[tid]) for tid in optimized} if optimized is not None else None
    reached = {leaf for event in ctx.backwards for leaf in event.data.get("reached_leaves", [])}
    # the first backward whose loss each leaf no backward reached flows into, all in one sweep
    unreached = sorted(leaves - reached)
    first = first_backward_reached(ctx.flow, ctx.backwards, [(tid, -1) for tid in unreached])
    participating = {tid: first[(tid, -1)].backward for tid in unreached if (tid, -1) in first}
    explained = _explaining_cuts(ctx, set(participating), found)
    # one finding per cause (a cut, a call without gradient tracking) listing every parameter it starves: a frozen
    # backbone is one finding naming `backbone.0: weight, bias; ...`, not one per tensor
    groups: dict[tuple[object, ...], _Starved] = {}
    for leaf, backward in sorted(participating.items(), key=lambda item: trace.tensors[item[0]].seq):
        record = trace.tensors[leaf]
        cut = explained.get(leaf)
        if cut is not None and trained_models is not None and _model_of(record) not in trained_models:
            continue
        if cut is not None:
            file, line, code = ctx.where(cut.event)
            reason = f"every path from them to the loss passes through the cut at line {line} (`{statement(code)}`)"
            events, nodes = [cut.event.seq], [n for n in [cut.event.data.get("source_grad_fn")] if n]
        else:
            step = _no_grad_break(ctx, leaf, backward)
            if step is None or (optimized is not None and leaf not in optimized):
                continue
            op, file, line = step
            code = _code(trace, file, line)
            reason = f"their values reach the loss only through `{op}` at line {line}, computed without gradient tracking"
            if _REENTRANT_CHECKPOINT.search(statement(code)):
                # the reentrant checkpoint runs its function under no_grad and backpropagates through the
                # recomputation only from inputs that require grad: PyTorch warns and gives it none
                reason += (
                    " inside `checkpoint`, whose inputs do not require grad (PyTorch: \"None of the inputs have "
                    "requires_grad=True. Gradients will be None\"); with `use_reentrant=True` the checkpointed "
                    "block gets gradients only through inputs that require grad"
                )
            events, nodes = [], []
        group = groups.setdefault((file, line, reason), _Starved(file, line, code, reason, backward))
        group.leaves.append(leaf)
        group.events += [e for e in events if e not in group.events]
        group.nodes += [n for n in nodes if n not in group.nodes]
        if backward.seq < group.backward.seq:
            group.backward = backward
    return [_dead_finding(ctx, group) for group in groups.values()]


@dataclass
class _Starved:
    """Parameters one cause keeps from training."""

    file: str | None
    line: int | None
    code: str
    reason: str
    backward: Event  # the first backward whose loss they take part in
    leaves: list[str] = field(default_factory=list)
    events: list[int] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)


def _dead_finding(ctx: Context, group: _Starved) -> Finding:
    records = [ctx.trace.tensors[leaf] for leaf in group.leaves]
    labels = [record.label for record in records]
    short = parameters_in_short(labels)
    named = "; ".join(" ".join(part for part in (f"`{text}`" if text else "", note) if part) for text, note in short)
    they, are, them = ("it", "is", "it") if len(records) == 1 else ("they", "are", "them")
    if len(records) == 1:
        head = f"{ctx.name(records[0].id)} takes part"
        reason = group.reason.replace("from them", "from it").replace("their values", "its value")
        tail = "It will never train."
        frozen = f"`{labels[0]}.requires_grad_(False)`"
    else:
        modules = len({label.rpartition(".")[0] for label in labels})
        grouped = len(short) == modules and not any(note for _, note in short)
        counted = f"{len(records)} parameters" if grouped else f"{len(records)} parameters in {modules} modules"
        head = f"{counted} ({named}) take part"
        reason = group.reason
        tail = "They will never train."
        frozen = "`requires_grad_(False)` on them"
    return Finding(
        FindingKind.DEAD_PARAMETER,
        group.file,
        group.line,
        f"{head} in computing the loss backpropagated at {line_of(group.backward)}, but no backward in the run "
        f"gives {'it' if len(records) == 1 else 'them'} a gradient: {reason}. {tail}",
        f"Remove the detach (or `torch.no_grad()`) on the path if {they} should learn; if {they} {are} meant to be "
        f"frozen, say so with {frozen} and leave {them} out of the optimizer.",
        parameter="; ".join(" ".join(part for part in pair if part) for pair in short),
        code=group.code,
        tensors=list(group.leaves),
        nodes=list(group.nodes),
        events=group.events + [group.backward.seq],
        affected_backward=group.backward.seq,
        parameters=labels,
    )


def grouped_by_module(names: list[str]) -> list[str]:
    """`model.0.weight`, `model.0.bias`, `model.2.weight` -> `model.0: weight, bias`, `model.2: weight` (modules in
    first-seen order; a name without a module stays whole)."""
    modules: dict[str, list[str]] = {}
    for name in names:
        module, _, attribute = name.rpartition(".")
        modules.setdefault(module, []).append(attribute if module else name)
    return [f"{module}: {', '.join(attrs)}" if module else ", ".join(attrs) for module, attrs in modules.items()]


def parameters_in_short(names: list[str], *, modules: int = 3, kinds: int = 4) -> list[tuple[str, str]]:
    """(names, a note on them): `grouped_by_module(names)` up to `modules` modules; past that, modules alike but for
    their numbers as one pattern: the 24 adapters of a 12-layer LoRA are `model.*: lora_A, lora_B` for * in 0-11, not
    12 groups (a finding's `parameters` lists every full name). At most `kinds` patterns, then how many more."""
    grouped = grouped_by_module(names)
    if len(grouped) <= modules:
        return [(text, "") for text in grouped]
    patterns: dict[str, list[tuple[str, ...]]] = {}  # `model.*: lora_A, lora_B` -> the numbers standing for `*`
    for text in grouped:
        module, _, attributes = text.partition(": ")
        parts = module.split(".")
        pattern = ".".join("*" if part.isdigit() else part for part in parts)
        patterns.setdefault(f"{pattern}: {attributes}", []).append(tuple(p for p in parts if p.isdigit()))
    out = []
    for pattern, numbers in list(patterns.items())[:kinds]:
        note = ""
        if len(numbers) > 1 and {len(n) for n in numbers} == {1}:  # one `*`: say which numbers it stands for
            note = f"for * in {_number_ranges(sorted(int(n[0]) for n in numbers))}"
        elif len(numbers) > 1:
            note = f"in {len(numbers)} modules"
        out.append((pattern, note))
    if len(patterns) > kinds:
        out.append(("", f"\N{HORIZONTAL ELLIPSIS} {len(patterns) - kinds} more"))
    return out


def _number_ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> `0-2, 5, 7-8`."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


_REENTRANT_CHECKPOINT = re.compile(r"\bcheckpoint\w*\(")


def _model_of(record: TensorRecord) -> str | None:
    """The model a parameter belongs to: the variable (or class) its qualified name starts with."""
    return record.parameter.split(".", 1)[0] if record.parameter and "." in record.parameter else record.parameter


def _explaining_cuts(ctx: Context, leaves: set[str], found: list[Cut]) -> dict[str, Cut]:
    """For each leaf, the first cut whose source it flowed into (or is): the cut that kept its gradient away."""
    ordered = sorted(found, key=lambda cut: cut.event.seq)
    sources = first_source_reached(ctx.flow, leaves, [(cut.event.seq, cut.event.tensor) for cut in ordered])  # type: ignore[misc]  # (as above)
    explained: dict[str, Cut] = {}
    for number, cut in enumerate(ordered):
        for leaf in sources[number]:
            explained.setdefault(leaf, cut)
    return explained


def _no_grad_break(ctx: Context, leaf: str, backward: Event) -> tuple[str, str | None, int | None] | None:
    """The first call on a path from `leaf` to the loss whose inputs require grad but whose outputs do not."""
    trace = ctx.trace
    downstream = ctx.flow.descendants(leaf, -1, before=backward.seq)  # (only up to that backward: bounded work)
    for op in trace.ops:
        if op.seq >= backward.seq:
            break
        ins = [t for t in op.inputs if t == leaf or t in downstream]
        if ins and any(trace.tensors[t].requires_grad for t in ins) and op.outputs:
            if not any(trace.tensors[t].requires_grad for t in op.outputs):
                return op.name, op.file, op.line
    return None


def _code(trace: Trace, file: str | None, line: int | None) -> str:
    if file is None or line is None or file not in trace.sources:
        return ""
    lines = trace.sources[file].splitlines()
    # the line as written, as a finding's `code` quotes it (a message quotes `statement(code)`: no comment)
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


_VERSIONS = re.compile(r"is at version (\d+); expected version (\d+)")


def _pytorch_versions(trace: Trace, backward: Event) -> tuple[str, str] | None:
    """The version numbers PyTorch's own error gave (in a loop, 10 and 9, where our records count from the save)."""
    error = backward.data.get("error")
    message = error.get("message", "") if isinstance(error, dict) else str(error or "")
    found = _VERSIONS.search(message) or _VERSIONS.search(trace.exception.message if trace.exception else "")
    return (found.group(1), found.group(2)) if found else None


# ------------------------------------------------------------------------------------------ saved tensors
@dataclass
class _Write:
    event: Event
    tensor: str  # the tensor written
    storage: str | None
    byte_range: tuple[int, int]
    counter: str | None
    changes: list[VersionChange]


def _writes(trace: Trace) -> Iterator[_Write]:
    for event in trace.events:
        if event.kind is EventKind.INPLACE_WRITE and event.tensor:
            lo, hi = event.data.get("byte_range", [0, 0])
            record = trace.tensors[event.tensor]
            yield _Write(event, event.tensor, event.data.get("storage"), (lo, hi), record.version_counter, event.versions)
        elif event.kind is EventKind.OPTIMIZER_STEP:
            for change in event.versions:
                if change.before != change.after and change.tensor in event.data.get("changed", []):
                    record = trace.tensors[change.tensor]
                    span = record.byte_range or (0, 0)
                    yield _Write(event, change.tensor, record.storage, span, record.version_counter, [change])


def _saved_entries(trace: Trace) -> Iterator[tuple[NodeRecord, SavedTensorRecord, TensorRecord]]:
    for node in trace.nodes.values():
        for saved in node.saved:
            if saved.tensor is not None:
                yield node, saved, trace.tensors[saved.tensor]


def _v(saved: SavedTensorRecord) -> str:
    """The version at save time, as `v{_v(saved)}` writes it: UNKNOWN_VERSION for a node made before tracing began."""
    return version_text(saved.saved_version)[1:]


def _overlaps(a: tuple[int, int], b: tuple[int, int] | None) -> bool:
    if b is None:
        return False
    return a[0] < b[1] and b[0] < a[1]


def saved_tensor_findings(ctx: Context) -> list[Finding]:
    trace = ctx.trace
    entries = sorted(_saved_entries(trace), key=lambda entry: entry[0].seq)
    never = 1 << 62
    # per storage, the saved tensors not yet freed; writes come in program order, so a freed one is dropped for good
    alive: dict[str | None, list[tuple[NodeRecord, SavedTensorRecord, TensorRecord]]] = {}
    pending = iter(entries)
    upcoming = next(pending, None)
    findings = []
    for write in _writes(trace):
        seq = write.event.seq
        while upcoming is not None and upcoming[0].seq < seq:
            alive.setdefault(upcoming[2].storage, []).append(upcoming)
            upcoming = next(pending, None)
        if write.storage is None or write.storage not in alive:
            continue
        still = [entry for entry in alive[write.storage] if ctx.freed_at.get(entry[0].id, never) >= seq]
        alive[write.storage] = still
        # batch norm's update of its running statistics moves no version: only the nodes that read them matter
        readers = write.event.data.get("readers") if write.event.data.get("unversioned") else None
        for node, saved, tensor in still:
            if readers is not None and node.id not in readers:
                continue  # (a train-mode batch norm's node holds them too, but its backward does not read them)
            # under a pack hook autograd compares no versions: even a shared counter lets the write through silently
            shares = (
                write.counter is not None
                and write.counter == tensor.version_counter
                and not saved.packed
                and readers is None
            )
            # autograd compares versions, not bytes: a write to another row of the saved row's base moves its version
            if not shares and not _overlaps(write.byte_range, tensor.byte_range):
                continue
            touched = _overlaps(write.byte_range, tensor.byte_range)
            finding = _saved_write_finding(ctx, write, node, saved, tensor, shares, touched=touched)
            if finding is not None:
                findings.append(finding)
    # by saved tensor: each .data set or detach_() looks up its own tensor's entries, not all of them
    by_tensor: dict[str, list[_Entry]] = {}
    for entry in entries:
        by_tensor.setdefault(entry[2].id, []).append(entry)
    findings += _data_set_findings(ctx, by_tensor)
    findings += _detach_inplace_findings(ctx, by_tensor)
    return findings


def _consequence(ctx: Context, seq: int, node: NodeRecord) -> tuple[Event | None, bool]:
    backward = ctx.backward_after(seq, node.id)
    return backward, backward is not None or ctx.pending_at_end(node.id)


def _saved_write_finding(
    ctx: Context,
    write: _Write,
    node: NodeRecord,
    saved: SavedTensorRecord,
    tensor: TensorRecord,
    shares: bool,
    *,
    touched: bool = True,
) -> Finding | None:
    backward, relevant = _consequence(ctx, write.event.seq, node)
    if not relevant:
        return None
    file, line, code = ctx.where(write.event)
    now = next((c.after for c in write.changes if c.tensor == tensor.id), None)
    if now is None and shares:
        now = next((c.after for c in write.changes if c.tensor == write.tensor), None)
    by_step = write.event.kind is EventKind.OPTIMIZER_STEP
    via = f"the optimizer step `{statement(code)}`" if by_step else f"{ctx.alias(write.tensor)}"
    if write.tensor == tensor.id and not by_step:
        via = f"{ctx.name(tensor.id)} itself"
    unversioned = bool(write.event.data.get("unversioned"))
    if unversioned:
        via = "the running-statistics update of a batch norm in train mode"
    call = write.event.data.get("module_call")
    # the write happened inside a module: name it as the program built it (`nn.ReLU(inplace=True)`)
    # (where, not who: a write in a model's own forward is the model's code at that line, not "by `Model()`")
    by = f" inside `{write.event.data.get('module')}.forward` (`{call}`)" if call and not by_step else ""
    what = f"{ctx.name(tensor.id)}, saved by {node.name} for backward"
    if shares:
        if backward is not None and backward.data.get("outcome") == "error":
            quoted = _pytorch_versions(ctx.trace, backward) or (str(now), _v(saved))
            then = f"The backward at {line_of(backward)} raised: \"is at version {quoted[0]}; expected version {quoted[1]}\"."
        elif backward is not None:
            then = f"The backward at {line_of(backward)} runs through it."
        else:
            then = "No backward has run through it yet: calling backward will raise."
        return Finding(
            FindingKind.POISONED_SAVED_TENSOR,
            file,
            line,
            (
                f"{what} at v{_v(saved)}, was written in place at line {line}{by} through {via}, which shares "
                f"its version counter: now {version_text(now)}. {then}"
                if touched
                else f"{what} at v{_v(saved)}, shares its version counter with {via}, written in place at line "
                f"{line}{by}: other bytes than its own, but autograd counts versions, not bytes: now "
                f"{version_text(now)}. {then}"
            ),
            "Do not modify a tensor autograd saved: clone first (`x = x.clone()` or `c = out.detach().clone()`), "
            "use the out-of-place op, or do the update after backward (for optimizers: build the next loss after "
            "`step()`).",
            code=code,
            tensors=[tensor.id, write.tensor],
            nodes=[node.id],
            events=[write.event.seq] + ([backward.seq] if backward else []),
            affected_backward=backward.seq if backward else None,
            evidence=[_write_evidence(ctx, write, node, saved, tensor, now, shares)],
        )
    if backward is not None:
        then = f"The backward at {line_of(backward)} used the changed values: its gradients are silently wrong."
    else:
        then = "No backward has run through it yet: when it does, its gradients will be silently wrong."
    measured = measurement_of(ctx.trace, write.event, backward, ctx.name)
    then = then_sentence(measured, line_of(backward), then)
    if unversioned:
        why = f", which moves no version (a known PyTorch issue), so autograd did not notice (still v{_v(saved)})"
        fix = (
            "Run backward through the eval-mode graph before the next train-mode forward of this module (or make that "
            "forward in eval mode too), so that the running statistics it saved are still the ones it used."
        )
    elif saved.packed:
        why = (
            "; it was saved through a saved_tensors_hooks pack hook (save_on_cpu or offloading keep CPU tensors "
            "themselves, not copies), under which autograd checks no versions, so it did not notice"
        )
        fix = "`.clone()` before modifying, or make the write after backward."
    else:
        why = f", which has its own version counter, so autograd did not notice (still v{_v(saved)})"
        fix = (
            "Use `.detach()` instead of `.data` so PyTorch raises on this write, and `.clone()` before modifying; "
            "or make the update under `torch.no_grad()` after backward."
        )
    return Finding(
        FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR,
        file,
        line,
        f"{what} at v{_v(saved)}, had its bytes changed at line {line}{by} through {via}{why}. {then}",
        fix,
        code=code,
        tensors=[tensor.id, write.tensor],
        nodes=[node.id],
        events=[write.event.seq] + ([backward.seq] if backward else []),
        affected_backward=backward.seq if backward else None,
        measured=measured,
        evidence=[_write_evidence(ctx, write, node, saved, tensor, now, shares)],
    )


def _write_evidence(
    ctx: Context, write: _Write, node: NodeRecord, saved: SavedTensorRecord, tensor: TensorRecord,
    now: int | None, shares: bool,
) -> SavedTensorEvidence:
    through_alias = write.tensor != tensor.id and write.tensor in ctx.trace.tensors
    return SavedTensorEvidence(
        node=node.id,
        saved_name=saved.name,
        tensor=tensor.id,
        saved_version=saved.saved_version,
        version_now=now if shares else saved.saved_version,  # a write through `.data` leaves the version alone
        write_event=write.event.seq,
        write_line=write.event.location.line if write.event.location else None,
        writer=write.tensor,
        writer_alias=ctx.facts.writer_alias(write.tensor) if through_alias else None,
        shared_counter=shares,
    )


def _own_evidence(node: NodeRecord, saved: SavedTensorRecord, tensor: TensorRecord, event: Event) -> SavedTensorEvidence:
    """A `.data =` or `detach_()` on the saved tensor itself: no version moves."""
    return SavedTensorEvidence(
        node=node.id,
        saved_name=saved.name,
        tensor=tensor.id,
        saved_version=saved.saved_version,
        version_now=saved.saved_version,
        write_event=event.seq,
        write_line=event.location.line if event.location else None,
        writer=tensor.id,
    )


_Entry = tuple[NodeRecord, SavedTensorRecord, TensorRecord]


def _saved_as_itself(
    ctx: Context, event: Event, entries: dict[str, list[_Entry]], accept: Callable[[SavedTensorRecord], bool]
) -> Iterator[tuple[NodeRecord, SavedTensorRecord, TensorRecord, Event | None]]:
    """Live nodes that saved the very tensor `event` acts on (as `accept` wants it), with the backward they meet."""
    for node, saved, tensor in entries.get(event.tensor, ()):  # type: ignore[arg-type]  # (None: no entries)
        if not accept(saved) or node.seq >= event.seq:
            continue
        if ctx.freed_at.get(node.id, 1 << 62) < event.seq:
            continue
        backward, relevant = _consequence(ctx, event.seq, node)
        if relevant:
            yield node, saved, tensor, backward


def _data_set_findings(ctx: Context, entries: dict[str, list[_Entry]]) -> list[Finding]:
    findings = []
    for event in ctx.trace.events_of(EventKind.DATA_SET):
        file, line, code = ctx.where(event)
        for node, saved, tensor, backward in _saved_as_itself(ctx, event, entries, lambda s: s.original):
            then = (
                f"The backward at {line_of(backward)} used the new values: its gradients are silently wrong."
                if backward
                else "When backward runs, its gradients will be silently wrong."
            )
            measured = measurement_of(ctx.trace, event, backward, ctx.name)
            then = then_sentence(measured, line_of(backward), then)
            findings.append(
                Finding(
                    FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR,
                    file,
                    line,
                    f"{ctx.name(tensor.id)} was saved by {node.name} for backward itself (not a copy), and "
                    f"`{statement(code)}` at line {line} swaps its data while the graph is live; its version stays "
                    f"v{_v(saved)}, so autograd does not notice. {then}",
                    "Reassign `.data` only after backward (or not at all: update under `torch.no_grad()` with "
                    "`p.copy_(new)`, which autograd tracks).",
                    code=code,
                    tensors=[tensor.id],
                    nodes=[node.id],
                    events=[event.seq] + ([backward.seq] if backward else []),
                    affected_backward=backward.seq if backward else None,
                    measured=measured,
                    evidence=[_own_evidence(node, saved, tensor, event)],
                )
            )
    return findings


def _detach_inplace_findings(ctx: Context, entries: dict[str, list[_Entry]]) -> list[Finding]:
    findings = []
    message = "Trying to use a saved tensor that has been detached in-place"
    for event in ctx.trace.events_of(EventKind.DETACH_):
        if event.data.get("error") or event.data.get("source_grad_fn") is None:
            continue  # detaching a tensor that is in no graph changes nothing autograd saved
        file, line, code = ctx.where(event)
        for node, saved, tensor, backward in _saved_as_itself(ctx, event, entries, lambda s: not s.is_output):
            then = (
                f"The backward at {line_of(backward)} raised \"{message}\"."
                if backward and backward.data.get("outcome") == "error"
                else f"Calling backward through it will raise \"{message}\"."
            )
            findings.append(
                Finding(
                    FindingKind.DETACH_INPLACE_SAVED,
                    file,
                    line,
                    f"`{statement(code)}` at line {line} detaches {ctx.name(tensor.id)} in place, but {node.name} saved it as "
                    f"an input for backward. {then}",
                    f"Use the out-of-place `{tensor.label} = {tensor.label}.detach()` (a new tensor; the graph keeps "
                    "the original), or call backward before detaching.",
                    code=code,
                    tensors=[tensor.id],
                    nodes=[node.id],
                    events=[event.seq] + ([backward.seq] if backward else []),
                    affected_backward=backward.seq if backward else None,
                    evidence=[_own_evidence(node, saved, tensor, event)],
                )
            )
    return findings


# ------------------------------------------------------------------------------------------ optimizer updates
def _given_in_step_finding(
    ctx: Context, event: Event, tid: str, latest: Event | None, file: str | None, line: int | None, code: str
) -> Finding:
    """The parameter had no `.grad`; the optimizer's own step() gave it one (`p.grad = torch.zeros_like(p)`) and then
    moved it: the line to change is that one, not the program's call of step()."""
    name = ctx.name(tid)
    optimizer = event.data.get("optimizer", "The optimizer")
    at = event.data.get("grad_given_at")
    where = f" at line {at[1]} (`{at[2]}`)" if at else ""
    if at:
        file, line, code = at[0], at[1], at[2]
    label = ctx.trace.tensors[tid].label
    return Finding(
        FindingKind.UPDATE_WITHOUT_GRADIENT,
        file,
        line,
        f"{name} had no `.grad` when {optimizer}.step() was called at line {ctx.where(event)[1]}: no backward "
        f"reached it. The step gave it a gradient itself{where}, then its update (momentum, weight decay) moved it "
        "all the same, so a parameter meant to stay put changed.",
        f"In step(), skip a parameter whose `.grad` is None (`if p.grad is None: continue`, as torch's optimizers "
        f"do) instead of giving it a gradient{where}; or leave `{label}` out of the optimizer.",
        parameter=label,
        code=code,
        tensors=[tid],
        events=[event.seq] + ([latest.seq] if latest else []),
        affected_backward=latest.seq if latest else None,
    )


def update_without_gradient_findings(ctx: Context) -> list[Finding]:
    trace = ctx.trace
    findings = []
    backward_seqs = [backward.seq for backward in ctx.backwards]
    previous_step: dict[object, int] = {}
    for event in trace.events_of(EventKind.OPTIMIZER_STEP):
        before = bisect.bisect_left(backward_seqs, event.seq)
        latest = ctx.backwards[before - 1] if before else None
        # gradients accumulate over every backward since this optimizer's previous step (gradient accumulation)
        optimizer = event.data.get("optimizer_id", event.data.get("optimizer"))
        since = bisect.bisect_right(backward_seqs, previous_step.get(optimizer, -1))
        previous_step[optimizer] = event.seq
        got = {leaf for backward in ctx.backwards[since:before] for leaf in backward.data.get("reached_leaves", [])}
        for tid in event.data.get("changed", []):
            if tid in got or event.data.get("grads", {}).get(tid) == "written":
                continue  # (a gradient the program wrote into `.grad` itself is a gradient too)
            file, line, code = ctx.where(event)
            grad = event.data.get("grads", {}).get(tid)
            if tid in event.data.get("grad_given", ()):
                findings.append(_given_in_step_finding(ctx, event, tid, latest, file, line, code))
                continue
            held = {
                "zero": "its `.grad` held only zeros (left by `zero_grad(set_to_none=False)`)",
                "nonzero": "its `.grad` still held a gradient from an earlier backward",
                "none": "it had no `.grad`",
            }.get(grad or "", "it had no fresh gradient")
            last = (
                f"any backward since the previous step (the latest: {line_of(latest)})"
                if latest is not None
                else "any backward"
            )
            findings.append(
                Finding(
                    FindingKind.UPDATE_WITHOUT_GRADIENT,
                    file,
                    line,
                    f"{event.data.get('optimizer', 'The optimizer')}.step() at line {line} changed "
                    f"{ctx.name(tid)} although no gradient reached it in {last}: {held}, and momentum or weight "
                    "decay still moved it. detach() does not stop parameter updates.",
                    "Use `optimizer.zero_grad(set_to_none=True)` (the default) so parameters without a gradient are "
                    f"skipped, or leave `{trace.tensors[tid].label}` out of the optimizer / `requires_grad_(False)` "
                    "if it is frozen.",
                    parameter=trace.tensors[tid].label,
                    code=code,
                    tensors=[tid],
                    events=[event.seq] + ([latest.seq] if latest else []),
                    affected_backward=latest.seq if latest else None,
                )
            )
    return findings
