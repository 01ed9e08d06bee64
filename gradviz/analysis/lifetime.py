"""Graph lifetime: which autograd graphs stay alive, how many bytes they hold, and backward through freed graphs."""

from __future__ import annotations

import ast
import bisect
import functools
from dataclasses import dataclass, field

from ..model import Event, EventKind, NodeRecord, Trace
from .findings import Finding, FindingKind, LifetimeEvidence
from .graphs import freed_at
from .names import statement

END = 1 << 62  # "still alive when the trace ended"
_ITEMSIZE = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16,
}  # fmt: skip
# calls that put a value into a container that outlives the loop body
_STORE_METHODS = frozenset({"append", "extend", "insert", "add", "appendleft", "put", "setdefault", "update"})
# wrapping a value in these drops its history: storing the result keeps no graph
_DROPS_HISTORY = frozenset({"item", "detach", "float", "int", "tolist", "numpy", "cpu_numpy"})


def tensor_bytes(trace: Trace, tid: str) -> int:
    record = trace.tensors[tid]
    count = 1
    for n in record.shape:
        count *= n
    return count * _ITEMSIZE.get(record.dtype.removeprefix("torch."), 4)


@dataclass
class Lifetimes:
    """When each autograd node lives and what its saved tensors cost, read off a trace in one pass."""

    trace: Trace
    backward_seqs: list[int]
    death: dict[str, int]  # node id -> seq when nothing held it any more (END: alive at the end)
    freed_at: dict[str, int]  # node id -> seq of the backward that freed its saved tensors
    saved_bytes: dict[str, int]  # node id -> bytes of the saved tensors first saved by it
    holders_at_end: list[tuple[str, str]]  # (tensor id, node id) of values alive at the end that carry a graph
    intervals: list[tuple[int, int, str]] = field(default_factory=list)  # (from, to, node): saved bytes held
    op_seqs: list[int] = field(default_factory=list)
    op_runs: list[int] = field(default_factory=list)  # per op: which run of consecutive calls at one line it is in

    def execution(self, seq: int) -> int:
        """Which execution of a source line made what appeared at `seq`: calls at one line in a row are one."""
        return self.op_runs[bisect.bisect_left(self.op_seqs, seq) - 1] if self.op_seqs and seq > self.op_seqs[0] else -1

    def episode(self, seq: int) -> int:
        """How many backward calls ran before `seq`: nodes of different episodes belong to different steps."""
        return bisect.bisect_left(self.backward_seqs, seq)

    def reachable(self, start: str, seen: set[str]) -> list[str]:
        """Nodes reachable from `start` not in `seen` (which grows): each node is walked once per caller."""
        nodes = self.trace.nodes
        out: list[str] = []
        stack = [start]
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            seen.add(nid)
            out.append(nid)
            stack.extend(n for n in nodes[nid].next if n is not None and n not in seen)
        return out

    def held_bytes(self) -> list[tuple[int, int]]:
        """(seq, bytes of saved tensors held by live graphs from then on), in program order."""
        changes: dict[int, int] = {}
        for start, stop, nid in self.intervals:
            size = self.saved_bytes.get(nid, 0)
            if size:
                changes[start] = changes.get(start, 0) + size
                if stop < END:
                    changes[stop] = changes.get(stop, 0) - size
        total, out = 0, []
        for seq in sorted(changes):
            total += changes[seq]
            out.append((seq, total))
        return out


