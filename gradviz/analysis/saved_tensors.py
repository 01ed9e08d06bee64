"""Saved tensors changed while a graph still needs them: written in place through a tensor that shares their version
counter, themselves included (`poisoned_saved_tensor`: backward raises); their bytes changed where no version moves
(an alias made by `.data`, a pack hook, batch norm's running statistics) or their `.data` swapped
(`silently_corrupted_saved_tensor`: gradients silently wrong); detached in place (`detach_inplace_saved`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..model import Event, EventKind, NodeRecord, SavedTensorRecord, TensorRecord, Trace, VersionChange
from .context import Context
from .findings import Finding, FindingKind, SavedTensorEvidence, version_text
from .names import statement
from .verify import measurement_of, then_sentence

_VERSIONS = re.compile(r"is at version (\d+); expected version (\d+)")


def _pytorch_versions(trace: Trace, backward: Event) -> tuple[str, str] | None:
    """The version numbers PyTorch's own error gave (in a loop, 10 and 9, where our records count from the save)."""
    error = backward.data.get("error")
    message = error.get("message", "") if isinstance(error, dict) else str(error or "")
    found = _VERSIONS.search(message) or _VERSIONS.search(trace.exception.message if trace.exception else "")
    return (found.group(1), found.group(2)) if found else None


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
    findings: list[Finding] = []
    by_node: dict[str, list[_Entry]] = {}
    judged: set[tuple[int, str, str]] = set()
    for entry in entries:
        by_node.setdefault(entry[0].id, []).append(entry)
    for write in _writes(trace):
        seq = write.event.seq
        while upcoming is not None and upcoming[0].seq < seq:
            alive.setdefault(upcoming[2].storage, []).append(upcoming)
            upcoming = next(pending, None)
        # a write a custom Function's backward made while the program's backward ran: the nodes of that backward
        # still to run that saved what it changed read it there (the tracer saw autograd had not freed them yet)
        later = write.event.data.get("read_later", ())
        during = ctx.backward_at(write.event.data["backward"]) if later else None
        if during is not None:
            for node, saved, tensor in (entry for nid in later for entry in by_node.get(nid, ())):
                key = (during.seq, node.id, saved.name)
                if tensor.storage != write.storage or key in judged:
                    continue  # (the first write of that backward to what the node saved is the one to report)
                finding = _judge(ctx, write, node, saved, tensor, None, during)
                if finding is not None:
                    judged.add(key)
                    findings.append(finding)
        if write.storage is None or write.storage not in alive:
            continue
        still = [entry for entry in alive[write.storage] if ctx.freed_at.get(entry[0].id, never) >= seq]
        alive[write.storage] = still
        # batch norm's update of its running statistics moves no version: only the nodes that read them matter
        readers = write.event.data.get("readers") if write.event.data.get("unversioned") else None
        for node, saved, tensor in still:
            if during is not None and node.id in later:
                continue  # (judged above, against the backward the write was made in)
            finding = _judge(ctx, write, node, saved, tensor, readers, None)
            if finding is not None:
                findings.append(finding)
    # by saved tensor: each .data set or detach_() looks up its own tensor's entries, not all of them
    by_tensor: dict[str, list[_Entry]] = {}
    for entry in entries:
        by_tensor.setdefault(entry[2].id, []).append(entry)
    findings += _data_set_findings(ctx, by_tensor)
    findings += _detach_inplace_findings(ctx, by_tensor)
    return findings


def _judge(
    ctx: Context,
    write: _Write,
    node: NodeRecord,
    saved: SavedTensorRecord,
    tensor: TensorRecord,
    readers: list[str] | None,
    during: Event | None,
) -> Finding | None:
    """One write against one saved tensor of a live node: whether it moves the version autograd will check, or
    changes the bytes it will read. `readers`: the nodes a version-less write (batch norm's) reaches; `during`: the
    backward the write was made in, which reads it later."""
    if readers is not None and node.id not in readers:
        return None  # (a train-mode batch norm's node holds them too, but its backward does not read them)
    # under a pack hook autograd compares no versions: even a shared counter lets the write through silently
    shares = write.counter is not None and write.counter == tensor.version_counter and not saved.packed and readers is None
    # autograd compares versions, not bytes: a write to another row of the saved row's base moves its version
    if not shares and not _overlaps(write.byte_range, tensor.byte_range):
        return None
    touched = _overlaps(write.byte_range, tensor.byte_range)
    return _saved_write_finding(ctx, write, node, saved, tensor, shares, touched=touched, during=during)


