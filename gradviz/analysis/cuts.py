"""Cut edges (`cut_edge`): a detach, `.data`, `detach_()` or a copy without history (`torch.tensor(h)`) whose result
flows on into a loss that backward() is called on, so nothing before it gets a gradient through that path."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..model import Event, EventData, EventKind, Location, OpRecord, TensorRecord
from .context import Context, source_line
from .findings import CutEvidence, Finding, FindingKind
from .graphs import rewrapped
from .reach import first_backward_reached

CUT_EVENTS = (EventKind.DETACH, EventKind.DATA_GET, EventKind.DETACH_)


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
        location = Location(op.file, op.line, source_line(trace, op.file, op.line)) if op.file and op.line else None
        record = trace.tensors[source]
        data = EventData(source_grad_fn=record.grad_fn, source_requires_grad=True, rewrap=_REWRAP_OPS[op.name])
        found.append((Event(op.seq, EventKind.DETACH, location, source, op.outputs[0], op.name, [], data), op.outputs[0]))
    return found


# calls that copy a tensor's values into new memory
_COPY_OPS = frozenset({"Tensor.clone", "clone"})


@dataclass
class _Moves:
    """When each leaf's values moved (optimizer steps that changed it, in-place writes to it), in order, and the
    copies made: read once per trace for `_snapshot`."""

    at: dict[str, list[int]]
    copies: dict[int, OpRecord]  # seq -> a call that copies its input into new memory
    same_memory: dict[str, list[str]]  # tensor -> tensors over its memory: views, aliases, a Parameter wrapping it

    @classmethod
    def of(cls, ctx: Context) -> _Moves:
        at: dict[str, list[int]] = {}
        for e in ctx.trace.events:
            if e.kind is EventKind.OPTIMIZER_STEP:
                for leaf in e.data.get("changed", ()):
                    at.setdefault(leaf, []).append(e.seq)
            elif e.kind is EventKind.INPLACE_WRITE and e.tensor is not None:
                at.setdefault(e.tensor, []).append(e.seq)
        same: dict[str, list[str]] = {}
        for record in ctx.trace.tensors.values():
            if record.source is not None and record.origin != "saved":
                same.setdefault(record.source, []).append(record.id)
        for record, source in rewrapped(ctx.trace):
            same.setdefault(source, []).append(record.id)
        return cls(at, {op.seq: op for op in ctx.trace.ops if op.name in _COPY_OPS}, same)


def _leaf_cut(ctx: Context, event: Event, moves: _Moves) -> bool:
    """`p.data` of a leaf that requires grad, computed with out of place (`x @ self.weight.data`): the parameter's
    own gradient path is cut. Written in place into something else (`ema.mul_(d).add_(p.data)`) it is a copy of
    values under the program's control, not a path a gradient would take; so is a snapshot (`_snapshot`)."""
    if event.kind is not EventKind.DATA_GET or event.result is None:
        return False
    steps = ctx.flow.steps
    uses = [
        (seq, steps[index]) for seq, index in ctx.flow.consumers.get(event.result, ())
        if seq > event.seq and steps[index].alias_event is None and not set(steps[index].inputs) & set(steps[index].outputs)
    ]  # fmt: skip
    return bool(uses) and not _snapshot(ctx, event, [seq for seq, _ in uses], moves)


def _snapshot(ctx: Context, event: Event, uses: list[int], moves: _Moves) -> bool:
    """`anchor = copy.deepcopy(p).requires_grad_(False)`, `old = p.data.clone()`: the leaf's values copied into new
    memory, the copy used after the leaf itself moved (an optimizer step, an in-place update), as a teacher or EMA
    copy or the reference of a regulariser is. The copy holds values the parameter no longer has: no path of the
    parameter's gradient runs through it, so nothing is cut. (A copy used only before the leaf moves, `x @
    w.data.clone()` in a forward, is the parameter's value: a cut.)"""
    flow = ctx.flow
    if not uses or any(seq not in moves.copies for seq in uses):
        return False
    moved = [seq for seq in moves.at.get(event.tensor or "", ()) if seq > event.seq]
    if not moved:
        return False
    first_move = moved[0]
    for seq in uses:
        # the copy, or what shares its memory (deepcopy's Parameter around it, a view), read after the leaf moved
        copy = list(moves.copies[seq].outputs)
        seen = set(copy)
        while copy:
            tid = copy.pop()
            if any(time > first_move for time, _ in flow.consumers.get(tid, ())):
                return True
            fresh = [t for t in moves.same_memory.get(tid, ()) if t not in seen]
            seen.update(fresh)
            copy.extend(fresh)
    return False


