"""What the memory view sums up instead of drawing one by one: the parameter table (by module), the table or note
lines of what autograd saved in the last step (by module and line), and the notes on aliases made every step,
parameters' aliases and module buffers; sizes as a person reads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..analysis.initialisation import initialisation_writes
from ..analysis.names import Namer, statement
from ..model import EventKind, Trace
from ..picture.memory_select import WRITES, updates_through_aliases
from ..picture.per_step import Repeat, steps_text
from ..picture.steps import Step
from .escape import html_label_text, shorten
from .memory_boxes import SAVED_COLOUR

if TYPE_CHECKING:
    from ..analysis.findings import Finding

__all__ = [
    "activation_table",
    "buffer_note",
    "bytes_text",
    "parameter_table",
    "repeat_notes",
    "saved_by_module",
    "tabled_alias_notes",
]


def repeat_notes(repeats: Sequence[Repeat], namer: Namer) -> list[str]:
    """One note line per (line, kind) of alias made again in every step, however many tensors it aliased."""
    by_place: dict[tuple[int | None, str], list[Repeat]] = {}
    for repeat in repeats:
        by_place.setdefault((repeat.line, repeat.kind), []).append(repeat)
    notes = []
    for (line, kind), group in by_place.items():
        first = group[0]
        if len(group) == 1:
            made = namer.alias(first.drawn[-1])
            drawn = "drawn once, titled " + first.title() if len(first.drawn) == 1 else \
                f"the {len(first.drawn)} a finding names are drawn"
            notes.append(f"{made} at line {line}: made {first.count} times ({first.span()}), {drawn}")
            continue
        total = sum(r.count for r in group)
        call = ".data" if kind == "data" else ".detach()"
        inside = sorted({s for r in group for s in r.steps if s <= (r.last_step or s)})
        notes.append(f"`{call}` at line {line}: {len(group)} tensors aliased, {total} aliases in all (steps "
                     f"{steps_text(inside)}), each drawn once, titled \N{MULTIPLICATION SIGN}N")
    return notes


def buffer_note(trace: Trace, members: Sequence[str]) -> str:
    """One line for the buffers and their aliases: how many, their bytes, how often the program wrote them."""
    own = [tid for tid in members if trace.tensors[tid].origin not in ("data", "detach", "view")]
    wanted = set(members)
    writes = sum(1 for e in trace.events if e.kind is EventKind.INPLACE_WRITE and any(v.tensor in wanted for v in e.versions))
    size = sum(_nbytes(trace, tid) for tid in own)
    aliases = len(members) - len(own)
    return (f"buffers: {len(own)} tensor{'s' if len(own) != 1 else ''} without gradients filled as the modules were "
            f"built (running statistics, counters; {bytes_text(size)}), written {writes} times in all"
            f"{f', {aliases} aliases or views of them' if aliases else ''}: not drawn one by one (--show-all draws them)")


def tabled_alias_notes(trace: Trace, aliases: Sequence[str]) -> list[str]:
    """The `.data` / `.detach()` aliases of parameters summed up in the parameter table: one line per (line, kind)."""
    by_place: dict[tuple[int | None, str], list[str]] = {}
    for tid in aliases:
        t = trace.tensors[tid]
        by_place.setdefault((t.created.line if t.created else None, t.origin), []).append(tid)
    notes = []
    for (line, origin), members in by_place.items():
        call = ".data" if origin == "data" else ".detach()"
        sources = {trace.tensors[tid].source for tid in members}
        where = f" at line {line}" if line is not None else ""
        through = any(e.kind is EventKind.INPLACE_WRITE and e.tensor in members for e in trace.events)
        notes.append(f"`{call}`{where}: {len(members)} alias{'es' if len(members) != 1 else ''} of {len(sources)} "
                     f"parameter{'s' if len(sources) != 1 else ''}"
                     f"{', written through' if through else ', not used again'}, no finding involved: "
                     "in the parameter table, not drawn one by one")
    return notes


@dataclass
class _SavedGroup:
    """What one module's line saved for backward in the last step: tensors by their place in memory, the ops."""

    module: str
    line: int | None
    code: str = ""
    sizes: dict[str, int] = field(default_factory=dict)  # "storage:offset" -> bytes: memory two share counted once
    ops: dict[str, None] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(self.sizes.values())


