"""Backward through a freed graph (`backward_through_freed_graph`): a backward that runs again through saved tensors an
earlier backward freed, or a value alive at the end built on such a graph (a carried state without `.detach()`).

A value built on a loss the program already differentiated (`total_loss = total_loss + loss * n`, `losses.append(loss
/ k)`), or itself differentiated (MAML's inner loss, taken by `autograd.grad(create_graph=True)`), is bookkeeping:
its backward would reach the freed graph only by backpropagating that loss a second time, which a training loop never
means to do (graph_kept_alive reports what such values cost). Only a value that reaches a freed graph some other way
(a state carried into the next step) is predicted."""

from __future__ import annotations

import ast

from ..model import Event, EventKind, NodeRecord, Trace
from .context import line_at
from .findings import Finding, FindingKind, LifetimeEvidence
from .lifetime import END, Lifetimes, freed_with_saved, program_holders
from .names import statement


def _held_as(trace: Trace, tid: str) -> str | None:
    """How the program's code names a tensor: its variable or parameter, else the one target of the assignment whose
    value it is (`self.mem` in `self.mem = torch.tanh(self.fc(x) + self.mem)`: state kept in an attribute, which the
    tracer does not see as a variable); None when the code gives it no name."""
    record = trace.tensors[tid]
    if record.names or record.parameter:
        return record.label
    where = record.created
    if where is None or not where.code:
        return None
    try:
        body = ast.parse(statement(where.code)).body
    except SyntaxError:
        return None
    stmt = body[0] if len(body) == 1 else None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target: ast.expr = stmt.targets[0]
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target = stmt.target
    else:
        return None
    if not isinstance(target, (ast.Name, ast.Attribute, ast.Subscript)):
        return None  # `h, c = lstm(x)`: which one is this?
    # the statement's value: made by the last call of the statement (`tanh` after `fc` and `+`)
    ops = trace.ops
    made = next((i for i, op in enumerate(ops) if tid in op.outputs and tid not in op.inputs), None)
    if made is None or (made + 1 < len(ops) and (ops[made + 1].file, ops[made + 1].line) == (where.file, where.line)):
        return None
    return ast.unparse(target)


def _bridges(trace: Trace, life: Lifetimes, reached: list[str], at: int) -> list[tuple[str, str]]:
    """(new node, old node it feeds on): where a graph built after a backward reuses a graph that backward freed.

    `old` was made before the freeing and leads to saved tensors freed then (it may be a node the backward did not
    pass itself: the hidden-state output of an RNN call whose other output was the loss); `new` was made after.
    AccumulateGrad nodes (a parameter's) outlive every backward: feeding on them is no reuse."""
    nodes = trace.nodes
    if not life.freed_at:
        return []
    first_freeing = min(life.freed_at.values())
    if not any(nodes[n].seq > first_freeing for n in reached):
        return []  # every node was made before any backward freed anything: nothing built on a freed graph
    members = set(reached)
    # the earliest freeing, before `at`, of saved tensors each node leads to: children first
    freed_before: dict[str, int] = {}
    for nid in sorted(members, key=lambda n: (nodes[n].seq, -int(n[1:]))):
        node = nodes[nid]
        best = life.freed_at[nid] if freed_with_saved(trace, life, nid, at) else END
        for nxt in node.next:
            if nxt is not None and nxt in freed_before and freed_before[nxt] < best:
                best = freed_before[nxt]
        freed_before[nid] = best
    found = []
    for nid in sorted(members, key=lambda n: (nodes[n].seq, int(n[1:]))):
        node = nodes[nid]
        for nxt in node.next:
            if nxt is None or nxt not in freed_before or nodes[nxt].variable is not None:
                continue
            freed = freed_before[nxt]
            if freed < END and nodes[nxt].seq < freed < node.seq:
                found.append((nid, nxt))
                break
    return found


def backward_through_freed_graph_findings(trace: Trace, life: Lifetimes) -> list[Finding]:
    findings: list[Finding] = []
    by_seq = {e.seq: e for e in trace.events}
    carriers: dict[str, str] = {}  # node id -> the first tensor whose grad_fn it is
    for record in trace.tensors.values():
        if record.grad_fn is not None and record.origin != "saved":
            carriers.setdefault(record.grad_fn, record.id)
    checked: set[str] = set()
    for event in trace.events_of(EventKind.BACKWARD):
        reached = event.data.get("reached_nodes", [])
        freed = [n for n in reached if freed_with_saved(trace, life, n, event.seq)]
        if not freed:
            continue
        checked.update(reached)
        bridges = _bridges(trace, life, reached, event.seq)
        bridge = bridges[0] if bridges else None
        found = _freed_finding(trace, life, bridge, freed[0], event, by_seq, carriers, predicted=False)
        if found is not None:  # (always: only a predicted finding can be left out)
            findings.append(found)
    # values alive at the end built on a freed graph: the next backward through them will raise
    reported: set[tuple[object, object]] = set()
    for bridge in _bridges_at_end(trace, life, checked):
        created = trace.nodes[bridge[0]].created
        where = (created.file, created.line) if created else (None, None)
        if where not in reported:
            reported.add(where)
            finding = _freed_finding(trace, life, bridge, bridge[1], None, by_seq, carriers, predicted=True)
            if finding is not None:
                findings.append(finding)
    return findings


