"""Graphs kept alive (`graph_kept_alive`): values stored at one line (`losses.append(loss)`, `total += loss`) that
keep the autograd graphs of many steps or loop iterations alive until the end of the run."""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Event, EventKind, NodeRecord, Trace
from .context import line_at, source_line
from .findings import Finding, FindingKind, LifetimeEvidence
from .lifetime import END, Lifetimes, freed_with_saved, program_holders, size_text
from .names import statement
from .stores import in_loop_of, storing_lines


@dataclass
class KeptAlive:
    """Graphs of many steps kept alive by values stored at one line."""

    line: int | None
    file: str | None
    holders: list[str]  # tensor ids alive at the end that hold them
    roots: list[str]  # each holder's grad_fn
    nodes: list[str]  # the nodes they keep
    steps: int  # how many steps' (or loop iterations') graphs are held
    saved_bytes: int  # bytes of saved tensors not yet freed among them
    first_seq: int  # when the first graph they keep was made (growth starts)
    store_code: str = ""
    across_backwards: bool = True  # the graphs held span backward calls (steps), else loop iterations
    untraced: int = 0  # of `steps`, the graphs of steps not traced held beside them (trace.untraced_kin)


def kept_alive(trace: Trace, life: Lifetimes) -> list[KeptAlive]:
    reached: set[str] = set()
    # (a gradient taken with create_graph=True runs through a graph without ending a step: not a backward here)
    step_backwards = [e for e in trace.events_of(EventKind.BACKWARD) if not e.data.get("create_graph")]
    for event in step_backwards:
        reached.update(event.data.get("reached_nodes", []))
    groups: dict[tuple[str | None, int | None], KeptAlive] = {}
    by_creation = _add_chains(trace, life, reached, groups)
    for (file, line, _module), members in by_creation.items():
        _add_repeated_stores(trace, life, file, line, members, reached, step_backwards, groups)
    return list(groups.values())


_Members = list[tuple[str, str, list[str]]]  # (holder tensor, its grad_fn, the nodes it holds)


def _add_chains(
    trace: Trace, life: Lifetimes, reached: set[str], groups: dict[tuple[str | None, int | None], KeptAlive]
) -> dict[tuple[str | None, int | None, str | None], _Members]:
    """Holders whose graph is an accumulation chain across steps (`total += loss`) join `groups`; the others are
    returned by the line and module that made their graph, to be judged together."""
    nodes = trace.nodes
    seen: set[str] = set()
    by_creation: dict[tuple[str | None, int | None, str | None], _Members] = {}
    for tid, root in sorted(program_holders(trace, life), key=lambda h: trace.tensors[h[0]].seq):
        held = [n for n in life.reachable(root, seen) if nodes[n].variable is None]
        # a chain matters only across backward calls or where no backward ran: skip the search otherwise
        spans = bool(held) and (
            life.episode(min(nodes[n].seq for n in held)) != life.episode(max(nodes[n].seq for n in held))
            or not reached.issuperset(held)
        )
        chain = _accumulation_chain(life, held, seen) if spans else None
        if chain is not None:
            file, line, links = chain
            episodes = {life.episode(nodes[n].seq) for n in links}
            executions = len({life.execution(nodes[n].seq) for n in links})
            if len(episodes) >= 2 or (executions >= 2 and not reached & set(links)):
                steps = len(episodes) if len(episodes) >= 2 else executions
                _add(groups, file, line, tid, root, held, steps, life)
                groups[(file, line)].across_backwards = len(episodes) >= 2
                continue
        created = nodes[root].created
        # one key per line and module: twelve layers each caching `self.attn = attn` in one forward are twelve
        # modules, not twelve steps
        key = (created.file, created.line, nodes[root].module) if created else (None, None, nodes[root].module)
        by_creation.setdefault(key, []).append((tid, root, held))
    return by_creation