def lifetimes(trace: Trace) -> Lifetimes:
    nodes = trace.nodes
    backwards = trace.events_of(EventKind.BACKWARD)
    freed_by_backward = freed_at(backwards)
    # what holds a node: a tensor whose grad_fn it is, from when the tensor got it until the tensor died, an in-place
    # op gave it a new grad_fn or `detach_()` took it away
    death: dict[str, int] = {}
    current: dict[str, tuple[str, int]] = {}  # tensor -> (its grad_fn now, since when)

    def release(tid: str, until: int) -> None:
        held = current.pop(tid, None)
        if held is not None and death.get(held[0], -1) < until:
            death[held[0]] = until

    for record in trace.tensors.values():
        if record.grad_fn is not None and record.origin != "saved":
            current[record.id] = (record.grad_fn, record.seq)
    for event in trace.events:
        if event.kind is EventKind.INPLACE_WRITE and event.tensor and event.data.get("grad_fn"):
            release(event.tensor, event.seq)
            current[event.tensor] = (event.data["grad_fn"], event.seq)
        elif event.kind is EventKind.DETACH_ and event.tensor and not event.data.get("error"):
            release(event.tensor, event.seq)  # `state.detach_()`: the tensor lives on, holding no graph
    # what was freed after the program ended went with its variables: alive at its end
    ended = trace.ended if trace.ended is not None else END
    holders_at_end = []
    for tid, (nid, _since) in list(current.items()):
        freed = trace.tensors[tid].freed
        if freed is not None and freed > ended:
            freed = None
        if freed is None:
            holders_at_end.append((tid, nid))
        release(tid, END if freed is None else freed)
    # a node lives as long as the latest of its holders and of the nodes pointing at it: parents first
    order = sorted(nodes.values(), key=lambda n: (-n.seq, int(n.id[1:])))
    for node in order:
        alive_until = max(death.get(node.id, node.seq), node.seq)
        death[node.id] = alive_until
        for nxt in node.next:
            if nxt is not None and death.get(nxt, -1) < alive_until:
                death[nxt] = alive_until
    saved_bytes: dict[str, int] = {}
    owner: dict[str, str] = {}
    for node in sorted(nodes.values(), key=lambda n: n.seq):
        for saved in node.saved:
            saved_id = saved.tensor
            if saved_id is None or saved_id in owner:
                continue
            record = trace.tensors[saved_id]
            if record.parameter is not None or (record.is_leaf and record.requires_grad):
                continue  # parameters live anyway: a graph holding them costs nothing extra
            owner[saved_id] = node.id
            saved_bytes[node.id] = saved_bytes.get(node.id, 0) + tensor_bytes(trace, saved_id)
    intervals = [
        (nodes[nid].seq, min(death[nid], freed_by_backward.get(nid, END)), nid)
        for nid in saved_bytes
    ]
    # executions of a line: calls in a row at one line are one, unless a call uses a parameter again the way an
    # earlier call of the run did (`outs.append(model(x))` looping on one line runs the model's layers again)
    op_seqs, op_runs, run, previous = [], [], 0, None
    tensors = trace.tensors
    used: set[tuple[str, str]] = set()
    for op in trace.ops:
        uses = [(op.name, tid) for tid in op.inputs if tensors[tid].is_leaf and tensors[tid].requires_grad]
        if (op.file, op.line) != previous or any(use in used for use in uses):
            run, previous = run + 1, (op.file, op.line)
            used = set()
        used.update(uses)
        op_seqs.append(op.seq)
        op_runs.append(run)
    # steps are told apart by the backward calls that end them; a gradient taken with create_graph=True (MAML's
    # inner step, a gradient penalty, a Hessian-vector product) is part of computing a loss, not one of them
    steps = [e.seq for e in backwards if not e.data.get("create_graph")]
    return Lifetimes(
        trace, steps, death, freed_by_backward, saved_bytes, holders_at_end, intervals, op_seqs, op_runs
    )


# ------------------------------------------------------------------------------------------ graph kept alive
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