def differentiated(trace: Trace) -> set[str]:
    """The nodes a backward or gradient call started from (the grad_fn of each of its roots: a loss), whatever its
    outcome: the nodes it reached that no other node it reached points at."""
    nodes = trace.nodes
    found: set[str] = set()
    for event in trace.events_of(EventKind.BACKWARD):
        reached = [n for n in event.data.get("reached_nodes", []) if n in nodes]
        below = {nxt for n in reached for nxt in nodes[n].next if nxt is not None}
        found.update(n for n in reached if n not in below)
    return found


def _bridges_at_end(trace: Trace, life: Lifetimes, checked: set[str]) -> list[tuple[str, str]]:
    """(node, freed node it feeds on) for the values the program holds at the end whose backward would run into
    saved tensors a backward freed, though their own graph is not spent.

    A value's own graph is the nodes that save tensors nearest to its grad_fn (through nodes that save nothing, an
    `add`, a `mean`): when a backward freed any of them, the value is spent (the last step's `loss`, a running sum
    of backwarded losses) and nobody backwards it again. Otherwise, reaching freed saved tensors, it is built on a
    freed graph: a state carried across backward calls without `.detach()`, or a value an earlier step made on a
    graph a later backward freed (a stored loss whose hidden state the next step's backward ran through). The
    bridge is where its graph enters the freed part: a node the freeing backward did not run through, feeding on
    one it did. Nodes in `checked` (a backward through them already raised) are reported with that backward. A
    loss already differentiated (`differentiated`) ends the search: what lies behind it is reached only by
    backpropagating it again."""
    nodes = trace.nodes
    if not life.freed_at:
        return []
    losses = differentiated(trace)
    spent: dict[str, bool] = {}  # a backward freed the saved tensors nearest to the node
    reaches: dict[str, bool] = {}  # a backward through the node would run into freed saved tensors
    for node in sorted(nodes.values(), key=lambda n: (n.seq, -int(n.id[1:]))):  # what a node feeds on first
        below = [n for n in node.next if n is not None]
        freed = freed_with_saved(trace, life, node.id, END)
        spent[node.id] = freed if node.saved else any(spent.get(n, False) for n in below)
        reaches[node.id] = node.id not in losses and (freed or any(reaches.get(n, False) for n in below))
    # values the program itself can reach for: bound to one of its variables (now or when it was made) or held by
    # its objects at the end; a library's own cache (a Distribution's lazily computed `probs`) is nobody's to
    # backward through
    roots = [
        root for tid, root in program_holders(trace, life)
        if reaches[root] and not spent[root] and (trace.tensors[tid].names or tid in trace.held_at_end)
    ]
    found = []
    seen = set(checked)
    for root in roots:
        for nid in life.reachable(root, seen):
            for nxt in nodes[nid].next:
                if (
                    nxt is not None and reaches[nxt] and nxt in life.freed_at
                    and life.freed_at.get(nid, END) > life.freed_at[nxt]
                ):
                    found.append((nid, nxt))
                    break
    return sorted(found, key=lambda b: nodes[b[0]].seq)


def _freeing_below(trace: Trace, life: Lifetimes, start: str, by_seq: dict[int, Event]) -> Event | None:
    """The backward that freed the saved tensors `start` leads to (it may not have passed `start` itself)."""
    seen: set[str] = set()
    for nid in life.reachable(start, seen):
        if freed_with_saved(trace, life, nid, END):
            return by_seq.get(life.freed_at[nid])
    return None


def _freed_finding(
    trace: Trace,
    life: Lifetimes,
    bridge: tuple[str, str] | None,
    freed_node: str,
    backward: Event | None,
    by_seq: dict[int, Event],
    carriers: dict[str, str],
    *,
    predicted: bool,
) -> Finding | None:
    """The finding for a backward that ran into a freed graph, or (`predicted`) for a value the program holds whose
    next backward would; None for a value built before the freeing on a branch that backward passed by (`probs =
    logits.softmax(-1)` beside the loss, a stored loss whose hidden state the next step ran through): nothing the
    program runs backpropagates it, and a warning, or a note, about a backward nobody calls is noise (issue 36)."""
    old = bridge[1] if bridge else freed_node
    freeing = by_seq.get(life.freed_at.get(old, -1)) or _freeing_below(trace, life, old, by_seq)
    freeing_at = line_at(trace, freeing.location.file, freeing.location.line) if freeing and freeing.location else "an unknown line"
    carrier = trace.tensors[carriers[old]] if old in carriers else None
    held_as = _held_as(trace, carrier.id) if carrier is not None else None
    value = f"`{held_as}`" if held_as else "a value"
    file, line, code, how, side_branch = _how(trace, old, bridge, backward, freeing, freeing_at, value)
    if predicted and side_branch:
        return None
    beside = not predicted and bridge is not None and _made_beside(trace, bridge, freeing)
    return Finding(
        FindingKind.BACKWARD_THROUGH_FREED_GRAPH,
        file,
        line,
        f"{how}. {_then(trace, backward, predicted=predicted)}",
        _fix_beside(value, freeing_at) if beside else _fix(held_as),
        code=code,
        tensors=[carrier.id] if carrier else [],
        nodes=[n for n in (bridge or (old,))],
        events=[e for e in (freeing.seq if freeing else None, backward.seq if backward else None) if e is not None],
        affected_backward=backward.seq if backward else None,
        predicted=predicted,
        evidence=[
            LifetimeEvidence(
                holder=carrier.id if carrier else None,
                holder_name=carrier.label if carrier and (carrier.names or carrier.parameter) else None,
                node=old,
            )
        ],
    )


