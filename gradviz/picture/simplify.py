"""Make big autograd graphs drawable: roll repeated loop bodies, split shared parameters, collapse modules, cut to a budget.

Everything here works on a small graph of "core" nodes (one per autograd node) with plain string ids, uses
iterative walks only (graphs with 20,000+ nodes are normal) and is deterministic: ties are broken by node order.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Mapping, Sequence

__all__ = ["Core", "CoreNode", "Group", "Roll", "find_repeats"]

MIN_REPEATS = 4  # a loop body must repeat at least this often to be rolled into one copy
PERIOD_CANDIDATES = 8  # how many candidate periods (most common gaps between equal tokens) to try


@dataclass
class CoreNode:
    """One drawn unit before styling: an autograd node, a per-use copy, a module group or a summary."""

    id: str
    name: str
    kind: str = "node"  # "node" (autograd node), "group" (collapsed module call), "summary" (hidden nodes)
    origin: str | None = None  # the autograd node id this one stands for (copies and representatives)
    module: str | None = None
    members: list[str] = field(default_factory=list)  # autograd node ids a group or summary stands for
    roll: str | None = None  # id of the rolled loop this node represents


@dataclass
class Roll:
    """A loop body drawn once for `count` iterations."""

    id: str
    count: int
    nodes: list[str]  # core ids of the representative body


@dataclass
class Group:
    """A collapsed module call."""

    id: str
    module: str
    members: list[str]


class Core:
    """A directed graph of core nodes in drawing order; edges point from an input (next function) to its user."""

    def __init__(self) -> None:
        self.nodes: dict[str, CoreNode] = {}
        self.edges: dict[tuple[str, str], str] = {}  # (src, dst) -> kind: "flow" or "carried"
        self.rolls: list[Roll] = []
        self.notes: list[str] = []  # lines for the legend
        self.messages: list[str] = []  # lines for the person who asked for the picture (the CLI prints them)
        self.hidden = 0
        self.big = False  # compact drawing: set by the caller for large graphs
        self.steps: list[Any] = []  # StepRoll (steps.py imports this module: no import back): training steps drawn once for all steps of the same shape
        self.step_home: dict[str, str] = {}  # autograd node of a repeated step -> its representative's node
        self.step_marks: dict[str, list[int]] = {}  # representative node -> the steps whose finding it carries

    # ------------------------------------------------------------------ building
    def add_node(self, node: CoreNode) -> None:
        self.nodes[node.id] = node

    def add_edge(self, src: str, dst: str, kind: str = "flow") -> None:
        if (src, dst) not in self.edges or kind == "flow":
            self.edges[(src, dst)] = kind

    def parents(self) -> dict[str, list[str]]:
        """For each node, the nodes that use it (edge destinations), in edge order."""
        out: dict[str, list[str]] = defaultdict(list)
        for src, dst in self.edges:
            out[src].append(dst)
        return out

    def ranks(self) -> int:
        """Nodes on the longest path (loop-carried edges left out, as the layout leaves them): how tall the drawing is."""
        return max(self.levels().values(), default=0)

    def widest(self, weight: Callable[[str], int]) -> int:
        """The most drawn boxes on one level (nodes at the same distance from the leaves, `weight` boxes each): about
        how wide the drawing is."""
        per_level: Counter[int] = Counter()
        for nid, level in self.levels().items():
            per_level[level] += weight(nid)
        return max(per_level.values(), default=0)

    def levels(self) -> dict[str, int]:
        """Each node's level: 1 + the most nodes on a path from a leaf to it (loop-carried edges left out)."""
        indegree: dict[str, int] = dict.fromkeys(self.nodes, 0)
        out: dict[str, list[str]] = defaultdict(list)
        for (src, dst), kind in self.edges.items():
            if kind != "carried" and src in indegree and dst in indegree and src != dst:
                out[src].append(dst)
                indegree[dst] += 1
        length = dict.fromkeys(self.nodes, 1)
        ready = [n for n, d in indegree.items() if d == 0]
        sources = list(ready)
        while ready:
            nid = ready.pop()
            for dst in out.get(nid, ()):
                length[dst] = max(length[dst], length[nid] + 1)
                indegree[dst] -= 1
                if indegree[dst] == 0:
                    ready.append(dst)
        for nid in sources:  # a leaf (a parameter) is drawn just above its first user, as the layout puts it
            users = [length[dst] for dst in out.get(nid, ())]
            if users:
                length[nid] = max(min(users) - 1, 1)
        return length

    def remap(self, mapping: dict[str, str], *, carried: Iterable[tuple[str, str]] = ()) -> None:
        """Replace node ids by `mapping` (missing ids stay), merging edges; `carried` edges become loop-carried."""
        carried_set = set(carried)
        edges: dict[tuple[str, str], str] = {}
        for (src, dst), kind in self.edges.items():
            key = (mapping.get(src, src), mapping.get(dst, dst))
            if (src, dst) in carried_set:
                kind = "carried"
            if key[0] == key[1] and kind != "carried":
                continue
            if key not in edges or kind == "flow":
                edges[key] = kind
        self.edges = edges
        gone = {old for old, new in mapping.items() if old != new}
        self.nodes = {nid: n for nid, n in self.nodes.items() if nid not in gone}

    # ------------------------------------------------------------------ loop rolling
    def roll_loops(self, order: list[str], token: Mapping[str, Hashable], protected: set[str]) -> None:
        """Draw each body of a loop repeated >= MIN_REPEATS times once, marked with its count.

        `order` lists the rollable node ids in program order; `token[id]` says which nodes count as "the same op".
        Bodies holding a protected node (a finding) stay expanded.
        """
        tokens = [token[nid] for nid in order]
        mapping: dict[str, str] = {}
        carried: list[tuple[str, str]] = []
        body_of: dict[str, tuple[int, int]] = {}  # node id -> (run index, body index)
        for start, period, reps in find_repeats(tokens):
            bodies = [order[start + r * period : start + (r + 1) * period] for r in range(reps)]
            for sub in _split_runs(bodies, protected):
                rep_body = sub[-1]  # the iteration nearest the output
                roll = Roll(id=f"roll{len(self.rolls)}", count=len(sub), nodes=list(rep_body))
                self.rolls.append(roll)
                for b, body in enumerate(sub):
                    for offset, nid in enumerate(body):
                        mapping[nid] = rep_body[offset]
                        body_of[nid] = (len(self.rolls) - 1, b)
                for nid in rep_body:
                    self.nodes[nid].roll = roll.id
        if not mapping:
            return
        for src, dst in self.edges:
            src_body, dst_body = body_of.get(src), body_of.get(dst)
            if src_body is not None and dst_body is not None and src_body[0] == dst_body[0] and src_body[1] != dst_body[1]:
                carried.append((src, dst))
        self.remap(mapping, carried=carried)

    # ------------------------------------------------------------------ shared parameters
    def split_shared(self, shareable: set[str], zone: Mapping[str, Hashable] | None = None) -> dict[str, str]:
        """Give each use of a shared leaf node (AccumulateGrad) its own copy; returns copy id -> original id.

        Uses in one `zone` (training step) by ops of different modules share one copy: a weight tied between an
        embedding and the output layer is drawn once in the step, with an edge from each, as PyTorch accumulates
        both gradients into it (a loop in one module still gets a copy per use)."""
        users = self.parents()
        order = self._order_key()
        zone = zone or {}
        copies: dict[str, str] = {}
        for nid in [n for n in self.nodes if n in shareable]:
            targets = sorted(set(users.get(nid, [])), key=order)
            if len(targets) < 2:
                continue
            by_zone: dict[Hashable, list[str]] = defaultdict(list)
            for dst in targets:
                by_zone[zone.get(dst)].append(dst)
            uses: list[list[str]] = []
            for members in by_zone.values():
                tied = len({self.nodes[dst].module for dst in members}) > 1
                uses.extend([members] if tied else [[dst] for dst in members])
            if len(uses) < 2 and len(uses[0]) > 1:
                continue  # one tied use in the only step: the node as it is
            original = self.nodes.pop(nid)
            for i, group in enumerate(sorted(uses, key=lambda g: order(g[0]))):
                cid = f"{nid}_u{i}"
                self.nodes[cid] = CoreNode(cid, original.name, origin=original.origin or nid, module=original.module)
                for dst in group:
                    kind = self.edges.pop((nid, dst))
                    self.edges[(cid, dst)] = kind
                copies[cid] = original.origin or nid
        return copies

    # ------------------------------------------------------------------ modules
    def collapse_modules(
        self, keys: dict[str, str | None], protected: set[str], attach: set[str], zone: Mapping[str, Hashable] | None = None,
    ) -> list[Group]:
        """Replace each module call by one group node; `keys[id]` names the module box a node belongs in (the
        module cut to the depth drawn), None for a node drawn as itself.

        A call is a run of consecutive nodes (in drawing order) with the same key, the same rolled loop and the
        same `zone` (the training step drawn around it). Leaf nodes in `attach` (AccumulateGrad) join the group of
        their only user. The protected nodes of a call (findings) stay drawn as themselves, between a group of the
        call's ops that feed them and a group of the rest.
        """
        groups, roll_of = self._calls(keys, protected, attach, zone or {})
        if not groups:
            return []
        member_of, shared = self._attach_leaves(groups, protected, attach)
        by_group: dict[str, list[str]] = defaultdict(list)
        for nid in self.nodes:
            if nid in member_of:
                by_group[member_of[nid]].append(nid)
            for owner in sorted(shared.get(nid, ())):
                by_group[owner].append(nid)
        new_nodes: dict[str, CoreNode] = {}
        for nid, node in self.nodes.items():  # keep drawing order: a group sits where its first member was
            gid = member_of.get(nid)
            if nid in shared:
                continue
            if gid is None:
                new_nodes[nid] = node
            elif gid not in new_nodes:
                group = next(g for g in groups if g.id == gid)
                group.members = by_group[gid]
                new_nodes[gid] = CoreNode(
                    gid, group.module, kind="group", module=group.module, members=group.members, roll=roll_of[gid]
                )
        mapping = dict(member_of)
        self.remap(mapping)
        self.edges = {edge: kind for edge, kind in self.edges.items() if edge[0] not in shared and edge[1] not in shared}
        self.nodes = new_nodes
        return groups

    def _calls(
        self, keys: dict[str, str | None], protected: set[str], attach: set[str], zone: Mapping[str, Hashable]
    ) -> tuple[list[Group], dict[str, str | None]]:
        """The module calls as groups (a call's protected nodes left out, the ops feeding them a group of their
        own), and each group's rolled loop."""
        groups: list[Group] = []
        current: list[str] = []
        current_key: tuple[str, str | None, Hashable] | None = None
        roll_of: dict[str, str | None] = {}

        inputs: dict[str, list[str]] = defaultdict(list)
        for src, dst in self.edges:
            inputs[dst].append(src)

        def close() -> None:
            if current_key is None:
                return
            members = [m for m in current if m not in protected]
            # a finding drawn as itself inside the call splits it: the ops feeding it are one box, the rest another,
            # not one box both feeding it and fed by it (an edge each way, which dot lays out side by side)
            upstream = _feeding([m for m in current if m in protected], inputs, set(members))
            for part in ([m for m in members if m in upstream], [m for m in members if m not in upstream]):
                if part:
                    groups.append(Group(f"group{len(groups)}", current_key[0], part))
                    roll_of[groups[-1].id] = current_key[1]

        for nid, node in list(self.nodes.items()):
            if nid in attach or node.kind != "node":
                continue
            # a group stays inside its loop body and its step, so the rolled picture keeps its ×N around it
            box = keys.get(nid)
            key = (box, node.roll, zone.get(nid)) if box is not None else None
            if key != current_key:
                close()
                current, current_key = [], key
            current.append(nid)
        close()
        return groups, roll_of

    def _attach_leaves(
        self, groups: list[Group], protected: set[str], attach: set[str]
    ) -> tuple[dict[str, str], dict[str, set[str]]]:
        """Node -> its group, a leaf in `attach` joining its only user's; and the leaves counted in each of the
        several boxes that use them."""
        member_of = {m: g.id for g in groups for m in g.members}
        users = self.parents()
        shared: dict[str, set[str]] = {}  # leaf -> the groups, all of its users, that share it
        module_of = {g.id: g.module for g in groups}
        for nid in attach:
            if nid in self.nodes and nid not in protected:
                found = [member_of.get(u) for u in users.get(nid, [])]
                owners = {owner for owner in found if owner is not None}
                if len(owners) < len(set(found)):
                    continue  # (a user outside every group)
                if len(owners) == 1:
                    member_of[nid] = owners.pop()
                elif len({module_of[owner] for owner in owners}) > 1:
                    # a weight tied between modules (an embedding and the output layer): drawn as itself, with an
                    # edge from each, or the picture would hide that one tensor gets both gradients
                    continue
                elif len(owners) > 1:
                    # a weight only boxes use (a model's, in each step of a GAN, in each call): counted in every box
                    # that uses it rather than drawn as a node whose edges cross the picture, which at a shallow
                    # depth lines every weight up side by side, wider than the deeper picture
                    shared[nid] = owners
        return member_of, shared

    # ------------------------------------------------------------------ budget
    def cut_to(
        self, budget: int, keep_first: list[str], weight: dict[str, int], attached: set[str] | frozenset[str] = frozenset(),
        *, zone: Mapping[str, Hashable] | None = None,
    ) -> None:
        """Keep at most `budget` drawn nodes: `keep_first` (findings, outputs) and then the nodes nearest the
        outputs (breadth-first towards the leaves); each connected stretch of the rest becomes one summary node.

        `weight[id]` is how many drawn nodes a core node costs (itself plus the tensors hanging off it). Nodes in
        `attached` (parameters' AccumulateGrad) are kept with their user, so what is hidden is whole stretches.
        A stretch never spans two `zone`s (training steps): each step gets its own summaries.
        """
        zone = zone or {}
        if sum(weight.get(n, 1) for n in self.nodes) <= budget:
            return
        kept = self._kept(budget, keep_first, weight, attached)
        hidden = [n for n in self.nodes if n not in kept]
        if not hidden:
            return
        mapping: dict[str, str] = {}
        new_nodes = {nid: n for nid, n in self.nodes.items() if nid in kept}
        for i, stretch in enumerate(self._stretches(hidden, zone)):
            sid = f"hidden{i}"
            for n in stretch:
                mapping[n] = sid
            count = sum(weight.get(n, 1) for n in stretch)
            origins = [m for n in stretch for m in (self.nodes[n].members if self.nodes[n].kind != "node"
                                                    else [self.nodes[n].origin or n])]
            new_nodes[sid] = CoreNode(sid, f"{count}", kind="summary", members=origins)
            self.hidden += count
        self.remap(mapping)
        self.nodes = new_nodes

    def _kept(
        self, budget: int, keep_first: list[str], weight: dict[str, int], attached: set[str] | frozenset[str]
    ) -> dict[str, None]:
        """The nodes kept within `budget`: `keep_first` and their neighbours, then breadth-first towards the leaves."""
        inputs: dict[str, list[str]] = defaultdict(list)  # node -> its inputs (towards the leaves)
        neighbours: dict[str, list[str]] = defaultdict(list)
        for src, dst in self.edges:
            inputs[dst].append(src)
            neighbours[src].append(dst)
            neighbours[dst].append(src)
        kept: dict[str, None] = {}
        used = 0
        # room for the summaries: leave a little of the budget
        budget = max(budget - 5, 1)

        def take(nid: str, *, force: bool = False) -> bool:
            nonlocal used
            if nid in kept or nid not in self.nodes:
                return True
            leaves = [s for s in inputs.get(nid, []) if s in attached and s not in kept]
            cost = weight.get(nid, 1) + sum(weight.get(s, 1) for s in leaves)
            if used + cost > budget and kept and not force:  # outputs, losses and findings are never dropped
                return False
            kept[nid] = None
            kept.update(dict.fromkeys(leaves))
            used += cost
            return True

        for nid in keep_first:
            take(nid, force=True)
        for nid in keep_first:
            for other in neighbours.get(nid, []):  # the neighbourhood of every finding stays readable
                take(other)
        queue = [n for n in dict.fromkeys(keep_first) if n in kept]
        queued = set(queue)
        head = 0
        full = False
        while head < len(queue) and not full:
            nid = queue[head]
            head += 1
            for src in inputs.get(nid, []):
                if src in queued or src in attached:
                    continue
                if not take(src):
                    full = True
                    break
                queued.add(src)
                queue.append(src)
        return kept

    def _stretches(self, hidden: list[str], zone: Mapping[str, Hashable]) -> list[list[str]]:
        """The connected stretches of hidden nodes (union-find, iterative), none across two zones; many small
        islands of one zone as one stretch."""
        parent = {n: n for n in hidden}

        def find(x: str) -> str:
            root = x
            while parent[root] != root:
                root = parent[root]
            while parent[x] != root:
                parent[x], x = root, parent[x]
            return root

        order = self._order_key()
        for src, dst in self.edges:
            if src in parent and dst in parent and zone.get(src) == zone.get(dst):
                ra, rb = find(src), find(dst)
                if ra != rb:
                    parent[max(ra, rb, key=order)] = min(ra, rb, key=order)
        members: dict[str, list[str]] = defaultdict(list)
        for n in hidden:
            members[find(n)].append(n)
        by_zone: dict[Hashable, list[list[str]]] = defaultdict(list)
        for stretch in members.values():
            by_zone[zone.get(stretch[0])].append(stretch)
        stretches = []
        for in_zone in by_zone.values():
            in_zone.sort(key=len, reverse=True)
            if len(in_zone) > 12:  # many small islands: one summary for all the small ones
                in_zone = in_zone[:11] + [[n for s in in_zone[11:] for n in s]]
            stretches.extend(in_zone)
        return stretches

    def _order_key(self) -> Callable[[str], int]:
        index = {nid: i for i, nid in enumerate(self.nodes)}
        return lambda nid: index.get(nid, len(index))