def kept_alive(trace: Trace, life: Lifetimes) -> list[KeptAlive]:
    nodes = trace.nodes
    reached: set[str] = set()
    # (a gradient taken with create_graph=True runs through a graph without ending a step: not a backward here)
    step_backwards = [e for e in trace.events_of(EventKind.BACKWARD) if not e.data.get("create_graph")]
    for event in step_backwards:
        reached.update(event.data.get("reached_nodes", []))
    seen: set[str] = set()
    groups: dict[tuple[str | None, int | None], KeptAlive] = {}
    by_creation: dict[tuple[str | None, int | None, str | None], list[tuple[str, str, list[str]]]] = {}
    holders = _program_holders(trace, life)
    for tid, root in sorted(holders, key=lambda h: trace.tensors[h[0]].seq):
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
    for (file, line, _module), members in by_creation.items():
        if len(members) < 2:
            continue  # the loop variable holding the last step's graph
        episodes = {life.episode(nodes[root].seq) for _, root, _ in members}
        # a value no backward ever ran through, stored again each iteration (validation, a skipped step)
        never_backwarded = any(root not in reached for _, root, _ in members)
        executions = len({life.execution(nodes[root].seq) for _, root, _ in members})
        # a backward in the loop that made them ran through them: the next cycle stores more after it (gradient
        # accumulation whose losses are also stored), however few cycles this run had
        roots = {root for _, root, _ in members}
        if len(episodes) < 2 and not (never_backwarded and executions >= 2) and not (
            executions >= 2 and any(
                roots.intersection(event.data.get("reached_nodes", [])) and _in_loop_of(trace, file, line, event)
                for event in step_backwards
            )
        ):
            continue  # kept for one later backward (losses summed before one backward)
        names = {name for tid, _, _ in members for name in trace.tensors[tid].names}
        found = _storing_lines(trace, file, line, names)
        if not found and all(trace.held_at_end.get(tid) == "names" for tid, _, _ in members):
            continue  # a few variables (`previous, last = last, loss`): as many however long the loop runs
        stores: list[tuple[int | None, str]] = [s for s in found if (file, s[0]) not in groups] or [(line, "")]
        steps = len(episodes) if len(episodes) >= 2 else executions
        for store_line, store_code in stores[:1]:
            for tid, root, held in members:
                _add(groups, file, store_line, tid, root, held, steps, life, store_code)
            groups[(file, store_line)].across_backwards = len(episodes) >= 2
    return list(groups.values())


def _program_holders(trace: Trace, life: Lifetimes) -> list[tuple[str, str]]:
    """(tensor id, its grad_fn) of the values the program holds at the end.

    A tensor a graph alive at the end saved as it is (an input: `h` in `h.pow(2)`) stays alive with that graph
    whether the program holds it or not: a holder of its own only where the program's objects still held it at
    the end (`self.history.append(h)`, the tracer's held_at_end), or once backward freed what the node saved. So
    does the base of a saved view."""
    held_by_program = set(trace.held_at_end)
    tensors = trace.tensors
    saved_by_graph: set[str] = set()
    for node in trace.nodes.values():
        if life.death.get(node.id, END) < END or node.id in life.freed_at:
            continue
        for s in node.saved:
            tid = s.tensor
            if tid is None or not s.original:
                continue
            # a saved view holds its base alive (`x.flatten(1)` saved by a linear layer keeps the pooled `x`)
            while tid is not None and tid not in held_by_program and tid not in saved_by_graph:
                saved_by_graph.add(tid)
                record = tensors.get(tid)
                tid = record.source if record is not None and record.origin == "view" else None
    return [h for h in life.holders_at_end if h[0] not in saved_by_graph]


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
            and not _freed_with_saved(life.trace, life, nxt, END)
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


@functools.lru_cache(maxsize=8)
def _parse(text: str) -> ast.Module | None:
    """A source file's syntax tree (read, never changed: one parse serves every question about one file)."""
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _in_loop_of(trace: Trace, file: str | None, line: int | None, event: Event) -> bool:
    """Whether `event` happened inside the innermost loop around `line` of `file`."""
    where = event.location
    if file is None or line is None or where is None or where.file != file or file not in trace.sources:
        return False
    tree = _parse(trace.sources[file])
    if tree is None:
        return False
    loops = [
        node for node in ast.walk(tree)
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)) and node.lineno <= line <= (node.end_lineno or 0)
    ]
    if not loops:
        return False
    loop = min(loops, key=lambda n: (n.end_lineno or 0) - n.lineno)
    return loop.lineno <= where.line <= (loop.end_lineno or 0)