def _saved_groups(trace: Trace, steps: list[Step]) -> tuple[str, str, int, list[_SavedGroup]] | None:
    """What autograd holds for the last training step, grouped by module and line, largest first: the step in
    short ("step 10") and in full ("step 10 of 10 (backward at line 34)"), the total bytes, the groups. Parameters
    are left out: they are drawn as themselves. `steps`: the picture's (`split_steps(trace)`)."""
    node_ids = steps[-1].nodes if steps else list(trace.nodes)
    groups: dict[tuple[str, int | None], _SavedGroup] = {}
    for nid in node_ids:
        node = trace.nodes[nid]
        for saved in node.saved:
            tensor = trace.tensors.get(saved.tensor) if saved.tensor else None
            if tensor is None or tensor.parameter is not None or tensor.byte_range is None:
                continue
            module, line = node.module or "(no module)", node.created.line if node.created else None
            group = groups.get((module, line))
            if group is None:
                code = node.created.code.strip() if node.created is not None and node.created.code else ""
                group = groups[(module, line)] = _SavedGroup(module, line, code)
            group.sizes[f"{tensor.storage}:{tensor.byte_range[0]}"] = tensor.byte_range[1] - tensor.byte_range[0]
            group.ops[node.name] = None
    if not groups:
        return None
    ranked = sorted(groups.values(), key=lambda g: -g.size)
    total = sum({where: size for g in ranked for where, size in g.sizes.items()}.values())
    if not steps:
        return "the graph", "the graph", total, ranked
    short = f"step {steps[-1].number}"
    # a step traced again after the window keeps its number in the run: `step 152, the last of 102 traced`
    of = f" of {len(steps)}" if steps[-1].number == len(steps) else f", the last of {len(steps)} traced"
    return short, f"{short}{of} (backward at line {steps[-1].line})", total, ranked


def activation_table(trace: Trace, steps: list[Step], limit: int = 12) -> str | None:
    """One table: what autograd keeps for backward in the last training step, by module and line, largest first,
    with the ops that saved it, how many tensors and their bytes."""
    found = _saved_groups(trace, steps)
    if found is None:
        return None
    _, which, total, ranked = found
    head = (f'<TR><TD COLSPAN="4" ALIGN="LEFT"><B>{html_label_text(f"saved for backward in {which}: {bytes_text(total)}")}'
            f'</B></TD></TR>')
    columns = "".join(f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9" COLOR="#555555">{name}</FONT></TD>'
                      for name in ("module and line", "saved by", "tensors", "bytes"))
    rows = [head, f"<TR>{columns}</TR>"]
    for group in ranked[:limit]:
        where = group.module if group.line is None else f"{group.module}  line {group.line}: {group.code}"
        rows.append(
            "<TR>"
            f'<TD ALIGN="LEFT" BALIGN="LEFT">{html_label_text(shorten(where, 60))}</TD>'
            f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9">{html_label_text(shorten(", ".join(group.ops), 48))}</FONT></TD>'
            f'<TD ALIGN="RIGHT">{len(group.sizes)}</TD>'
            f'<TD ALIGN="RIGHT">{html_label_text(bytes_text(group.size))}</TD>'
            "</TR>"
        )
    if len(ranked) > limit:
        rows.append(f'<TR><TD COLSPAN="4" ALIGN="LEFT">{html_label_text(f"… {len(ranked) - limit} more places")}</TD></TR>')
    return (f'<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" COLOR="{SAVED_COLOUR}" '
            f'BGCOLOR="#fff6e5">{"".join(rows)}</TABLE>>')