def _add_repeated_stores(
    trace: Trace,
    life: Lifetimes,
    file: str | None,
    line: int | None,
    members: _Members,
    reached: set[str],
    step_backwards: list[Event],
    groups: dict[tuple[str | None, int | None], KeptAlive],
) -> None:
    """Graphs made at one line, one per step or loop iteration, and still held: a group at the line that stores them
    (`losses.append(loss)`), unless so few are held however long the loop runs."""
    nodes = trace.nodes
    # graphs of the same kind the run made in steps not traced, in the container holding these (validation traced
    # once, when a new code path re-armed the recorder, then run untraced with its losses appended to the same list)
    # (counted only in a list, dict or other container of the program's: never for a variable rebound each step)
    kin = max((trace.untraced_kin.get(tid, 0) for tid, _, _ in members), default=0)
    if kin:
        _add_with_untraced(trace, life, file, line, members, kin, groups)
        return
    members = _held_at_once(trace, members)
    if len(members) < 2:
        return  # the loop variable holding the last step's graph
    episodes = {life.episode(nodes[root].seq) for _, root, _ in members}
    # a value no backward ever ran through, stored again each iteration (validation, a skipped step)
    never_backwarded = any(root not in reached for _, root, _ in members)
    executions = len({life.execution(nodes[root].seq) for _, root, _ in members})
    # a backward in the loop that made them ran through them: the next cycle stores more after it (gradient
    # accumulation whose losses are also stored), however few cycles this run had
    roots = {root for _, root, _ in members}
    if len(episodes) < 2 and not (never_backwarded and executions >= 2) and not (
        executions >= 2 and any(
            roots.intersection(event.data.get("reached_nodes", [])) and in_loop_of(trace, file, line, event)
            for event in step_backwards
        )
    ):
        return  # kept for one later backward (losses summed before one backward)
    names = {name for tid, _, _ in members for name in trace.tensors[tid].names}
    found = storing_lines(trace, file, line, names)
    if not found and all(trace.held_at_end.get(tid) == "names" for tid, _, _ in members):
        return  # a few variables (`previous, last = last, loss`): as many however long the loop runs
    stores: list[tuple[int | None, str]] = [s for s in found if (file, s[0]) not in groups] or [(line, "")]
    steps = len(episodes) if len(episodes) >= 2 else executions
    for store_line, store_code in stores[:1]:
        for tid, root, held in members:
            _add(groups, file, store_line, tid, root, held, steps, life, store_code)
        groups[(file, store_line)].across_backwards = len(episodes) >= 2


def _held_at_once(trace: Trace, members: _Members) -> _Members:
    """The members the program can hold at the same time. Values freed in steps not traced after recording let go of
    them (trace.gone_untraced: an attribute overwritten, a variable rebound) stand for what their line keeps, one
    stretch of recording at a time: next to a value still alive they add nothing, and of two let go of at two ends
    of recording (`self.last_loss` at the window's end and at a re-armed step's end) only one was alive at once."""
    gone = trace.gone_untraced
    if not gone or not any(tid in gone for tid, _, _ in members):
        return members
    alive = [m for m in members if m[0] not in gone]
    if alive:
        return alive
    stretches: dict[int, _Members] = {}
    for member in members:
        stretches.setdefault(gone[member[0]], []).append(member)
    return max(stretches.values(), key=len)


def _add_with_untraced(
    trace: Trace,
    life: Lifetimes,
    file: str | None,
    line: int | None,
    members: _Members,
    kin: int,
    groups: dict[tuple[str | None, int | None], KeptAlive],
) -> None:
    """Values of one line stored in a container that, at the end, also held `kin` more of their kind made in steps not
    traced: a store repeated across steps, whatever the traced steps alone show."""
    names = {name for tid, _, _ in members for name in trace.tensors[tid].names}
    found = storing_lines(trace, file, line, names)
    store_line, store_code = next(((s, c) for s, c in found if (file, s) not in groups), (line, ""))
    steps = len({life.episode(trace.nodes[root].seq) for _, root, _ in members}) + kin
    for tid, root, held in members:
        _add(groups, file, store_line, tid, root, held, steps, life, store_code)
    groups[(file, store_line)].untraced = kin


def _add(
    groups: dict[tuple[str | None, int | None], KeptAlive],
    file: str | None,
    line: int | None,
    tid: str,
    root: str,
    held: list[str],
    steps: int,
    life: Lifetimes,
    code: str = "",
) -> None:
    nodes = life.trace.nodes
    group = groups.get((file, line))
    if group is None:
        group = groups[(file, line)] = KeptAlive(line, file, [], [], [], steps, 0, END, code)
    group.holders.append(tid)
    group.roots.append(root)
    group.nodes.extend(held)
    group.steps = max(group.steps, steps)
    group.saved_bytes += sum(life.saved_bytes.get(n, 0) for n in held if n not in life.freed_at)
    group.first_seq = min([group.first_seq] + [nodes[n].seq for n in held])


def _accumulation_chain(
    life: Lifetimes, held: list[str], walked: set[str]
) -> tuple[str | None, int | None, list[str]] | None:
    """Nodes made at one line outside any module, each feeding on one an earlier run of that line made:
    `total += loss`, `val_loss = val_loss + crit(out, y)`. The earlier link may be one an earlier holder's walk
    took (`walked`): a carried state's first step, held by a stored loss of that step."""
    nodes = life.trace.nodes
    by_line: dict[tuple[str, int], list[str]] = {}
    for nid in held:
        node = nodes[nid]
        if node.module is not None or node.created is None:
            continue  # loops inside a model's forward (`x = layer(x)`) are one forward pass, not many steps
        where = (node.created.file, node.created.line)
        # a link feeds on an earlier one that a backward has not freed: a chain that runs on through a freed graph
        # (a state carried without `.detach()` across backward calls) is a value built on a freed graph, and
        # backward_through_freed_graph reports it; what lies behind the freed node does not grow per step
        if any(
            nxt in walked and nodes[nxt].variable is None and _place(nodes[nxt]) == where
            and life.execution(nodes[nxt].seq) != life.execution(node.seq)
            and not freed_with_saved(life.trace, life, nxt, END)
            for nxt in node.next if nxt is not None
        ):
            by_line.setdefault(where, []).append(nid)
    if not by_line:
        return None
    (file, line), links = max(by_line.items(), key=lambda item: len(item[1]))
    # the chain's first link is the node its second link feeds on
    firsts = [nxt for nid in links for nxt in nodes[nid].next if nxt is not None and _place(nodes[nxt]) == (file, line)]
    return file, line, sorted(set(links) | set(firsts), key=lambda n: nodes[n].seq)