def _consequence(ctx: Context, seq: int, node: NodeRecord) -> tuple[Event | None, bool]:
    backward = ctx.backward_after(seq, node.id)
    return backward, backward is not None or ctx.pending_at_end(node.id)


def _inside_module(module: str | None, call: str) -> str:
    """Where a write ran, as a reader of the program finds it: the class's forward, then which module it was and,
    where it took arguments, how the program built it: " inside `Net.forward` (module `model`)", " inside
    `nn.ReLU.forward` (module `act`, built as `nn.ReLU(inplace=True)`)". (Where, not who: a write in a model's own
    forward is the model's code at that line.)"""
    cls = call.partition("(")[0]
    about = [f"module `{module}`"] if module else []
    if call != f"{cls}()":
        about.append(f"built as `{call}`")
    return f" inside `{cls}.forward`" + (f" ({', '.join(about)})" if about else "")


def _saved_write_finding(
    ctx: Context,
    write: _Write,
    node: NodeRecord,
    saved: SavedTensorRecord,
    tensor: TensorRecord,
    shares: bool,
    *,
    touched: bool = True,
    during: Event | None = None,
) -> Finding | None:
    backward, relevant = (during, True) if during is not None else _consequence(ctx, write.event.seq, node)
    if not relevant:
        return None
    now = next((c.after for c in write.changes if c.tensor == tensor.id), None)
    if now is None and shares:
        now = next((c.after for c in write.changes if c.tensor == write.tensor), None)
    evidence = _write_evidence(ctx, write, node, saved, tensor, now, shares)
    if shares:
        return _poisoned_finding(ctx, write, node, saved, evidence, backward, touched=touched, during=during)
    return _corrupted_finding(ctx, write, node, saved, evidence, backward, during=during)


def _writer_text(ctx: Context, write: _Write, tensor: str, code: str) -> str:
    """What the write went through: "`c`", "`x` itself", "the optimizer step `opt.step()`", a batch norm's update."""
    if write.event.data.get("unversioned"):
        return "the running-statistics update of a batch norm in train mode"
    if write.event.kind is EventKind.OPTIMIZER_STEP:
        return f"the optimizer step `{statement(code)}`"
    return f"{ctx.name(tensor)} itself" if write.tensor == tensor else f"{ctx.alias(write.tensor)}"


def _writer_place(ctx: Context, write: _Write, during: Event | None) -> str:
    """Where in the program the write ran, when not at the user's line itself: a module's forward, or a backward."""
    running = ctx.trace.nodes.get(write.event.data.get("backward_node", ""))
    if during is not None and running is not None:
        return f" (in {running.name}'s backward, run by the backward at {ctx.line_of(during)})"
    call = write.event.data.get("module_call")
    if call and write.event.kind is not EventKind.OPTIMIZER_STEP:
        return _inside_module(write.event.data.get("module"), call)
    return ""


def _poisoned_finding(
    ctx: Context,
    write: _Write,
    node: NodeRecord,
    saved: SavedTensorRecord,
    evidence: SavedTensorEvidence,
    backward: Event | None,
    *,
    touched: bool,
    during: Event | None,
) -> Finding:
    """A write through a tensor sharing the saved tensor's version counter: backward raises (or will)."""
    file, line, code = ctx.where(write.event)
    via, by = _writer_text(ctx, write, evidence.tensor, code), _writer_place(ctx, write, during)
    what = f"{ctx.name(evidence.tensor)}, saved by {node.name} for backward at {version_text(evidence.saved_version)}"
    now = version_text(evidence.version_now)
    if backward is not None and backward.data.get("outcome") == "error":
        quoted = _pytorch_versions(ctx.trace, backward) or (str(evidence.version_now), _v(saved))
        then = f"The backward at {ctx.line_of(backward)} raised: \"is at version {quoted[0]}; expected version {quoted[1]}\"."
    elif backward is not None:
        then = f"The backward at {ctx.line_of(backward)} runs through it."
    else:
        then = "No backward has run through it yet: calling backward will raise."
    return Finding(
        FindingKind.POISONED_SAVED_TENSOR,
        file,
        line,
        (
            f"{what}, was written in place at {ctx.at(file, line)}{by} through {via}, which shares its version "
            f"counter: now {now}. {then}"
            if touched
            else f"{what}, shares its version counter with {via}, written in place at line {line}{by}: other bytes "
            f"than its own, but autograd counts versions, not bytes: now {now}. {then}"
        ),
        "Do not modify a tensor autograd saved: clone first (`x = x.clone()` or `c = out.detach().clone()`), "
        "use the out-of-place op, or do the update after backward (for optimizers: build the next loss after "
        "`step()`).",
        code=code,
        tensors=[evidence.tensor, write.tensor],
        nodes=[node.id],
        events=[write.event.seq] + ([backward.seq] if backward else []),
        affected_backward=backward.seq if backward else None,
        evidence=[evidence],
    )


