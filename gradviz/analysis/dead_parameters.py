"""Dead parameters (`dead_parameter`): leaves that take part in a loss but get no gradient from any backward, grouped
by the cut or the call without gradient tracking that starves them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..model import Event, EventKind, OpRecord, TensorRecord, Trace
from .context import Context, source_line
from .cuts import Cut
from .findings import Finding, FindingKind
from .names import number_ranges, statement
from .reach import first_backward_reached, first_source_reached


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
        checkpointed = False
        if cut is not None and trained_models is not None and _model_of(record) not in trained_models:
            continue
        if cut is not None:
            file, line, code = ctx.where(cut.event)
            reason = f"every path from them to the loss passes through the cut at {ctx.at(file, line)} (`{statement(code)}`)"
            events, nodes = [cut.event.seq], [n for n in [cut.event.data.get("source_grad_fn")] if n]
        else:
            op = _no_grad_break(ctx, leaf, backward)
            if op is None or (optimized is not None and leaf not in optimized):
                continue
            file, line = op.file, op.line
            code = source_line(trace, file, line)
            reason = f"their values reach the loss only through `{op.name}` at {ctx.at(file, line)}, computed without gradient tracking"
            if op.checkpoint_line is not None or _REENTRANT_CHECKPOINT.search(statement(code)):
                # the reentrant checkpoint runs its function under no_grad and backpropagates through the
                # recomputation only from inputs that require grad: PyTorch warns and gives the parameters none.
                # The line to blame is the checkpoint call, not the layer inside it
                if op.checkpoint_line is not None:
                    file, line = op.checkpoint_file, op.checkpoint_line
                    code = source_line(trace, file, line)
                passed = "use_reentrant" in statement(code)
                how = "with `use_reentrant=True`" if passed else "with `use_reentrant` not passed (True then, and PyTorch warned to pass it)"
                reason = (
                    f"their values reach the loss only through `checkpoint` at {ctx.at(file, line)} (`{statement(code)}`), "
                    f"which {how} runs its function without gradient tracking and passes "
                    "gradients back only through inputs that require grad, and none of its inputs does (PyTorch "
                    f"warned: \"{CHECKPOINT_WARNING}\")"
                )
                checkpointed = True
            events, nodes = [], []
        group = groups.setdefault((file, line, reason), _Starved(file, line, code, reason, backward, checkpointed))
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
    checkpointed: bool = False  # the cause is `checkpoint(..., use_reentrant=True)`
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
        f"{head} in computing the loss backpropagated at {ctx.line_of(group.backward)}, but no backward in the run "
        f"gives {'it' if len(records) == 1 else 'them'} a gradient: {reason}. {tail}",
        (
            f"Pass `use_reentrant=False` to `checkpoint` (the non-reentrant checkpoint, which PyTorch recommends, "
            f"gives the parameters inside it gradients whatever its inputs); if {they} {are} meant to be frozen, say "
            f"so with {frozen} and leave {them} out of the optimizer."
            if group.checkpointed
            else f"Remove the detach (or `torch.no_grad()`) on the path if {they} should learn; if {they} {are} meant "
            f"to be frozen, say so with {frozen} and leave {them} out of the optimizer."
        ),
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
            note = f"for * in {number_ranges(sorted(int(n[0]) for n in numbers))}"
        elif len(numbers) > 1:
            note = f"in {len(numbers)} modules"
        out.append((pattern, note))
    if len(patterns) > kinds:
        out.append(("", f"\N{HORIZONTAL ELLIPSIS} {len(patterns) - kinds} more"))
    return out



_REENTRANT_CHECKPOINT = re.compile(r"\bcheckpoint\w*\(")  # (traces recorded before ops named their checkpoint)
#: what torch.utils.checkpoint warns when a reentrant checkpoint's inputs do not require grad
CHECKPOINT_WARNING = "None of the inputs have requires_grad=True. Gradients will be None"


def _model_of(record: TensorRecord) -> str | None:
    """The model a parameter belongs to: the variable (or class) its qualified name starts with."""
    return record.parameter.split(".", 1)[0] if record.parameter and "." in record.parameter else record.parameter


def _explaining_cuts(ctx: Context, leaves: set[str], found: list[Cut]) -> dict[str, Cut]:
    """For each leaf, the first cut whose source it flowed into (or is): the cut that kept its gradient away."""
    ordered = sorted(found, key=lambda cut: cut.event.seq)
    sources = first_source_reached(ctx.flow, leaves, [(cut.event.seq, cut.event.tensor) for cut in ordered])  # type: ignore[misc]  # (a cut's event names its tensor)
    explained: dict[str, Cut] = {}
    for number, cut in enumerate(ordered):
        for leaf in sources[number]:
            explained.setdefault(leaf, cut)
    return explained


def _no_grad_break(ctx: Context, leaf: str, backward: Event) -> OpRecord | None:
    """The first call on a path from `leaf` to the loss whose inputs require grad but whose outputs do not."""
    trace = ctx.trace
    downstream = ctx.flow.descendants(leaf, -1, before=backward.seq)  # (only up to that backward: bounded work)
    for op in trace.ops:
        if op.seq >= backward.seq:
            break
        ins = [t for t in op.inputs if t == leaf or t in downstream]
        if ins and any(trace.tensors[t].requires_grad for t in ins) and op.outputs and not any(
            trace.tensors[t].requires_grad for t in op.outputs
        ):
            return op
    return None