def _how(
    trace: Trace,
    old: str,
    bridge: tuple[str, str] | None,
    backward: Event | None,
    freeing: Event | None,
    freeing_at: str,
    value: str,
) -> tuple[str | None, int | None, str, str, bool]:
    """Where the finding points (file, line, code), how the freed graph is reached, and whether the value was built
    before the freeing on a branch that backward passed by (the program reaches for it only by a backward of its own:
    a state carried into a new graph after the freeing is what its next step backpropagates)."""
    nodes = trace.nodes
    file: str | None
    line: int | None
    where = nodes[bridge[0]].created if bridge is not None else None
    if bridge is not None and where is not None:
        file, line, code = where.file, where.line, where.code.strip()
        if freeing is not None and nodes[bridge[0]].seq < freeing.seq:
            # built before the freeing, on a branch that backward did not run through (a stored loss whose hidden
            # state the next step's backward freed)
            how = (
                f"`{statement(code)}` at {line_at(trace, file, line)} built a graph on {value} (output of {nodes[old].name}), and the backward "
                f"at {freeing_at} later freed {value}'s graph without running through that branch"
            )
            return file, line, code, how, True
        how = (
            f"{value} (output of {nodes[old].name}) still carries the graph that the backward at "
            f"{freeing_at} freed, and `{statement(code)}` at {line_at(trace, file, line)} builds the new graph on it"
        )
        return file, line, code, how, False
    loc = backward.location if backward else None
    file, line, code = (loc.file, loc.line, loc.code.strip()) if loc else (None, None, "")
    return file, line, code, f"it runs again through the graph that the backward at {freeing_at} already freed", False


def _then(trace: Trace, backward: Event | None, *, predicted: bool) -> str:
    """What happens (or would) when the freed graph is backpropagated."""
    if predicted:
        return "No backward has run through it yet: calling backward will raise \"Trying to backward through the graph a second time\"."
    at = line_at(trace, backward.location.file, backward.location.line) if backward and backward.location else "an unknown line"
    if backward is not None and backward.data.get("outcome") == "error":
        return f"The backward at {at} raised \"Trying to backward through the graph a second time\"."
    return f"The backward at {at} runs through freed buffers."


def _made_beside(trace: Trace, bridge: tuple[str, str], freeing: Event | None) -> bool:
    """Whether the value the graph was rebuilt on was made beside the freeing backward's loss, in the same forward,
    on a branch that backward passed by (`probs = logits.softmax(-1)` next to `loss = F.cross_entropy(logits, y)`):
    no backward ran between its making and the freeing, the freeing did not run through it, and the new graph is
    built on it at another line. A recurrent state is made and used again at one line (`out, hidden = rnn(x,
    hidden)`, `h = cell(x, h)`: its `hidden` may come from a node the loss's backward does not pass, nn.RNN's
    stack of layer states): that is a state carried into the next chunk, whose fix is `.detach()`."""
    new, old = bridge
    if freeing is None or old in freeing.data.get("reached_nodes", []):
        return False
    nodes = trace.nodes
    if _place(nodes[new]) == _place(nodes[old]):
        return False
    made = nodes[old].seq
    return not any(made < e.seq < freeing.seq for e in trace.events_of(EventKind.BACKWARD))


def _place(node: NodeRecord) -> tuple[str | None, int | None] | None:
    return (node.created.file, node.created.line) if node.created is not None else None


def _fix_beside(value: str, freeing_at: str) -> str:
    return (
        f"{value[0].upper()}{value[1:]} was made beside the loss whose backward at {freeing_at} freed the graph they "
        "share. To train through both, backpropagate them in one call (`torch.autograd.backward([loss, other])`, or "
        "their sum) or pass `retain_graph=True` to the first backward; if it is only read (logging, metrics), "
        "`.detach()` it where it is made."
    )


def _fix(held_as: str | None) -> str:
    return (
        f"Detach the carried state where each chunk starts (`{held_as or 'hidden'} = "
        f"{held_as or 'hidden'}.detach()`, truncated backpropagation through time). "
        "`retain_graph=True` is almost never the fix: it keeps every earlier chunk's graph alive, backpropagates into "
        "all of them, and after `optimizer.step()` raises the in-place error instead."
    )