def saved_by_module(trace: Trace, limit: int = 8, *, steps: list[Step]) -> list[str]:
    """What autograd holds for the last training step, grouped by module and line, largest first, as note lines:
    "conv1  line 19: 3 tensors, 4.6 KiB". Only for scripts that train a model."""
    if not any(t.parameter is not None for t in trace.tensors.values()):
        return []
    found = _saved_groups(trace, steps)
    if found is None:
        return []
    which, _, total, ranked = found
    lines = [f"saved for backward in {which}: {bytes_text(total)}"]
    for group in ranked[:limit]:
        where = f"  line {group.line}" if group.line is not None else ""
        count = len(group.sizes)
        lines.append(f"  {group.module}{where}: {count} tensor{'s' if count != 1 else ''}, {bytes_text(group.size)}")
    if len(ranked) > limit:
        lines.append(f"  \N{HORIZONTAL ELLIPSIS} {len(ranked) - limit} more places")
    return lines


def _tied_modules(trace: Trace, tids: set[str]) -> dict[str, list[str]]:
    """Parameter id -> the other modules whose ops take that very tensor as their own weight (weight tying:
    `wte.weight = lm_head.weight`): modules with no parameter of their own in the trace that use it directly."""
    owners = {t.parameter.rpartition(".")[0] for t in trace.tensors.values() if t.parameter}
    accumulate = {n.id: n.variable for n in trace.nodes.values() if n.name == "AccumulateGrad" and n.variable in tids}
    users: dict[str, dict[str, None]] = {}
    for node in trace.nodes.values():
        for nid in node.next:
            tid = accumulate.get(nid or "")
            if tid is not None and node.module is not None:
                users.setdefault(tid, {})[node.module] = None
    out: dict[str, list[str]] = {}
    for tid, modules in users.items():
        own = (trace.tensors[tid].parameter or "").rpartition(".")[0]
        if own not in modules:  # only where its own module's ops use it too: the names agree
            continue
        others = [m for m in modules if m not in owners
                  and not (m.startswith(own + ".") or own.startswith(m + "."))]
        if others:
            out[tid] = others
    return out


def _module_of(parameter: str) -> tuple[str, str]:
    module, _, leaf = parameter.rpartition(".")
    return module or "(top level)", leaf


def parameter_table(
    trace: Trace, tids: list[str], namer: Namer, findings: Sequence[Finding] = (), limit: int = 40
) -> str:
    """One row per module: its parameters, their bytes, and what wrote them (initialisation, optimizer steps)."""
    wanted = set(tids)
    writers, through = _writers(trace, wanted, findings)
    tied = _tied_modules(trace, wanted)
    modules: dict[str, list[str]] = {}
    for tid in tids:
        t = trace.tensors[tid]
        module, _ = _module_of(t.parameter or namer.tensor(tid))
        modules.setdefault(module, []).append(tid)
    total = sum(_nbytes(trace, tid) for tid in tids)
    head = (f"parameters by module: {len(tids)} in {len(modules)} module{'s' if len(modules) != 1 else ''}, "
            f"{bytes_text(total)} (no finding, alias or write of the program's own: drawn here, not one by one)")
    columns = "".join(f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9" COLOR="#555555">{name}</FONT></TD>'
                      for name in ("module", "parameters", "bytes", "written by"))
    rows = [f'<TR><TD COLSPAN="4" ALIGN="LEFT"><B>{html_label_text(head)}</B></TD></TR>', f"<TR>{columns}</TR>"]
    for module, members in list(modules.items())[:limit]:
        rows.append(_module_row(trace, module, members, namer, writers, through, tied))
    if len(modules) > limit:
        rows.append(f'<TR><TD COLSPAN="4" ALIGN="LEFT">{html_label_text(f"… {len(modules) - limit} more modules")}'
                    "</TD></TR>")
    return (f'<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3" COLOR="#6b8fb5" '
            f'BGCOLOR="#eef4fb">{"".join(rows)}</TABLE>>')


