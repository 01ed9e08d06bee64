"""The explorer's one JSON document: the picture model of a trace (nodes, hierarchy, rolled steps, findings,
tensors, storages, events), as plain data the page draws. Never sees a torch object; never emits markup."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import collector
from ..analysis.evidence import evidence_summary
from ..analysis.findings import CutEvidence, SavedTensorEvidence, Severity
from ..analysis.lifetime import END
from ..analysis.verify import Measurement
from ..model import EventKind, Trace
from ..paths import relative
from ..picture.memory_select import relevant_tensors
from ..picture.palette import Mark, page_legend
from ..picture.per_step import steps_text
from ..picture.picture import Picture
from ..picture.simplify import find_repeats
from ..text import in_thread
from .hierarchy import Groups, module_of_parameter

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..model import NodeRecord, TensorRecord
    from ..picture.annotate import Annotations
    from ..picture.steps import Step, StepRoll

__all__ = ["explorer_document"]

MAX_EVENTS = 400  # scrubber rows (repeated loop bodies are folded first)
MAX_MEMORY_TENSORS = 80  # tensors the memory tables follow
MAX_CHART_POINTS = 400  # graph-memory chart samples
MAX_READS = 12  # places a tensor was read, per tensor
LINE_GROUP_MIN = 24  # this many ops of one line in one box: they get a box of their own ("line 12 ×2,000")
_CONTEXT = 3  # lines either side of an implicated line of library code


def explorer_document(
    trace: Trace, findings: Sequence[Finding] = (), *, title: str | None = None, picture: Picture | None = None
) -> dict[str, Any]:
    """Everything the page shows, as one JSON-ready dict (its shape: gradviz/explorer/README.md). `picture`: the
    picture model of `trace` and `findings` when the caller has one (the other views of the run read the same)."""
    with collector.paused():
        if picture is None or not picture.of(trace, findings):
            picture = Picture(trace, findings)
        return _Builder(picture, title).build()


class _Builder:
    def __init__(self, picture: Picture, title: str | None) -> None:
        self.picture = picture
        self.trace = picture.trace
        self.findings = picture.findings
        self.title = title
        self.namer = picture.namer
        self._storage_names: dict[str, str] | None = None
        self.files: list[str] = []
        self.tensor_index: dict[str, int] = {}
        self.tensor_rows: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ names
    def name(self, tid: str) -> str:
        """A tensor's name for people (analysis/names.py: variable, parameter, expression, module and line)."""
        return self.namer.tensor(tid) if tid in self.trace.tensors else "a tensor not recorded"

    def storage_names(self) -> dict[str, str]:
        """Each storage named by its first owner (`storage of model.fc1.weight`), the owners found in one pass."""
        if self._storage_names is None:
            owners: dict[str, str] = {}
            for t in sorted(self.trace.tensors.values(), key=lambda t: t.seq):
                if t.storage is not None:
                    owners.setdefault(t.storage, t.id)
            self._storage_names = {sid: f"storage of {self.namer.tensor(owners[sid])}" if sid in owners
                                   else "a storage" for sid in self.trace.storages}
        return self._storage_names

    def file_index(self, file: str | None) -> int | None:
        if file is None:
            return None
        if file not in self.files:
            self.files.append(file)
        return self.files.index(file)

    def tensor(self, tid: str | None) -> int | None:
        """The index of a tensor in the document's table, adding it on first use."""
        if tid is None or tid not in self.trace.tensors:
            return None
        if tid not in self.tensor_index:
            self.tensor_index[tid] = len(self.tensor_rows)
            self.tensor_rows.append({})  # filled in by _tensor_rows, once every tensor is known
        return self.tensor_index[tid]

    # ------------------------------------------------------------------ build
    def build(self) -> dict[str, Any]:
        trace, picture = self.trace, self.picture
        if trace.script:
            self.file_index(trace.script)
        notes = picture.annotations
        rolls, mapping = picture.rolls
        freed = {nid: stop for start, stop, nid in picture.lifetimes.intervals if stop < END}
        groups = Groups(picture.hierarchy)
        layout = _Layout.of(trace, picture.leaves, set(mapping), _step_boxes(groups, rolls))
        nodes = self._nodes(layout, groups, notes, freed)
        self._instances(rolls, picture.steps, mapping, layout.index, groups, freed)
        edges = layout.edges()
        cuts = self._cuts(notes, layout.copies, mapping)
        document: dict[str, Any] = {
            "format": "gradviz-explorer",
            "version": 1,
            "title": self.title or f"gradviz: {Path(trace.script).name if trace.script else 'traced code'}",
            "facts": self._facts(),
            "nodes": nodes,
            "ids": [nid for nid, _roll in layout.entries],  # for #node=<id> addresses only; the page never shows them
            "edges": [list(e) for e in edges],
            "cuts": cuts,
            "groups": groups.rows(),
            "steps": [{"number": s.number, "seq": s.seq, "line": s.line,
                       "roll": next((r.id for r in rolls if s.number in r.numbers), None)} for s in picture.steps],
            "findings": [self._finding(f, layout.copies, mapping) for f in self.findings],
        }
        document["events"] = self._events()
        document["memory"] = self._memory()
        document["chart"] = self._chart()
        document["tensors"] = self._tensor_rows()
        document["files"] = self._files()
        document["legend"] = page_legend()  # the static views' words for the marks the page shares with them
        return document

    def _nodes(self, layout: _Layout, groups: Groups, notes: Annotations, freed: dict[str, int]) -> list[dict[str, Any]]:
        """One row per drawn node (a parameter once in every step box using it), each placed in its box; then the
        loop boxes and the boxes of one line's many ops."""
        trace, roll_of, consumers = self.trace, layout.roll_of, layout.consumers
        nodes = [self._node(nid, notes, freed) for nid, _roll in layout.entries]
        for i, (nid, roll_id) in enumerate(layout.entries):
            record = trace.nodes[nid]
            module = record.module
            if nid in layout.leaves:
                users = sorted((c for c in consumers.get(nid, []) if roll_of.get(c) == roll_id),
                               key=lambda n: trace.nodes[n].seq)
                param = trace.tensors[record.variable].parameter if record.variable in trace.tensors else None
                module = module_of_parameter(param, trace.nodes[users[0]].module if users else None)
            nodes[i]["g"] = groups.place(roll_id, module)
        groups.add_loops(nodes, self._loops(layout))
        groups.split_lines(nodes, minimum=LINE_GROUP_MIN)
        return nodes

    def _cuts(self, notes: Annotations, copies: dict[str, list[int]], mapping: dict[str, str]) -> list[dict[str, Any]]:
        """Each cut edge between the first drawn copies of its two ends (either may be missing)."""
        cuts = []
        for cut in notes.cuts:
            source = next(iter(copies.get(mapping.get(cut.source or "", cut.source or ""), [])), None)
            target = next(iter(copies.get(mapping.get(cut.target or "", cut.target or ""), [])), None)
            if source is not None or target is not None:
                cuts.append({"from": source, "to": target, "label": cut.label, "alias": self.tensor(cut.alias)})
        return cuts

    # ------------------------------------------------------------------ pieces
    def _loops(self, layout: _Layout) -> list[list[list[int]]]:
        """Loops in each step's ops, found as the graph view finds them (picture/simplify.py's find_repeats on the
        picture's op tokens): each a list of iterations of node indexes. A loop of one op at one line repeated
        LINE_GROUP_MIN times or more is left to the line boxes."""
        entries, tokens_of = layout.entries, self.picture.op_tokens
        by_roll: dict[str | None, list[int]] = defaultdict(list)
        for i, (nid, _roll) in enumerate(entries):
            if nid not in layout.leaves:
                by_roll[layout.roll_of.get(nid)].append(i)
        runs: list[list[list[int]]] = []
        for order in by_roll.values():
            tokens = [tokens_of[entries[i][0]] for i in order]
            for start, period, reps in find_repeats(tokens):
                if period == 1 and reps >= LINE_GROUP_MIN:
                    continue
                runs.append([order[start + k * period: start + (k + 1) * period] for k in range(reps)])
        return runs

    def _instances(self, rolls: list[StepRoll], steps: list[Step], mapping: dict[str, str],
                   index: dict[tuple[str, str | None], int], groups: Groups, freed: dict[str, int]) -> None:
        """Every step of a rolled box, on the drawn step's structure: per drawn node, the instance's creation seq,
        output tensor, saved tensors with their versions at save, and when its graph was freed. The page shows
        one instance at a time in the box (`‹ step 2 ›`)."""
        by_number = {s.number: s for s in steps}
        for roll in rolls:
            if len(roll.numbers) < 2:
                continue
            drawn = next((n for n in roll.numbers if by_number[n].nodes[:1] == roll.nodes[:1]), roll.numbers[-1])
            instances = []
            for number in roll.numbers:
                rows = []
                for nid in by_number[number].nodes:
                    i = index.get((mapping.get(nid, nid), roll.id))
                    if i is None or nid in self.picture.leaves:
                        continue
                    record = self.trace.nodes[nid]
                    saved = [[self.tensor(x.tensor), x.saved_version] for x in record.saved if x.tensor is not None]
                    rows.append([i, record.seq, self.tensor(record.output), saved, freed.get(nid),
                                 self.picture.lifetimes.freed_at.get(nid)])
                instances.append({"number": number, "nodes": rows})
            groups.describe_step(roll.id, instances=instances, drawn=roll.numbers.index(drawn))

    def _facts(self) -> dict[str, Any]:
        trace = self.trace
        facts: dict[str, Any] = {
            "tensors": len(trace.tensors), "storages": len(trace.storages), "nodes": len(trace.nodes),
            "events": len(trace.events), "torch": trace.torch_version,
            "backwards": len(trace.events_of(EventKind.BACKWARD)),
            "window": _window_text(trace),
            "internal": trace.internal_error_summary(),
            "exception": None,
        }
        exc = trace.exception
        if exc is not None:
            first = exc.message.strip().splitlines()[0] if exc.message.strip() else ""
            facts["exception"] = {
                "type": exc.type, "message": first, "exit": exc.type in ("SystemExit", "os._exit"),
                "status": exc.exit_code,
                "file": self.file_index(exc.location.file) if exc.location else None,
                "line": exc.location.line if exc.location else None,
            }
        return facts

    def _node(self, nid: str, notes: Annotations, freed: dict[str, int]) -> dict[str, Any]:
        trace = self.trace
        record = trace.nodes[nid]
        leaf = nid in self.picture.leaves
        kind = Mark.LEAF.value if leaf else "op"  # an op: the page's own word for the palette's backward node
        label = record.name
        if leaf and record.variable is not None:
            label = self.name(record.variable)
            note = notes.leaves.get(record.variable)
            if note is not None:
                kind = note.style.value  # dead / updated
        elif nid in self._roots:  # only where a backward started: not the end of a cut-off branch
            kind = Mark.OUTPUT.value
        if nid in notes.holders:
            kind = notes.holders[nid].style.value  # kept / freed
        node: dict[str, Any] = {"label": label, "kind": kind, "seq": record.seq}
        if record.module:
            node["module"] = record.module
        created = record.created
        if leaf and record.variable in trace.tensors and trace.tensors[record.variable].created is not None:
            # a leaf is made where its tensor was (the memory view's "initialised (line N)"), not where first used
            created = trace.tensors[record.variable].created
        if created is not None:
            node["file"] = self.file_index(created.file)
            node["line"] = created.line
        if record.output is not None:
            node["out"] = self.tensor(record.output)
        if leaf and record.variable is not None:
            node["var"] = self.tensor(record.variable)
        saved = []
        for s in record.saved:
            if s.tensor is None:
                continue
            note = notes.saved.get((nid, s.name))
            row: dict[str, Any] = {"name": s.name, "t": self.tensor(s.tensor), "v": s.saved_version}
            if note is not None:
                row["mark"] = note.style.value
                row["note"] = " ".join(note.lines)
            saved.append(row)
        if saved:
            node["saved"] = saved
            marks = [s["mark"] for s in saved if "mark" in s]
            if marks:
                node["mark"] = marks[0]
        if nid in freed:
            node["freed"] = freed[nid]
        backward = self.picture.lifetimes.freed_at.get(nid)
        if backward is not None:  # the backward that freed its saved tensors: `freed` is when the node itself went
            node["freed_by"] = backward
        return node

    @cached_property
    def _roots(self) -> set[str]:
        """The nodes a backward call started from (the grad_fn of each of its root tensors)."""
        return {grad_fn for e in self.trace.events if e.kind is EventKind.BACKWARD
                for tid in (e.data.get("roots") or ([e.tensor] if e.tensor else []))
                if (grad_fn := getattr(self.trace.tensors.get(tid), "grad_fn", None)) is not None}

    def _finding(self, f: Finding, copies: dict[str, list[int]], mapping: dict[str, str]) -> dict[str, Any]:
        """A finding and exactly the graph nodes it points at: its nodes, the nodes of its tensors, the parameters'
        AccumulateGrad nodes and the two ends of the cut edges it made."""
        trace = self.trace
        wanted: list[str] = list(f.nodes)
        tensors = set(f.tensors)
        for nid, record in trace.nodes.items():
            if record.output in tensors or record.variable in tensors:
                wanted.append(nid)
        for evidence in f.evidence:  # the two ends of each cut, the node that saved the tensor
            if isinstance(evidence, CutEvidence):
                wanted += [n for n in (evidence.source_node, evidence.use) if n is not None]
            elif isinstance(evidence, SavedTensorEvidence):
                wanted.append(evidence.node)
        targets = sorted({i for n in wanted for i in copies.get(mapping.get(n, n), [])})
        return {
            "kind": f.kind.value, "severity": f.severity.value, "message": f.message, "fix": f.fix,
            "file": self.file_index(f.file), "line": f.line, "code": f.code.strip(), "count": f.count,
            "parameter": f.parameter, "nodes": targets,
            "tensors": [i for i in (self.tensor(t) for t in f.tensors) if i is not None],
            **({"measured": self._measured(f.measured)} if f.measured is not None else {}),  # --verify (also in message)
            "evidence": evidence_summary(f.evidence[0], self.namer) if f.evidence else None,
        }

    def _measured(self, measured: Measurement) -> dict[str, Any]:
        """--verify's measurement, its tensors by their index here (never a recorder id)."""
        out = measured.to_dict()
        for row in out.get("gradients", []):
            row["tensor"] = self.tensor(row["tensor"])
        return out

    def _events(self) -> list[dict[str, Any]]:
        rows = self.picture.timeline_rows(MAX_EVENTS)
        number = {e.seq: i + 1 for i, e in enumerate(self.trace.events)}
        out = []
        for row in rows:
            versions = [[self.tensor(v.tensor), v.before, v.after]
                        for v in row.versions if v.tensor in self.trace.tensors]
            last = max(row.seqs) if row.seqs else row.seq
            event = {
                # which of the trace's events (1-based) this row starts at: the scrubber counts the header's events
                "number": number.get(row.seq, 0),
                "seq": row.seq, "last": last, "kind": row.kind,
                "file": self.file_index(row.file), "line": row.line, "code": row.code,
                "alias": row.alias, "versions": versions, "text": row.versions_text,
                "outcome": row.error or row.outcome or "", "count": row.count,
                "severity": row.severity, "findings": list(row.findings),  # kinds, as FindingKind values
            }
            out.append(event)
        return out

    def _memory(self) -> dict[str, Any]:
        """The tensors the memory tables follow, grouped by storage, with what each version counter holds."""
        trace = self.trace
        followed, left_out = relevant_tensors(trace, self.findings, max_tensors=MAX_MEMORY_TENSORS)
        names = self.storage_names()
        storages: dict[str, list[int]] = {}
        for tid in followed:
            sid = trace.tensors[tid].storage
            if sid is not None and sid in trace.storages:
                storages.setdefault(sid, []).append(self.tensor(tid) or 0)
        # versions before any event: a record holds the version when first seen, which can be after a write
        first: dict[str, int | None] = {}
        for event in trace.events:
            for change in event.versions:
                first.setdefault(change.tensor, change.before)
        start = {}
        for tid in followed:
            v = first.get(tid, trace.tensors[tid].version)
            start[str(self.tensor(tid))] = v if v is not None else trace.tensors[tid].version
        counters: dict[str, list[int]] = {}
        for tid in followed:
            cid = trace.tensors[tid].version_counter
            if cid is not None:
                counters.setdefault(cid, []).append(self.tensor(tid) or 0)
        return {
            "storages": [
                {"name": names[sid], "bytes": trace.storages[sid].nbytes,
                 "device": trace.storages[sid].device, "tensors": members}
                for sid, members in storages.items()
            ],
            "counters": [members for members in counters.values() if len(members) > 1],
            "start": start,
            "left_out": left_out,
        }

    def _chart(self) -> dict[str, Any] | None:
        if not self.trace.nodes:
            return None
        profile = self.picture.memory_profile
        points = profile.points
        if len(points) > MAX_CHART_POINTS:  # keep the shape: every k-th point and the peak
            k = len(points) // MAX_CHART_POINTS + 1
            keep = set(range(0, len(points), k)) | {len(points) - 1}
            if profile.peak is not None:
                keep.add(points.index(profile.peak) if profile.peak in points else 0)
            points = [points[i] for i in sorted(keep)]
        return {
            "headline": self.picture.headline,
            "points": [list(p) for p in points], "end": profile.end,
            "backwards": [s for s, _ in profile.backwards], "peak": list(profile.peak) if profile.peak else None,
            "holders": [list(h) for h in profile.top_holders],
        }

    def _tensor_rows(self) -> list[dict[str, Any]]:
        """Every tensor the document refers to: its name, shape, bytes, storage, where it was made, written,
        aliased and read. Tensors referred to while filling these rows are added (and filled) too."""
        trace = self.trace
        reads: dict[str, list[tuple[str | None, int | None]]] = defaultdict(list)
        for op in trace.ops:
            for tid in op.inputs:
                if tid in self.tensor_index and len(reads[tid]) < MAX_READS:
                    reads[tid].append((op.file, op.line))
        touched: dict[str, list[tuple[str, int | None, int | None, str]]] = defaultdict(list)
        for e in trace.events:
            involved = {v.tensor for v in e.versions} | {t for t in (e.tensor, e.result) if t}
            for tid in involved:
                if tid in self.tensor_index and len(touched[tid]) < MAX_READS:
                    loc = e.location
                    touched[tid].append((e.kind.value, self.file_index(loc.file) if loc else None,
                                         loc.line if loc else None, loc.code.strip() if loc else ""))
        storage_names = self.storage_names()
        self.by_storage: dict[str, list[int]] = defaultdict(list)  # the document's tensors of each storage
        for tid, i in self.tensor_index.items():
            sid = trace.tensors[tid].storage
            if sid is not None and len(self.by_storage[sid]) <= MAX_READS:
                self.by_storage[sid].append(i)
        by_index = {i: tid for tid, i in self.tensor_index.items()}
        for i in range(len(self.tensor_rows)):
            self.tensor_rows[i] = self._tensor_row(trace.tensors[by_index[i]], storage_names, reads, touched)
        return self.tensor_rows

    def _tensor_row(self, t: TensorRecord, storage_names: dict[str, str],
                    reads: dict[str, list[tuple[str | None, int | None]]],
                    touched: dict[str, list[tuple[str, int | None, int | None, str]]]) -> dict[str, Any]:
        trace = self.trace
        itemsize = (t.byte_range[1] - t.byte_range[0]) if t.byte_range else None
        row: dict[str, Any] = {
            "name": self.name(t.id), "shape": t.shape, "dtype": t.dtype.removeprefix("torch."), "device": t.device,
            "bytes": itemsize, "origin": t.origin, "version": t.version, "grad": t.requires_grad,
        }
        if t.parameter:
            row["parameter"] = t.parameter
        if t.names:
            row["names"] = t.names[:4]
        if t.storage is not None:
            row["storage"] = storage_names.get(t.storage, "a storage")
            row["range"] = list(t.byte_range) if t.byte_range else None
            # its other aliases: tensors of the same storage the document already shows
            row["aliases"] = [i for i in self.by_storage[t.storage] if i != self.tensor_index[t.id]][:MAX_READS]
        if t.created is not None:
            row["made"] = [self.file_index(t.created.file), t.created.line, t.created.code.strip()]
        if t.source is not None and t.source in trace.tensors and t.source in self.tensor_index:
            row["source"] = self.tensor_index[t.source]
        if touched.get(t.id):
            row["events"] = [list(e) for e in touched[t.id]]
        if reads.get(t.id):
            row["reads"] = [[self.file_index(f), line] for f, line in reads[t.id]]
        return row

    def _files(self) -> list[dict[str, Any]]:
        """The source of every file the document points at; library files only around the lines pointed at."""
        trace = self.trace
        pointed: dict[int, set[int]] = defaultdict(set)
        marks: dict[int, dict[int, str]] = defaultdict(dict)
        for f in self.findings:
            fi = self.file_index(f.file)
            if fi is not None and f.line is not None:
                old = marks[fi].get(f.line)
                if old is None or f.severity.rank < Severity(old).rank:
                    marks[fi][f.line] = f.severity.value
        for e in trace.events:
            if e.location and e.location.file in self.files:
                pointed[self.files.index(e.location.file)].add(e.location.line)
        out = []
        for i, file in enumerate(self.files):
            text = trace.sources.get(file)
            label = trace.file_name(file)
            entry: dict[str, Any] = {"name": label, "path": relative(file), "marks": {str(k): v for k, v in marks[i].items()},
                                     "events": sorted(pointed[i])}
            if text is None:
                entry["lines"] = None
            elif _is_library(file):
                lines = text.splitlines()
                keep = sorted({n for h in set(marks[i]) | pointed[i] for n in range(h - _CONTEXT, h + _CONTEXT + 1)
                               if 1 <= n <= len(lines)})
                entry["library"] = True
                entry["excerpt"] = [[n, lines[n - 1]] for n in keep[:400]]
                entry["lines"] = None
            else:
                entry["lines"] = text.splitlines()
            out.append(entry)
        return out


