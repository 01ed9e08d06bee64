"""Parameter updates that no gradient drove (`update_without_gradient`): an optimizer's step() moving a parameter no
backward reached, and updates outside torch.optim (`p.data.mul_`, `p.mul_` under no_grad, `p.copy_`)."""

from __future__ import annotations

import bisect
from collections.abc import Set as AbstractSet

from ..model import Event, EventKind, Trace
from .context import Context, line_at
from .findings import Finding, FindingKind
from .names import statement


def _trained(trace: Trace, dead: set[str]) -> set[str]:
    """Parameters the program trains: those in an optimizer, else (a hand-written step) those a backward reached
    or should have reached (dead parameters). A target network outside both is updated without gradients by
    design (EMA)."""
    steps = trace.events_of(EventKind.OPTIMIZER_STEP)
    if steps:
        return {tid for step in steps for tid in step.data.get("grads", {})}
    return dead | {leaf for e in trace.events_of(EventKind.BACKWARD) for leaf in e.data.get("reached_leaves", [])}


def _parameter_of(trace: Trace, tid: str, trained: set[str]) -> str | None:
    """The trained parameter `tid` is, or is an alias of (`p.data`, `p.detach()`, a view of `p`)."""
    seen = 0
    while tid is not None and seen < 64:
        if tid in trained:
            return tid
        record = trace.tensors[tid]
        if record.origin not in ("data", "detach", "view") or record.source is None:
            return None
        tid, seen = record.source, seen + 1
    return None


def manual_update_findings(trace: Trace, dead: AbstractSet[str] = frozenset()) -> list[Finding]:
    """In-place writes to a trained parameter after a backward that gave it no gradient (a wrapper's weight decay).

    `dead`: parameters the dead-parameter pass found (they take part in a loss but get no gradient)."""
    trained = _trained(trace, set(dead))
    if not trained:
        return []
    backwards = [e for e in trace.events_of(EventKind.BACKWARD) if e.data.get("outcome", "ok") == "ok"]
    backward_seqs = [e.seq for e in backwards]
    updates: dict[str, list[int]] = {}  # parameter -> seqs of its updates so far
    findings = []
    for event in trace.events:
        if event.kind is EventKind.OPTIMIZER_STEP:
            for tid in event.data.get("changed", []):
                updates.setdefault(tid, []).append(event.seq)
            continue
        if event.kind is not EventKind.INPLACE_WRITE or event.tensor is None:
            continue
        if not any(c.before != c.after for c in event.versions[:1]):
            continue
        param = _parameter_of(trace, event.tensor, trained)
        if param is None:
            continue
        window = _backwards_since_update(trace, param, event.seq, backwards, backward_seqs, updates.setdefault(param, []))
        if window is None or any(param in e.data.get("reached_leaves", []) for e in window):
            continue  # initialisation, or it has a gradient: weight decay or clipping alongside a gradient step
        findings.append(_update_finding(trace, event, param, window[-1]))
    return findings


# ------------------------------------------------------------------------------------------ optimizer steps
def _given_in_step_finding(
    ctx: Context, event: Event, tid: str, latest: Event | None, file: str | None, line: int | None, code: str
) -> Finding:
    """The parameter had no `.grad`; the optimizer's own step() gave it one (`p.grad = torch.zeros_like(p)`) and then
    moved it: the line to change is that one, not the program's call of step()."""
    name = ctx.name(tid)
    optimizer = event.data.get("optimizer", "The optimizer")
    at = event.data.get("grad_given_at")
    where = f" at {ctx.at(at[0], at[1])} (`{at[2]}`)" if at else ""
    if at:
        file, line, code = at[0], at[1], at[2]
    label = ctx.trace.tensors[tid].label
    return Finding(
        FindingKind.UPDATE_WITHOUT_GRADIENT,
        file,
        line,
        f"{name} had no `.grad` when {optimizer}.step() was called at {ctx.at(*ctx.where(event)[:2])}: no backward "
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
                f"any backward since the previous step (the latest: {line_at(trace, latest.location.file, latest.location.line) if latest.location else 'an unknown line'})"
                if latest is not None
                else "any backward"
            )
            findings.append(
                Finding(
                    FindingKind.UPDATE_WITHOUT_GRADIENT,
                    file,
                    line,
                    f"{event.data.get('optimizer', 'The optimizer')}.step() at {ctx.at(file, line)} changed "
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


def _backwards_since_update(
    trace: Trace, param: str, seq: int, backwards: list[Event], backward_seqs: list[int], done: list[int]
) -> list[Event] | None:
    """The backwards whose gradients the update of `param` at `seq` could use (`done`: its updates so far, to which
    this one is added); None for its initialisation (no backward since the parameter was made)."""
    last = bisect.bisect_left(backward_seqs, seq)
    # a parameter's life starts when it is made: backwards before it (an earlier model of a sweep) are not its
    born = bisect.bisect_right(backward_seqs, trace.tensors[param].seq)
    if last <= born:
        done.append(seq)
        return None
    # the gradients this update could use: every backward since the parameter's last update before the
    # latest backward (several writes after one backward are one update: `p.mul_(..)`, then `p.sub_(..)`)
    since = done[bisect.bisect_left(done, backward_seqs[last - 1]) - 1] if done and done[0] < backward_seqs[last - 1] else -1
    done.append(seq)
    return backwards[max(born, bisect.bisect_right(backward_seqs, since)) : last]


def _update_finding(trace: Trace, event: Event, param: str, latest: Event) -> Finding:
    loc = event.location
    record = trace.tensors[param]
    written = trace.tensors[event.tensor]  # type: ignore[index]  # (an in-place write names its tensor)
    via = f"`{record.label}.data`" if written.origin == "data" else f"`{record.label}`"
    return Finding(
        FindingKind.UPDATE_WITHOUT_GRADIENT,
        loc.file if loc else None,
        loc.line if loc else None,
        f"`{(statement(loc.code) if loc else event.op) or event.op}` at {line_at(trace, loc.file, loc.line) if loc else 'an unknown line'} changed "
        f"{via} in place (`{event.op}`) although no gradient reached `{record.label}` in any backward since "
        f"its previous update (the latest: {line_at(trace, latest.location.file, latest.location.line) if latest.location else 'an unknown line'}): an "
        "update outside the optimizer (weight decay, a custom step) moves a parameter that is not training.",
        f"Apply the update only to parameters that have a gradient (`if p.grad is not None:`), or leave "
        f"`{record.label}` out of the update / `requires_grad_(False)` if it is frozen.",
        parameter=record.label,
        code=loc.code.strip() if loc else "",
        tensors=[param, written.id],
        events=[event.seq, latest.seq],
        affected_backward=latest.seq,
    )