def _place(node: NodeRecord) -> tuple[str | None, int | None] | None:
    """The file and line that made `node`, None when unknown."""
    return (node.created.file, node.created.line) if node.created is not None else None


def _container_word(trace: Trace, group: KeptAlive) -> str:
    """`list` for `history.append(x)`, else `container`: what the storing code puts values in, as the code reads."""
    code = group.store_code or source_line(trace, group.file, group.line) or ""
    return "list" if ".append(" in code or ".extend(" in code or ".insert(" in code else "container"


def graph_kept_alive_findings(trace: Trace, life: Lifetimes, kept: list[KeptAlive]) -> list[Finding]:
    timeline = life.held_bytes()
    peak = max((size for _, size in timeline), default=0)
    untraced = bool(trace.window is not None and trace.window.untraced_steps())
    return [_kept_alive_finding(trace, group, peak, untraced) for group in kept]


def _kept_alive_finding(trace: Trace, group: KeptAlive, peak: int, untraced: bool) -> Finding:
    """The finding for one storing line: its evidence first, the message worded from the same values."""
    code = group.store_code or source_line(trace, group.file, group.line)
    names = sorted({n for tid in group.holders for n in trace.tensors[tid].names if n in code})
    traced_steps = max(group.steps - group.untraced, 1)
    per_step = group.saved_bytes // traced_steps if group.saved_bytes else 0
    evidence = LifetimeEvidence(
        holder=group.holders[0] if group.holders else None,
        holder_name=names[0] if names else None,
        node=group.roots[0] if group.roots else None,
        growth_per_step=per_step,
        steps=group.steps,
        unit="step" if group.across_backwards else "iteration",
        untraced=group.untraced,
    )
    what = f"`{evidence.holder_name}`" if evidence.holder_name else "a value"
    held = (
        f"{size_text(group.saved_bytes)} of saved tensors"
        if group.saved_bytes
        else "0 B of saved tensors (backward freed them, but the nodes and the tensors they point at remain)"
    )
    nodes_per_step = max(len(group.nodes) // traced_steps, 1)
    growth = (
        f"it grows by about {size_text(per_step)} and {nodes_per_step} nodes per {evidence.unit}"
        if per_step >= 64  # a few bytes (a scalar's saved sizes) say nothing about growth
        else f"it grows by about {nodes_per_step} autograd nodes per {evidence.unit}"
    )
    peak_text = f"; the graphs alive at the peak held {size_text(peak)}" if peak else ""
    # after the window the line runs untraced: the run may keep more graphs than were counted
    lower = " (counted in the steps traced: the run went on untraced and may keep more)" if untraced else ""
    alive = f"{len(group.nodes)} autograd nodes holding {held}"
    if group.untraced:  # counted in the container at the end; their nodes and bytes were not recorded
        lower = ""
        traced = "the one traced" if traced_steps == 1 else f"the {traced_steps} traced"
        alive = (f"{traced} {'has' if traced_steps == 1 else 'have'} {alive}, and the same {_container_word(trace, group)} holds {group.untraced} more "
                 f"of its kind from steps not traced")
    return Finding(
        FindingKind.GRAPH_KEPT_ALIVE,
        group.file,
        group.line,
        f"`{statement(code)}` at {line_at(trace, group.file, group.line)} stores {what} with its autograd history, so the graphs of "
        f"{evidence.steps} {evidence.unit}s{lower} stay alive at the end: "
        f"{alive}{peak_text}; {growth}, for as long as the "
        f"{'run' if group.across_backwards else 'loop'} goes on.",
        "Store a number for statistics (`loss.item()` or `float(loss)`), `.detach()` to keep the tensor "
        "without its graph, and evaluate under `torch.no_grad()` / `torch.inference_mode()`.",
        code=code,
        tensors=list(group.holders),
        # the holders' own nodes: the graph view draws the holders and rolls what they keep
        nodes=list(group.roots),
        # no event of its own: the timeline marks the events at its line (the in-place `+=`), one per step
        events=[],
        count=group.steps,
        evidence=[evidence],
    )