def _writers(
    trace: Trace, wanted: set[str], findings: Sequence[Finding]
) -> tuple[dict[str, dict[str, int]], dict[str, str]]:
    """Tensor -> what wrote it -> how many times; and writer -> what it did, said after its count."""
    initial = initialisation_writes(trace)
    updates, _ = updates_through_aliases(trace, findings)
    writers: dict[str, dict[str, int]] = {}  # tensor -> writer -> times
    through: dict[str, str] = {}  # writer -> what it did, said after its count
    for e in trace.events:
        if e.kind not in WRITES:
            continue
        for v in e.written():
            if v.tensor not in wanted:
                continue
            if e.seq in initial:
                key = f"initialised (line {e.location.line})" if e.location else "initialised"
            elif e.kind is EventKind.OPTIMIZER_STEP:
                key = f"{e.data.get('optimizer', 'optimizer')}.step()"
            elif e.seq in updates:
                code = statement(e.location.code) if e.location and e.location.code else str(e.op)
                key = f"line {e.location.line}: {code}" if e.location else code
                alias = trace.tensors.get(e.tensor or "")
                call = ".detach()" if alias is not None and alias.origin == "detach" else ".data"
                through[key] = (f" \N{EM DASH} bytes changed, version not (through {call})" if v.before == v.after
                                else f" (through {call})")
            else:
                key = f"line {e.location.line}: {e.op}" if e.location else str(e.op)
            times = writers.setdefault(v.tensor, {})
            times[key] = times.get(key, 0) + 1
    return writers, through


def _module_row(
    trace: Trace, module: str, members: list[str], namer: Namer, writers: dict[str, dict[str, int]],
    through: dict[str, str], tied: dict[str, list[str]],
) -> str:
    """A module's row: its parameters, their bytes, what wrote them (a writer of some of them names those)."""
    leaves = [_module_of(trace.tensors[tid].parameter or namer.tensor(tid))[1] for tid in members]
    written: dict[str, list[str]] = {}
    for tid, leaf in zip(members, leaves):
        for key, count in writers.get(tid, {}).items():
            once = count == 1 or key.startswith("initialised")  # an init call writing twice is one setup
            text = (key if once else f"{key} \N{MULTIPLICATION SIGN}{count}") + through.get(key, "")
            written.setdefault(text, []).append(leaf)
    parts = [key if len(who) == len(members) else f"{key}: {', '.join(who)}" for key, who in written.items()]
    never = [leaf for tid, leaf in zip(members, leaves) if tid not in writers]
    if never:
        parts.append(f"never written: {', '.join(never)}")
    if len(parts) > 4:
        parts[3:] = [f"\N{HORIZONTAL ELLIPSIS} {len(parts) - 3} more writers"]
    for tid, leaf in zip(members, leaves):
        if tied.get(tid):
            parts.insert(0, f"{leaf}: one tensor, one storage, also {', '.join(tied[tid])}'s (tied weight)")
    return (
        "<TR>"
        f'<TD ALIGN="LEFT">{html_label_text(shorten(module, 48))}</TD>'
        f'<TD ALIGN="LEFT"><FONT POINT-SIZE="9">{html_label_text(shorten(", ".join(leaves), 36))}</FONT></TD>'
        f'<TD ALIGN="RIGHT">{html_label_text(bytes_text(sum(_nbytes(trace, tid) for tid in members)))}</TD>'
        f'<TD ALIGN="LEFT" BALIGN="LEFT"><FONT POINT-SIZE="9">'
        f'{html_label_text(chr(10).join(shorten(part, 96) for part in parts))}</FONT></TD>'
        "</TR>"
    )


def bytes_text(n: int) -> str:
    """1,536 bytes as `1.5 KiB`: sizes a person reads at a glance."""
    if n < 1024:
        return f"{n:,} bytes"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _nbytes(trace: Trace, tid: str) -> int:
    byte_range = trace.tensors[tid].byte_range
    return byte_range[1] - byte_range[0] if byte_range else 0