def cut_edge_findings(ctx: Context, found: list[Cut]) -> list[Finding]:
    findings = []
    moves = _Moves.of(ctx)
    for cut in found:
        event = cut.event
        if event.data.get("source_grad_fn") is None and not event.data.get("rewrap") and not _leaf_cut(ctx, event, moves):
            continue  # a leaf's `.detach()` (a state_dict copy, a frozen input): its dead parameters say it
        findings.append(_cut_finding(ctx, cut))
    return findings


def _cut_finding(ctx: Context, cut: Cut) -> Finding:
    event = cut.event
    file, line, code = ctx.where(event)
    source = ctx.trace.tensors[event.tensor]  # type: ignore[index]  # (a cut's event names its tensor)
    node = event.data.get("source_grad_fn")
    return Finding(
        FindingKind.CUT_EDGE,
        file,
        line,
        _cut_message(ctx, cut, source, node),
        _cut_fix(ctx, event, source, node),
        code=code,
        tensors=[t for t in (source.id, event.result) if t],
        nodes=[node] if node else [],
        events=[event.seq, cut.backward.seq],
        affected_backward=cut.backward.seq,
        evidence=[_cut_evidence(ctx, event, node)],
    )


def _cut_message(ctx: Context, cut: Cut, source: TensorRecord, node: str | None) -> str:
    """How the value was cut off, where, what it flowed into and which backward stops there."""
    event = cut.event
    file, line, _ = ctx.where(event)
    where = ctx.at(file, line)
    rewrap = event.data.get("rewrap")
    roots = ctx.names(cut.roots)
    if node is None and rewrap is None:  # a leaf's own `.data`: the leaf is what loses its gradient
        return (
            f"`.data` of {ctx.name(source.id)} at {where} uses its values without its gradient path: they flow on "
            f"into {roots}, but backward ({ctx.line_of(cut.backward)}) gives {ctx.name(source.id)} no gradient "
            "through this use."
        )
    expression = event.data.get("expression", source.label)
    how = {
        EventKind.DETACH: f"`{expression}.detach()`",
        EventKind.DATA_GET: f"`{expression}.data`",
        EventKind.DETACH_: f"`{source.label}.detach_()`",
    }[event.kind]
    if rewrap is not None:
        how = f"`{rewrap}(...)`, which copies the values without their history,"
    produced = f" (output of {ctx.node_name(node)})" if node else ""
    return (
        f"{how} at {where} cuts the gradient path: {ctx.name(source.id)}{produced} flows on into "
        f"{roots}, but backward ({ctx.line_of(cut.backward)}) stops here, so nothing computed before it gets a "
        f"gradient through this path."
    )


def _cut_fix(ctx: Context, event: Event, source: TensorRecord, node: str | None) -> str:
    rewrap = event.data.get("rewrap")
    if rewrap is not None:
        return (
            f"To keep the gradient flowing use the tensor itself (or `{source.label}.clone()`); if cutting is "
            f"intended, say so with `{source.label}.detach().clone()`, as PyTorch's own warning recommends."
        )
    if event.kind is EventKind.DATA_GET and node is None:
        return f"Use {ctx.name(source.id)} itself so it trains; `.detach()` if it must stay fixed here."
    if event.kind is EventKind.DATA_GET:
        return (
            f"If cutting the graph is intended, write `{event.data.get('expression', source.label)}.detach()`: "
            "it cuts the same way but shares the version counter, so PyTorch catches in-place writes. "
            "Otherwise drop `.data`."
        )
    return (
        "If the layers before this point should train, remove the detach; keep it only where cutting is "
        "intended (a GAN discriminator step, truncated BPTT, a target network)."
    )


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