def _storing_lines(trace: Trace, file: str | None, line: int | None, names: set[str]) -> list[tuple[int, str]]:
    """The statement that stores a value made at `line` (named one of `names`) into a container that outlives
    the loop: `losses.append(loss)`, `history["recon"].append(recon)`, `self.cache = out`."""
    if file is None or line is None or file not in trace.sources:
        return []
    text = trace.sources[file]
    tree = _parse(text)
    if tree is None:
        return []
    made = None
    loops: list[ast.For | ast.While | ast.AsyncFor] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)) and node.lineno <= line <= (node.end_lineno or 0):
            loops.append(node)
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.lineno <= line <= (node.end_lineno or 0):
            made = node
    if made is not None:
        targets = made.targets if isinstance(made, ast.Assign) else [made.target]
        names = names | {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    scope: ast.AST = min(loops, key=lambda n: (n.end_lineno or 0) - n.lineno) if loops else tree
    lines = text.splitlines()
    found = [(number, lines[number - 1].strip() if 0 < number <= len(lines) else "")
             for number in _stores_in(tree, scope, names, made)]
    if not found and not loops:
        # made inside a function or a module's forward (`outs.append(model(x))`): the one statement in a loop
        # of this file that stores a call's result, if there is exactly one
        calls = [
            node.lineno
            for loop in ast.walk(tree)
            if isinstance(loop, (ast.For, ast.While, ast.AsyncFor))
            for node in ast.walk(loop)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STORE_METHODS
            and any(_stores_call(arg) for arg in node.args)
        ]
        if len(set(calls)) == 1:
            found.append((calls[0], lines[calls[0] - 1].strip() if 0 < calls[0] <= len(lines) else ""))
    return found


def _stores_in(
    tree: ast.AST, scope: ast.AST, names: set[str], made: ast.AST | None, *, follow: bool = True
) -> list[int]:
    """Lines in `scope` that store one of `names` with its history into something that outlives it; a call passing
    one of them to a function of this file (`rec.log(h)`) is followed once into that function's stores
    (`self.history.append(out)`)."""
    found: list[int] = []
    for node in sorted(ast.walk(scope), key=lambda n: getattr(n, "lineno", 0)):
        stored = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STORE_METHODS:
            stored = list(node.args) + [k.value for k in node.keywords]
        elif isinstance(node, ast.Assign) and any(isinstance(t, (ast.Subscript, ast.Attribute)) for t in node.targets):
            stored = [node.value]
        elif isinstance(node, ast.AugAssign) and node is not made:
            stored = [node.value]
        elif isinstance(node, ast.Call) and follow:
            found += _stores_through_call(tree, node, names)
        if stored and any(_carries(value, names) for value in stored):
            found.append(getattr(node, "lineno", 0))  # (a call or an assignment: both have one)
    return found


def _stores_through_call(tree: ast.AST, call: ast.Call, names: set[str]) -> list[int]:
    """The stores inside a function of this file that `call` passes one of `names` to, by position or keyword."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if not called or called in _DROPS_HISTORY:
        return []
    passed = [i for i, arg in enumerate(call.args) if _carries(arg, names)]
    keywords = {k.arg for k in call.keywords if k.arg and _carries(k.value, names)}
    if not passed and not keywords:
        return []
    methods = {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body}
    found = []
    for define in ast.walk(tree):
        if not isinstance(define, (ast.FunctionDef, ast.AsyncFunctionDef)) or define.name != called:
            continue
        params = [a.arg for a in define.args.posonlyargs + define.args.args]
        if id(define) in methods and isinstance(func, ast.Attribute) and params:
            params = params[1:]  # `obj.log(h)`: `self` is bound
        named = {a.arg for a in define.args.args + define.args.kwonlyargs}
        inner = {params[i] for i in passed if i < len(params)} | (keywords & named)
        if inner:
            found += _stores_in(tree, define, inner, None, follow=False)
    return found


def _stores_call(value: ast.AST) -> bool:
    """A call's result kept as it is (not through `.item()`, `.detach()`, `float()`...)."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return called not in _DROPS_HISTORY


def _carries(value: ast.AST, names: set[str]) -> bool:
    """Whether `value` passes one of `names` on with its history (not through `.item()`, `.detach()`, `float()`)."""
    if isinstance(value, ast.Name):
        return value.id in names
    if isinstance(value, ast.Call):
        func = value.func
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if called in _DROPS_HISTORY:
            return False
        parts = list(value.args) + ([func.value] if isinstance(func, ast.Attribute) else [])
        return any(_carries(p, names) for p in parts)
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        return any(_carries(v, names) for v in value.elts)
    if isinstance(value, ast.Dict):
        return any(_carries(v, names) for v in value.values if v is not None)
    if isinstance(value, ast.BinOp):
        return _carries(value.left, names) or _carries(value.right, names)
    if isinstance(value, ast.Attribute):
        return value.attr not in ("data", "shape", "dtype", "device") and _carries(value.value, names)
    if isinstance(value, ast.Subscript):
        return _carries(value.value, names)
    return False


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(size) < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"


def graph_kept_alive_findings(trace: Trace, life: Lifetimes, kept: list[KeptAlive]) -> list[Finding]:
    findings = []
    timeline = life.held_bytes()
    peak = max((size for _, size in timeline), default=0)
    for group in kept:
        code = group.store_code or _code(trace, group.file, group.line)
        names = sorted({n for tid in group.holders for n in trace.tensors[tid].names if n in code})
        what = f"`{names[0]}`" if names else "a value"
        held = (
            f"{_size(group.saved_bytes)} of saved tensors"
            if group.saved_bytes
            else "0 B of saved tensors (backward freed them, but the nodes and the tensors they point at remain)"
        )
        unit = "step" if group.across_backwards else "iteration"
        per_step = group.saved_bytes // group.steps if group.saved_bytes else 0
        nodes_per_step = max(len(group.nodes) // group.steps, 1)
        growth = (
            f"it grows by about {_size(per_step)} and {nodes_per_step} nodes per {unit}"
            if per_step >= 64  # a few bytes (a scalar's saved sizes) say nothing about growth
            else f"it grows by about {nodes_per_step} autograd nodes per {unit}"
        )
        peak_text = f"; the graphs alive at the peak held {_size(peak)}" if peak else ""
        findings.append(
            Finding(
                FindingKind.GRAPH_KEPT_ALIVE,
                group.file,
                group.line,
                f"`{statement(code)}` at line {group.line} stores {what} with its autograd history, so the graphs of "
                f"{group.steps} {unit}s stay alive at the end: "
                f"{len(group.nodes)} autograd nodes holding {held}{peak_text}; {growth} until the run runs out "
                "of memory.",
                "Store a number for statistics (`loss.item()` or `float(loss)`), `.detach()` to keep the tensor "
                "without its graph, and evaluate under `torch.no_grad()` / `torch.inference_mode()`.",
                code=code,
                tensors=list(group.holders),
                # the holders' own nodes: the graph view draws the holders and rolls what they keep
                nodes=list(group.roots),
                # no event of its own: the timeline marks the events at its line (the in-place `+=`), one per step
                events=[],
                count=group.steps,
                evidence=[
                    LifetimeEvidence(
                        holder=group.holders[0] if group.holders else None,
                        holder_name=names[0] if names else None,
                        node=group.roots[0] if group.roots else None,
                        growth_per_step=per_step,
                        steps=group.steps,
                        unit=unit,
                    )
                ],
            )
        )
    return findings


def _code(trace: Trace, file: str | None, line: int | None) -> str:
    if file is None or line is None or file not in trace.sources:
        return ""
    lines = trace.sources[file].splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


# ------------------------------------------------------------------------------------------ freed graphs
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


def _freed_with_saved(trace: Trace, life: Lifetimes, nid: str, at: int) -> bool:
    freed = life.freed_at.get(nid)
    return freed is not None and freed < at and any(s.tensor is not None for s in trace.nodes[nid].saved)


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
        best = life.freed_at[nid] if _freed_with_saved(trace, life, nid, at) else END
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
    findings = []
    by_seq = {e.seq: e for e in trace.events}
    carriers: dict[str, str] = {}  # node id -> the first tensor whose grad_fn it is
    for record in trace.tensors.values():
        if record.grad_fn is not None and record.origin != "saved":
            carriers.setdefault(record.grad_fn, record.id)
    checked: set[str] = set()
    for event in trace.events_of(EventKind.BACKWARD):
        reached = event.data.get("reached_nodes", [])
        freed = [n for n in reached if _freed_with_saved(trace, life, n, event.seq)]
        if not freed:
            continue
        checked.update(reached)
        bridges = _bridges(trace, life, reached, event.seq)
        bridge = bridges[0] if bridges else None
        findings.append(_freed_finding(trace, life, bridge, freed[0], event, by_seq, carriers, predicted=False))
    # values alive at the end built on a freed graph: the next backward through them will raise
    reported: set[tuple[object, object]] = set()
    for bridge in _bridges_at_end(trace, life, checked):
        created = trace.nodes[bridge[0]].created
        where = (created.file, created.line) if created else (None, None)
        if where not in reported:
            reported.add(where)
            findings.append(_freed_finding(trace, life, bridge, bridge[1], None, by_seq, carriers, predicted=True))
    return findings


def _bridges_at_end(trace: Trace, life: Lifetimes, checked: set[str]) -> list[tuple[str, str]]:
    """(node, freed node it feeds on) for the values the program holds at the end whose backward would run into
    saved tensors a backward freed, though their own graph is not spent.

    A value's own graph is the nodes that save tensors nearest to its grad_fn (through nodes that save nothing, an
    `add`, a `mean`): when a backward freed any of them, the value is spent (the last step's `loss`, a running sum
    of backwarded losses) and nobody backwards it again. Otherwise, reaching freed saved tensors, it is built on a
    freed graph: a state carried across backward calls without `.detach()`, or a value an earlier step made on a
    graph a later backward freed (a stored loss whose hidden state the next step's backward ran through). The
    bridge is where its graph enters the freed part: a node the freeing backward did not run through, feeding on
    one it did. Nodes in `checked` (a backward through them already raised) are reported with that backward."""
    nodes = trace.nodes
    if not life.freed_at:
        return []
    spent: dict[str, bool] = {}  # a backward freed the saved tensors nearest to the node
    reaches: dict[str, bool] = {}  # a backward through the node would run into freed saved tensors
    for node in sorted(nodes.values(), key=lambda n: (n.seq, -int(n.id[1:]))):  # what a node feeds on first
        below = [n for n in node.next if n is not None]
        freed = _freed_with_saved(trace, life, node.id, END)
        spent[node.id] = freed if node.saved else any(spent.get(n, False) for n in below)
        reaches[node.id] = freed or any(reaches.get(n, False) for n in below)
    # values the program itself can reach for: bound to one of its variables (now or when it was made) or held by
    # its objects at the end; a library's own cache (a Distribution's lazily computed `probs`) is nobody's to
    # backward through
    roots = [
        root for tid, root in _program_holders(trace, life)
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
        if _freed_with_saved(trace, life, nid, END):
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
) -> Finding:
    nodes = trace.nodes
    old = bridge[1] if bridge else freed_node
    freeing = by_seq.get(life.freed_at.get(old, -1)) or _freeing_below(trace, life, old, by_seq)
    freeing_line = freeing.location.line if freeing and freeing.location else None
    carrier = trace.tensors[carriers[old]] if old in carriers else None
    held_as = _held_as(trace, carrier.id) if carrier is not None else None
    value = f"`{held_as}`" if held_as else "a value"
    # built before the freeing, on a branch that backward passed by: the program reaches for it only by a backward
    # of its own (a state carried into a new graph after the freeing is what its next step backpropagates)
    side_branch = False
    file: str | None
    line: int | None
    where = nodes[bridge[0]].created if bridge is not None else None
    if bridge is not None and where is not None:
        file, line, code = where.file, where.line, where.code.strip()
        if freeing is not None and nodes[bridge[0]].seq < freeing.seq:
            side_branch = True
            # built before the freeing, on a branch that backward did not run through (a stored loss whose hidden
            # state the next step's backward freed)
            how = (
                f"`{statement(code)}` at line {line} built a graph on {value} (output of {nodes[old].name}), and the backward "
                f"at line {freeing_line} later freed {value}'s graph without running through that branch"
            )
        else:
            how = (
                f"{value} (output of {nodes[old].name}) still carries the graph that the backward at line "
                f"{freeing_line} freed, and `{statement(code)}` at line {line} builds the new graph on it"
            )
    else:
        loc = backward.location if backward else None
        file, line, code = (loc.file, loc.line, loc.code.strip()) if loc else (None, None, "")
        how = f"it runs again through the graph that the backward at line {freeing_line} already freed"
    if predicted and side_branch:
        then = (
            "Note: the program does not backpropagate it, and need not; a backward of it would raise \"Trying to "
            "backward through the graph a second time\"."
        )
    elif predicted:
        then = "No backward has run through it yet: calling backward will raise \"Trying to backward through the graph a second time\"."
    elif backward is not None and backward.data.get("outcome") == "error":
        then = f"The backward at line {backward.location.line if backward.location else '?'} raised \"Trying to backward through the graph a second time\"."
    else:
        then = f"The backward at line {backward.location.line if backward and backward.location else '?'} runs through freed buffers."
    fix = (
        "Nothing to do unless you mean to backpropagate it: then call that backward before the other one frees the "
        "shared part, or pass `retain_graph=True` to the first."
        if predicted and side_branch
        else f"Detach the carried state where each chunk starts (`{held_as or 'hidden'} = "
        f"{held_as or 'hidden'}.detach()`, truncated backpropagation through time). "
        "`retain_graph=True` is almost never the fix: it keeps every earlier chunk's graph alive, backpropagates into "
        "all of them, and after `optimizer.step()` raises the in-place error instead."
    )
    return Finding(
        FindingKind.BACKWARD_THROUGH_FREED_GRAPH,
        file,
        line,
        f"{how}. {then}",
        fix,
        code=code,
        tensors=[carrier.id] if carrier else [],
        nodes=[n for n in (bridge or (old,))],
        events=[e for e in (freeing.seq if freeing else None, backward.seq if backward else None) if e is not None],
        affected_backward=backward.seq if backward else None,
        predicted=predicted,
        note=predicted and side_branch,
        evidence=[
            LifetimeEvidence(
                holder=carrier.id if carrier else None,
                holder_name=carrier.label if carrier and (carrier.names or carrier.parameter) else None,
                node=old,
            )
        ],
    )


# ------------------------------------------------------------------------------------------ memory profile
@dataclass
class MemoryProfile:
    """Bytes of saved tensors held by live autograd graphs over the run, for the graph-memory view."""

    points: list[tuple[int, int]]  # (seq, bytes held from then on)
    backwards: list[tuple[int, int | None]]  # (seq, line) of each backward
    peak: tuple[int, int] | None  # (seq, bytes)
    top_holders: list[tuple[str, int]]  # ("Linear at train.py:12", bytes) at the peak, largest first
    kept: list[tuple[int, int | None, int, int]]  # (seq growth starts, line, bytes per step, nodes per step)
    end: int  # the last seq of the run
    live_nodes: list[tuple[int, int]] = field(default_factory=list)  # (seq, autograd nodes alive from then on)


def memory_profile(trace: Trace, *, top: int = 5, life: Lifetimes | None = None) -> MemoryProfile:
    """`life`: the trace's lifetimes when the caller has them already (the picture model)."""
    life = lifetimes(trace) if life is None else life
    points = life.held_bytes()
    peak = max(points, key=lambda p: p[1]) if points and max(p[1] for p in points) > 0 else None
    holders: dict[str, int] = {}
    if peak is not None:
        for start, stop, nid in life.intervals:
            if start <= peak[0] < stop:
                node = trace.nodes[nid]
                where = trace.where(node.created.file, node.created.line) if node.created else "?"
                key = f"module {node.module} at {where}" if node.module else f"{node.name} at {where}"
                holders[key] = holders.get(key, 0) + life.saved_bytes[nid]
    kept = [
        (g.first_seq, g.line, g.saved_bytes // max(g.steps, 1), len(g.nodes) // max(g.steps, 1))
        for g in kept_alive(trace, life)
    ]
    seqs = [e.seq for e in trace.events] + [op.seq for op in trace.ops[-1:]] + [p[0] for p in points[-1:]]
    backwards = [(e.seq, e.location.line if e.location else None) for e in trace.events_of(EventKind.BACKWARD)]
    changes: dict[int, int] = {}  # a node lives from its creation until nothing holds it (death)
    for nid, node in trace.nodes.items():
        changes[node.seq] = changes.get(node.seq, 0) + 1
        death = life.death.get(nid, END)
        if death != END:
            changes[death] = changes.get(death, 0) - 1
    live, alive = [], 0
    for seq in sorted(changes):
        alive += changes[seq]
        live.append((seq, alive))
    return MemoryProfile(
        points, backwards, peak, sorted(holders.items(), key=lambda kv: -kv[1])[:top], kept, max(seqs, default=0),
        live,
    )


def size_text(n: int) -> str:
    """`1.5 MB`: bytes for people."""
    return _size(n)