def _is_library(file: str) -> bool:
    parts = Path(file).parts
    return "site-packages" in parts or "dist-packages" in parts


def _window_text(trace: Trace) -> str | None:
    """What the run's findings and views cover, as the CLI says it: the window, and each step traced again after it
    (`steps 1-100 of 300 traced; traced again after step 150: new code at line 40 (validation)`); the threads that
    ran unrecorded."""
    window = trace.window
    threads = trace.unrecorded_threads_summary()
    threads_text = f"{threads[0].upper()}{threads[1:]}." if threads else ""
    if window is None or not window.closed:
        return threads_text or None
    return " ".join([window.coverage() + ". Findings and views cover these steps.", *([threads_text] if threads else [])])


def _step_boxes(groups: Groups, rolls: list[StepRoll]) -> dict[str, str]:
    """A box for each rolled step (`↻ step ×3 (steps 1-3)`); node -> the id of its step's box."""
    roll_of: dict[str, str] = {}
    for roll in rolls:
        numbers = roll.numbers
        span = f"step {numbers[0]}" if len(numbers) == 1 else f"steps {steps_text(numbers)}"
        label = (f"\N{CLOCKWISE OPEN CIRCLE ARROW} step \N{MULTIPLICATION SIGN}{len(numbers)} ({span})"
                 if len(numbers) > 1 else f"step {numbers[0]}")
        if roll.kind:  # traced again after the window: `step 105: validation after step 500`
            label += f": {roll.kind}"
        if roll.thread is not None:  # (as the picture's box says it: steps of different threads never roll together)
            label += f" {in_thread(roll.thread)}"
        backward = f"backward at line {roll.line}" if roll.line else "backward"
        groups.add_step(roll.id, label, backward, numbers)
        for nid in roll.nodes:
            roll_of[nid] = roll.id
    return roll_of