def _feeding(targets: list[str], inputs: Mapping[str, list[str]], among: set[str]) -> set[str]:
    """The nodes of `among` from which one of `targets` is reached through nodes of `among` (inputs first)."""
    found: set[str] = set()
    todo = [src for target in targets for src in inputs.get(target, ()) if src in among]
    while todo:
        nid = todo.pop()
        if nid not in found:
            found.add(nid)
            todo.extend(src for src in inputs.get(nid, ()) if src in among and src not in found)
    return found


def _split_runs(bodies: list[list[str]], protected: set[str]) -> list[list[list[str]]]:
    """Consecutive bodies without protected nodes, in runs long enough to roll."""
    runs: list[list[list[str]]] = []
    current: list[list[str]] = []
    for body in bodies:
        if protected.intersection(body):
            if len(current) >= MIN_REPEATS:
                runs.append(current)
            current = []
        else:
            current.append(body)
    if len(current) >= MIN_REPEATS:
        runs.append(current)
    return runs


def find_repeats(tokens: Sequence[Hashable], *, min_repeats: int = MIN_REPEATS) -> list[tuple[int, int, int]]:
    """Tandem repeats in `tokens`: (start, period, repetitions) with at least `min_repeats` repetitions, not
    overlapping, found by trying the most common distances between equal tokens as periods (smallest first)."""
    ids: dict[Hashable, int] = {}
    ints = [ids.setdefault(t, len(ids)) for t in tokens]
    n = len(ints)
    last: dict[int, int] = {}
    gaps: Counter[int] = Counter()
    for i, t in enumerate(ints):
        if t in last:
            gaps[i - last[t]] += 1
        last[t] = i
    candidates = sorted(p for p, _ in gaps.most_common(PERIOD_CANDIDATES))
    covered = bytearray(n)
    found: list[tuple[int, int, int]] = []
    for period in candidates:
        i = 0
        while i + period < n:
            if ints[i] != ints[i + period] or covered[i]:
                i += 1
                continue
            j = i
            while j + period < n and ints[j] == ints[j + period] and not covered[j + period]:
                j += 1
            reps = (j - i + period) // period
            if reps >= min_repeats:
                found.append((i, period, reps))
                for k in range(i, i + reps * period):
                    covered[k] = 1
            i = j + 1
    return sorted(found)