def _corrupted_finding(
    ctx: Context,
    write: _Write,
    node: NodeRecord,
    saved: SavedTensorRecord,
    evidence: SavedTensorEvidence,
    backward: Event | None,
    *,
    during: Event | None,
) -> Finding:
    """A write that changed the saved tensor's bytes where no version moves: gradients silently wrong."""
    file, line, code = ctx.where(write.event)
    via, by = _writer_text(ctx, write, evidence.tensor, code), _writer_place(ctx, write, during)
    if backward is not None:
        then = f"The backward at {ctx.line_of(backward)} used the changed values: its gradients are silently wrong."
    else:
        then = "No backward has run through it yet: when it does, its gradients will be silently wrong."
    measured = measurement_of(
        ctx.trace, write.event, backward, ctx.name, step=ctx.step_of(backward), written=[evidence.tensor, write.tensor]
    )
    then = then_sentence(measured, ctx.line_of(backward), then)
    why, fix = _unnoticed_because(write, saved, evidence, during)
    return Finding(
        FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR,
        file,
        line,
        f"{ctx.name(evidence.tensor)}, saved by {node.name} for backward at {version_text(evidence.saved_version)}, "
        f"had its bytes changed at {ctx.at(file, line)}{by} through {via}{why}. {then}",
        fix,
        code=code,
        tensors=[evidence.tensor, write.tensor],
        nodes=[node.id],
        events=[write.event.seq] + ([backward.seq] if backward else []),
        affected_backward=backward.seq if backward else None,
        measured=measured,
        evidence=[evidence],
    )


def _unnoticed_because(
    write: _Write, saved: SavedTensorRecord, evidence: SavedTensorEvidence, during: Event | None
) -> tuple[str, str]:
    """Why autograd did not notice a write to a saved tensor's bytes (the message's clause), and the fix for it."""
    still = version_text(evidence.version_now)  # (a write it did not notice left the version as saved)
    if write.event.data.get("unversioned"):
        why = f", which moves no version (a known PyTorch issue), so autograd did not notice (still {still})"
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
    elif during is not None:
        why = f", which has its own version counter, so autograd did not notice (still {still})"
        fix = (
            "Write the backward's result into a buffer of its own (`torch.empty_like(...)`), not over a tensor the "
            "graph saved; or make the reader after this Function (autograd runs the later-made node first)."
        )
    else:
        why = f", which has its own version counter, so autograd did not notice (still {still})"
        fix = (
            "Use `.detach()` instead of `.data` so PyTorch raises on this write, and `.clone()` before modifying; "
            "or make the update under `torch.no_grad()` after backward."
        )
    return why, fix


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
                f"The backward at {ctx.line_of(backward)} used the new values: its gradients are silently wrong."
                if backward
                else "When backward runs, its gradients will be silently wrong."
            )
            measured = measurement_of(
                ctx.trace, event, backward, ctx.name, step=ctx.step_of(backward), written=[tensor.id]
            )
            then = then_sentence(measured, ctx.line_of(backward), then)
            findings.append(
                Finding(
                    FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR,
                    file,
                    line,
                    f"{ctx.name(tensor.id)} was saved by {node.name} for backward itself (not a copy), and "
                    f"`{statement(code)}` at {ctx.at(file, line)} swaps its data while the graph is live; its version stays "
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
                f"The backward at {ctx.line_of(backward)} raised \"{message}\"."
                if backward and backward.data.get("outcome") == "error"
                else f"Calling backward through it will raise \"{message}\"."
            )
            findings.append(
                Finding(
                    FindingKind.DETACH_INPLACE_SAVED,
                    file,
                    line,
                    f"`{statement(code)}` at {ctx.at(file, line)} detaches {ctx.name(tensor.id)} in place, but {node.name} saved it as "
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

