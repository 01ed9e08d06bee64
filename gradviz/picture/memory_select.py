"""The memory view's choices: which tensors it draws one by one, in which order, which it sums up in tables and
notes instead (parameters, saved activations, buffers, aliases of parameters), and which writes it draws."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..analysis.initialisation import initialisation_writes, setup_events
from ..model import Event, EventKind, Trace
from .per_step import Repeat, fold_repeats, per_step_repeats

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from .steps import Step

__all__ = [
    "WRITES",
    "MemorySelection",
    "bound_writes",
    "bounded",
    "data_pipeline",
    "fold_writes",
    "grouped_activations",
    "memory_selection",
    "module_buffers",
    "nothing_to_draw",
    "ranked_tensors",
    "relevant_tensors",
    "summarised_parameters",
    "updates_through_aliases",
    "written_storages",
]

@dataclass
class MemorySelection:
    """The tensors the memory view draws one by one (`tensors`, in order) and what it sums up instead: the
    parameters' and buffers' tables, aliases of parameters, one alias drawn for every step (`repeats`, with the ×N
    `marks` of the tensors drawn for several), how many were left over the limit and how many are in no story."""

    tensors: list[str]
    over_limit: int
    uninvolved: int
    grouped: set[str]  # a training script's activations, summed up as one table
    keep: set[str]
    summarised: list[str] = field(default_factory=list)  # parameters in the table
    tabled_aliases: list[str] = field(default_factory=list)
    tabled_buffers: list[str] = field(default_factory=list)
    repeats: list[Repeat] = field(default_factory=list)
    marks: dict[str, str] = field(default_factory=dict)

    @property
    def shown(self) -> set[str]:
        return set(self.tensors)


def memory_selection(
    trace: Trace, findings: Sequence[Finding], steps: Sequence[Step], *, show_all: bool, max_tensors: int | None
) -> MemorySelection:
    """By default only tensors that share a storage with another tensor, or that events, findings or saved tensors
    mention, are drawn; `show_all=True` draws every tensor. `max_tensors` bounds the drawing (findings first)."""
    ranked = ranked_tensors(trace, findings, show_all=show_all)
    grouped, keep = (set(), set()) if show_all else grouped_activations(trace, findings)
    # an alias made at one line in every step (and what it aliases): one drawn for all, titled ×N (steps ...)
    aliases = any(t.origin in ("data", "detach") for t in trace.tensors.values())
    repeats = per_step_repeats(trace, findings, steps) if not show_all and aliases and steps else []
    folded, marks = fold_repeats(trace, findings, repeats)
    summarised: list[str] = []
    tabled_aliases: list[str] = []
    tabled_buffers: list[str] = []
    if keep:  # a training script: the model, the findings and the aliases; the step's activations as one table
        summarised, tabled_aliases, tabled_buffers, ranked = _training_tables(trace, findings, ranked, keep)
        repeats = [r for r in repeats if not set(r.members) <= set(tabled_aliases)]
    unfolded = [tid for tid in ranked if tid not in folded]
    folded_count, ranked = len(ranked) - len(unfolded), unfolded
    tensor_ids = bounded(trace, ranked, max_tensors)
    uninvolved = (len(trace.tensors) - len(ranked) - len(summarised) - folded_count - len(tabled_aliases)
                  - len(set(tabled_buffers) - set(tabled_aliases)))
    return MemorySelection(tensor_ids, len(ranked) - len(tensor_ids), uninvolved, grouped, keep, summarised,
                           tabled_aliases, tabled_buffers, repeats, marks)


def _training_tables(
    trace: Trace, findings: Sequence[Finding], ranked: list[str], keep: set[str]
) -> tuple[list[str], list[str], list[str], list[str]]:
    """A training script's tables: the parameters, the aliases of a parameter updated through `.data` with no finding
    involved (and its views: the table's row), the modules' buffers; and the ranked tensors left to draw."""
    summarised = summarised_parameters(trace, findings)
    in_table = set(summarised)
    table_storages = {trace.tensors[tid].storage for tid in in_table} - {None}
    named = {tid for f in findings for tid in f.tensors}
    tabled_aliases = [t.id for t in trace.tensors.values()
                      if t.storage in table_storages and t.id not in in_table and t.id not in named
                      and t.origin in ("data", "detach")]
    buffers = module_buffers(trace, findings)
    buffer_storages = {trace.tensors[tid].storage for tid in buffers} - {None}
    tabled_buffers = [t.id for t in trace.tensors.values() if t.storage in buffer_storages and t.id not in named]
    ranked = [tid for tid in ranked if tid in keep and tid not in in_table
              and (trace.tensors[tid].storage not in table_storages or tid in named)
              and (trace.tensors[tid].storage not in buffer_storages or tid in named)]
    return summarised, tabled_aliases, tabled_buffers, ranked


# Events whose `versions` list tensors whose bytes were written.
WRITES = (EventKind.INPLACE_WRITE, EventKind.OPTIMIZER_STEP)


def relevant_tensors(
    trace: Trace, findings: Sequence[Finding] = (), *, show_all: bool = False, max_tensors: int | None = 60
) -> tuple[list[str], int]:
    """The tensor ids the memory view draws, in creation order, and how many tensors it leaves out.

    Involved tensors come first (findings, events behind findings, aliases sharing a storage, other events, saved
    tensors); `max_tensors` keeps the most involved ones.
    """
    ids = bounded(trace, ranked_tensors(trace, findings, show_all=show_all), max_tensors)
    return ids, len(trace.tensors) - len(ids)


def ranked_tensors(trace: Trace, findings: Sequence[Finding], *, show_all: bool) -> list[str]:
    # findings first, then the model (parameters, the activations autograd saved, newest step first), then
    # aliases and writes; the data pipeline (inputs and their transforms) only with show_all
    tiers: list[list[str]] = [[], [], [], [], [], [], []]
    for f in findings:
        tiers[0].extend(f.tensors)
    finding_events = {seq for f in findings for seq in f.events}
    by_storage: dict[str, list[str]] = {}
    for t in trace.tensors.values():
        if t.storage is not None:
            by_storage.setdefault(t.storage, []).append(t.id)
    pipeline = data_pipeline(trace, by_storage)
    for e in trace.events:
        involved = [tid for tid in (e.tensor, e.result) if tid] + [v.tensor for v in e.versions]
        tiers[1 if e.seq in finding_events else 5].extend(involved)
    tiers[2].extend(t.id for t in trace.tensors.values() if t.parameter is not None or t.origin == "parameter")
    for node in sorted(trace.nodes.values(), key=lambda n: -n.seq):
        tiers[3].extend(s.tensor for s in node.saved if s.tensor)
    for t in trace.tensors.values():
        if t.storage is not None and len(by_storage[t.storage]) > 1:
            tiers[4].append(t.id)
    if show_all:
        tiers.append(list(trace.tensors))
    chosen: dict[str, None] = {}
    for number, tier in enumerate(tiers):
        for tid in tier:
            if tid in trace.tensors and (show_all or number < 2 or tid not in pipeline):
                chosen.setdefault(tid, None)
    return list(chosen)


def data_pipeline(trace: Trace, by_storage: dict[str, list[str]] | None = None) -> set[str]:
    """Tensors of the data pipeline: no gradient anywhere near them (not one of them, nor anything sharing their
    memory, requires grad), not saved for backward, not a parameter."""
    if by_storage is None:
        by_storage = {}
        for t in trace.tensors.values():
            if t.storage is not None:
                by_storage.setdefault(t.storage, []).append(t.id)
    if not any(t.parameter is not None for t in trace.tensors.values()):
        return set()  # not a model's training: every tensor may be the story (the document's examples)
    saved = {s.tensor for n in trace.nodes.values() for s in n.saved if s.tensor}
    grad_storages = {t.storage for t in trace.tensors.values() if t.requires_grad and t.storage is not None}
    return {
        t.id for t in trace.tensors.values()
        if not t.requires_grad and t.parameter is None and t.id not in saved and t.storage not in grad_storages
        and t.origin not in ("data", "detach")
    }


def bounded(trace: Trace, ranked: list[str], max_tensors: int | None) -> list[str]:
    """The first `max_tensors` of `ranked` (all with None), in creation order."""
    ids = ranked if max_tensors is None else ranked[:max_tensors]
    return sorted(ids, key=lambda tid: (trace.tensors[tid].seq, _id_number(tid)))


def _id_number(identifier: str) -> int:
    digits = "".join(ch for ch in identifier if ch.isdigit())
    return int(digits) if digits else 0


def grouped_activations(trace: Trace, findings: Sequence[Finding]) -> tuple[set[str], set[str]]:
    """In a training script, the activations autograd saved that no finding, alias or write of a parameter
    involves: drawn as one table by module and line (`activation_table`), not one box (and counter, and storage)
    each. Empty for programs that train no model (the document's examples): there every tensor may be the story."""
    if not any(t.parameter is not None for t in trace.tensors.values()):
        return set(), set()
    involved = {tid for f in findings for tid in f.tensors}
    finding_events = {seq for f in findings for seq in f.events}
    for e in trace.events:
        if e.seq in finding_events:
            involved.update(tid for tid in (e.tensor, e.result) if tid)
            involved.update(v.tensor for v in e.versions)
    # an alias made by `.data` / `.detach()` is the story of this view: it and what it aliases stay drawn
    for t in trace.tensors.values():
        if t.origin in ("data", "detach"):
            involved.add(t.id)
            if t.source:
                involved.add(t.source)
    involved_storages = {trace.tensors[tid].storage for tid in involved if tid in trace.tensors}
    saved = {s.tensor for n in trace.nodes.values() for s in n.saved if s.tensor}
    grouped = {
        tid for tid in saved
        if tid in trace.tensors and tid not in involved and trace.tensors[tid].parameter is None
        and trace.tensors[tid].origin != "parameter" and trace.tensors[tid].storage not in involved_storages
    }
    keep = involved | {t.id for t in trace.tensors.values()
                       if t.parameter is not None or t.origin == "parameter" or (t.storage in involved_storages)}
    return grouped, keep


def summarised_parameters(trace: Trace, findings: Sequence[Finding]) -> list[str]:
    """The parameters the parameter table sums up: all but those a finding names, that share their memory with
    another tensor (a `.data` / `.detach()` alias, a tied weight), or that the program wrote other than by
    initialising them or stepping an optimizer. Those are drawn one by one."""
    named = {tid for f in findings for tid in f.tensors}
    finding_events = {seq for f in findings for seq in f.events}
    updates, quiet = updates_through_aliases(trace, findings)
    sharing: dict[str, int] = {}  # storage -> parameters and program-made aliases in it (not a linear's `.t()`)
    for t in trace.tensors.values():
        if t.id in quiet:
            continue
        if t.storage is not None and (t.parameter is not None or t.origin in ("parameter", "data", "detach")):
            sharing[t.storage] = sharing.get(t.storage, 0) + 1
    initial = initialisation_writes(trace)
    own_writes = {
        v.tensor for e in trace.events
        if (e.kind is EventKind.INPLACE_WRITE and e.seq not in initial and e.seq not in updates)
        or e.seq in finding_events
        for v in e.written()
    }
    return [
        t.id for t in trace.tensors.values()
        if (t.parameter is not None or t.origin == "parameter") and t.id not in named and t.id not in own_writes
        and (t.storage is None or sharing.get(t.storage, 0) <= 1)
    ]


def updates_through_aliases(trace: Trace, findings: Sequence[Finding]) -> tuple[set[int], set[str]]:
    """Writes to parameters through their own `.data` / `.detach()` aliases that no finding involves (manual SGD:
    `p.data.add_(p.grad, alpha=-lr)`), and those aliases: a row of the parameter table, not drawn one by one.

    An alias counts only if every event that touches it is its making or such a write; one the program reads
    afterwards, keeps, or that a finding names stays drawn."""
    named = {tid for f in findings for tid in f.tensors}
    finding_events = {seq for f in findings for seq in f.events}

    def of_parameter(tid: str) -> bool:
        t = trace.tensors.get(tid)
        return t is not None and (t.parameter is not None or t.origin == "parameter")

    def alias_of_parameter(tid: str) -> bool:
        t = trace.tensors.get(tid)
        return t is not None and t.origin in ("data", "detach") and t.source is not None and of_parameter(t.source)

    updates: set[int] = set()
    candidates: set[str] = set()
    touched_otherwise: set[str] = set()
    for e in trace.events:
        involved = {tid for tid in (e.tensor, e.result) if tid} | {v.tensor for v in e.versions}
        if e.kind is EventKind.INPLACE_WRITE and e.seq not in finding_events and involved and not involved & named:
            aliases = {tid for tid in involved if alias_of_parameter(tid)}
            if aliases and all(tid in aliases or of_parameter(tid) for tid in involved):
                updates.add(e.seq)
                candidates |= aliases
                continue
        if e.kind in (EventKind.DATA_GET, EventKind.DETACH) and e.seq not in finding_events:
            continue  # making an alias
        touched_otherwise |= involved
    # an alias the program never named nor used again (`state_dict()` detaching each parameter) is quiet too
    used = {tid for op in trace.ops for tid in op.inputs}  # `w.detach().clone()`: the clone read it
    unnamed = {t.id for t in trace.tensors.values() if alias_of_parameter(t.id) and not t.names and t.id not in used}
    quiet = {tid for tid in (candidates | unnamed) - touched_otherwise - named}
    # a write through an alias that is not quiet (read later, named) is the program's own again
    updates = {e.seq for e in trace.events if e.seq in updates
               and all(not alias_of_parameter(tid) or tid in quiet
                       for tid in [e.tensor or "", *(v.tensor for v in e.versions)])}
    return updates, quiet


def module_buffers(trace: Trace, findings: Sequence[Finding]) -> set[str]:
    """Module buffers (a BatchNorm's running_mean/var, num_batches_tracked): tensors without gradients filled while
    the model was built (at a line that initialised parameters, before any graph) that no finding names. The forward
    updates them in place every step; they are summed up in one note, not drawn one by one."""
    named = {tid for f in findings for tid in f.tensors}
    setup = setup_events(trace)
    out = set()
    for e in trace.events:
        if e.seq in setup and e.kind is EventKind.INPLACE_WRITE:
            for v in e.versions:
                t = trace.tensors.get(v.tensor)
                if t is not None and t.parameter is None and t.origin != "parameter" and not t.requires_grad:
                    out.add(t.id)
    return out - named


def fold_writes(
    writes: Sequence[Event], hot_event: dict[int, str], shown: set[str]
) -> tuple[list[Event], dict[int, int]]:
    """Writes at one line to the same drawn tensors (a loop's `param.data.add_(...)` every step) as one: the last,
    with how many times. A write a finding points at stays its own box."""
    groups: dict[tuple[object, ...], list[Event]] = {}
    order: list[tuple[object, ...]] = []
    for e in writes:
        targets = tuple(sorted(v.tensor for v in e.written() if v.tensor in shown))
        loc = (e.location.file, e.location.line) if e.location else (None, None)
        key: tuple[object, ...] = ("finding", e.seq) if e.seq in hot_event else (e.kind, *loc, e.op, targets)
        if key not in groups:
            order.append(key)
        groups.setdefault(key, []).append(e)
    folded = [groups[key][-1] for key in order]
    return sorted(folded, key=lambda e: e.seq), {groups[key][-1].seq: len(groups[key]) for key in order}


def bound_writes(writes: list[Event], hot_event: dict[int, str], limit: int) -> list[Event]:
    """Every write a finding points at, then the earliest others up to `limit` in all; in their order."""
    if len(writes) <= limit:
        return writes
    keep = {e.seq for e in writes if e.seq in hot_event}
    for e in writes:
        if len(keep) >= limit:
            break
        keep.add(e.seq)
    return [e for e in writes if e.seq in keep]


def written_storages(trace: Trace, event: Event) -> list[str]:
    """The storages whose bytes `event` wrote: the one it names, else those of the tensors it wrote."""
    storage = event.data.get("storage")
    if isinstance(storage, str):
        return [storage]
    out: list[str] = []
    for v in event.written():
        sid = trace.tensors[v.tensor].storage
        if sid is not None and sid not in out:
            out.append(sid)
    return out


def nothing_to_draw(trace: Trace) -> bool:
    """True when no two tensors share a storage, nothing was written and autograd saved nothing: the only case in
    which the view may say so."""
    storages: set[str] = set()
    for t in trace.tensors.values():
        if t.storage is not None:
            if t.storage in storages:
                return False
            storages.add(t.storage)
    if any(e.kind in WRITES and e.written() for e in trace.events):
        return False
    return not any(s.tensor for n in trace.nodes.values() for s in n.saved)