@dataclass
class _Layout:
    """Which nodes the page draws, in which step box: `entries` (node, step box) in creation order (a parameter,
    a leaf, once in every step box that uses it, beside its module there, so that a step box holds its own picture
    instead of edges to every other step), their `index`, and the `copies` of each node."""

    leaves: frozenset[str]
    hidden: set[str]  # nodes of steps drawn by their representative
    roll_of: dict[str, str]
    ops: list[str]
    consumers: dict[str, list[str]]
    entries: list[tuple[str, str | None]]
    index: dict[tuple[str, str | None], int] = field(default_factory=dict)
    copies: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    nodes: dict[str, NodeRecord] = field(default_factory=dict)

    @classmethod
    def of(cls, trace: Trace, leaves: frozenset[str], hidden: set[str], roll_of: dict[str, str]) -> _Layout:
        ops = [nid for nid in trace.nodes if nid not in hidden and nid not in leaves]
        consumers: dict[str, list[str]] = defaultdict(list)
        for nid in ops:
            for nxt in trace.nodes[nid].next:
                if nxt is not None and nxt in trace.nodes and nxt not in hidden:
                    consumers[nxt].append(nid)
        entries: list[tuple[str, str | None]] = [(nid, roll_of.get(nid)) for nid in ops]
        for nid in trace.nodes:
            if nid in hidden or nid not in leaves:
                continue
            rolls_using = list(dict.fromkeys(roll_of.get(c) for c in consumers.get(nid, []))) or [None]
            entries += [(nid, roll) for roll in rolls_using]
        entries.sort(key=lambda e: (trace.nodes[e[0]].seq, e[0]))
        layout = cls(leaves, hidden, roll_of, ops, consumers, entries, nodes=trace.nodes)
        layout.index = {entry: i for i, entry in enumerate(entries)}
        for i, (nid, _roll) in enumerate(entries):
            layout.copies[nid].append(i)
        return layout

    def edges(self) -> list[tuple[int, int]]:
        """(input, op) between drawn entries, a leaf's from its copy in the op's step box."""
        edge_set: set[tuple[int, int]] = set()
        roll_of = self.roll_of
        for nid in self.ops:
            me = self.index[(nid, roll_of.get(nid))]
            for nxt in self.nodes[nid].next:
                if nxt is None or nxt not in self.nodes or nxt in self.hidden:
                    continue
                source = self.index.get((nxt, roll_of.get(nid) if nxt in self.leaves else roll_of.get(nxt)))
                if source is not None:
                    edge_set.add((source, me))
        return sorted(edge_set)
