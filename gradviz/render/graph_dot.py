"""The graph view's DOT: autograd nodes, module and summary boxes, step and loop clusters, cut edges, the header and
the legend."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from math import ceil
from pathlib import Path
from typing import TYPE_CHECKING

import graphviz

from ..analysis.names import statement
from ..analysis.steps import is_leaf
from ..picture.annotate import Annotations
from ..picture.palette import PALETTE, Mark
from ..picture.per_step import steps_text
from ..picture.simplify import Core, CoreNode, Roll
from ..picture.steps import StepRoll
from .escape import FONT, html_label_text, quote_id, shorten
from .graph_prepare import folded_saved, output_nodes, shown_saved

if TYPE_CHECKING:
    from ..model import NodeRecord, TensorRecord, Trace


#: Characters of a module box's list of op kinds kept on one line (about an op box's width); longer, a kind a line.
GROUP_LINE = 32
#: Every style the view can use: legend key -> (fill colour, description). The legend lists only those used.
LEGEND: dict[Mark, tuple[str, str]] = {key: (swatch.colour, swatch.legend) for key, swatch in PALETTE.items()
                                       if key is not Mark.SILENT}
# torch.utils.checkpoint(..., use_reentrant=True): the block runs under no_grad, its graph is built again in backward
_CHECKPOINT = "CheckpointFunctionBackward"
_RECOMPUTED = "recomputed in backward (checkpoint, use_reentrant=True): its ops are not drawn"
_NODE_ATTR = {
    "style": "filled",
    "shape": "box",
    "fontsize": "10",
    "height": "0.2",
    "fontname": FONT,
}
_FAST_LAYOUT = {"nslimit": "1", "nslimit1": "1", "mclimit": "0.01", "remincross": "false", "searchsize": "10"}


@dataclass
class _Drawn:
    """Bookkeeping while emitting DOT: which legend entries were used."""

    used: set[Mark] = field(default_factory=set)


def emit(
    trace: Trace, notes: Annotations, core: Core, copies: dict[str, str], *, budget: int, show_saved: bool
) -> graphviz.Digraph:
    graph_attr = {"rankdir": "TB", "ranksep": "0.25", "nodesep": "0.2"}
    if len(core.nodes) > 100:
        graph_attr.update(_FAST_LAYOUT)
    dot = graphviz.Digraph("gradviz", graph_attr=graph_attr, node_attr=dict(_NODE_ATTR), edge_attr={"fontsize": "9"})
    script = Path(trace.script).name if trace.script else None
    header = _header(trace, script)
    if header:  # the step and loop boxes' titles take the header's font
        dot.attr(fontsize="11", fontname=FONT)
    drawer = _Emitter(trace, notes, core, copies, show_saved=show_saved)
    step_of, roll_step = _step_placement(core, copies, drawer.roll_members, drawer.in_cluster)
    for cid in core.nodes:
        if cid not in drawer.in_cluster and cid not in step_of:
            drawer.node(dot, cid)
    drawer.steps(dot, step_of, roll_step)
    for roll in core.rolls:
        if roll.id in roll_step and roll_step[roll.id] is None or (roll.id in roll_step and not core.steps):
            drawer.roll(dot, roll)
    drawn = drawer.drawn
    _emit_holders(dot, notes, core, drawn)
    for (src, dst), kind in core.edges.items():
        if kind == "carried":
            drawn.used.add(Mark.CARRIED)
            dot.edge(src, dst, style="dashed", color="blue", constraint="false")
        else:
            dot.edge(src, dst)
    _emit_cuts(dot, trace, notes, core, copies, drawn, step_of)
    summary = []
    if core.hidden:
        summary.append(f"{core.hidden} node{'s' if core.hidden != 1 else ''} not shown (max_nodes={budget})")
    summary.extend(core.notes)
    if core.big and show_saved and any(n.saved for n in trace.nodes.values()):
        summary.append("saved tensors shown only where a finding points (large graph)")
    _emit_title(dot, header, drawn, summary)
    return dot


class _Emitter:
    """Draws the simplified graph's nodes (an autograd node, a module box, a summary), loop bodies and step boxes."""

    def __init__(self, trace: Trace, notes: Annotations, core: Core, copies: dict[str, str], *, show_saved: bool) -> None:
        self.trace, self.notes, self.core, self.copies, self.show_saved = trace, notes, core, copies, show_saved
        self.drawn = _Drawn()
        self.outputs = output_nodes(trace, core, core.parents(), copies)
        self.roll_members: dict[str, list[str]] = defaultdict(list)
        for cid, cnode in core.nodes.items():
            if cnode.roll is not None:
                self.roll_members[cnode.roll].append(cid)
        self.in_cluster = {cid for members in self.roll_members.values() for cid in members}

    def node(self, target: graphviz.Digraph, cid: str) -> None:
        trace, nodes, cnode, drawn = self.trace, self.trace.nodes, self.core.nodes[cid], self.drawn
        if cnode.kind == "group":
            drawn.used.add(Mark.GROUP)
            target.node(cid, f"<{_group_label(cnode, nodes)}>", fillcolor=LEGEND[Mark.GROUP][0], style="filled,rounded")
            return
        if cnode.kind == "summary":
            drawn.used.add(Mark.SUMMARY)
            text = html_label_text(f"\N{HORIZONTAL ELLIPSIS} {cnode.name} node{'s' if cnode.name != '1' else ''} not shown")
            target.node(cid, f"<{text}>", shape="note", fillcolor="white", style="filled,dashed")
            return
        record = nodes[self.copies.get(cid, cid)]
        _emit_autograd_node(target, cid, record, trace, self.notes, drawn, big=self.core.big, show_saved=self.show_saved,
                            marks=self.core.step_marks.get(cid))
        if cid in self.outputs and record.output is not None and record.output in trace.tensors:
            out_id = f"{cid}_out"
            tensor = trace.tensors[record.output]
            drawn.used.add(Mark.OUTPUT)
            target.node(out_id, f"<{_tensor_label(tensor)}>", fillcolor=LEGEND[Mark.OUTPUT][0])
            target.edge(cid, out_id)

    def roll(self, target: graphviz.Digraph, roll: Roll) -> None:
        """A loop body drawn once, in a dashed box titled with its count and lines."""
        members = self.roll_members.get(roll.id)
        if not members:
            return
        nodes, copies = self.trace.nodes, self.copies
        self.drawn.used.add(Mark.ROLL)
        lines = sorted({created.line for m in members
                        if copies.get(m, m) in nodes and (created := nodes[copies.get(m, m)].created) is not None})
        where = f"  line {lines[0]}" if len(lines) == 1 else (f"  lines {lines[0]}-{lines[-1]}" if lines else "")
        with target.subgraph(name=f"cluster_{roll.id}") as sub:
            count = _loop_count(self.core, roll, copies)
            label = html_label_text(f"\N{CLOCKWISE OPEN CIRCLE ARROW} loop body \N{MULTIPLICATION SIGN}{count} iterations{where}")
            sub.attr(label=f"<{label}>", style="dashed,filled", fillcolor=LEGEND[Mark.ROLL][0], color="blue", fontcolor="blue")
            for cid in members:
                self.node(sub, cid)

    def steps(self, dot: graphviz.Digraph, step_of: dict[str, int], roll_step: dict[str, int | None]) -> None:
        """Training steps drawn once: each a cluster, with the loops rolled inside it nested in it."""
        core = self.core
        # a cut edge comes into a step box from above, through its title: that box has its title at the bottom
        entered = _entered_by_cuts(self.notes, core, self.copies, step_of) if self.notes.cuts and core.steps else set()
        for i, step_roll in enumerate(core.steps):
            inside = [c for c, s in step_of.items() if s == i]
            if not inside:
                continue
            self.drawn.used.add(Mark.STEP)
            with dot.subgraph(name=f"cluster_{step_roll.id}") as sub:
                sub.attr(label=f"<{html_label_text(_step_label(step_roll))}>", style="dashed,filled",
                         fillcolor=LEGEND[Mark.STEP][0], color="darkgreen", fontcolor="darkgreen",
                         **({"labelloc": "b"} if i in entered else {}))
                for cid in inside:
                    if cid not in self.in_cluster:
                        self.node(sub, cid)
                for roll in core.rolls:
                    if roll_step.get(roll.id) == i:
                        self.roll(sub, roll)


def _step_placement(
    core: Core, copies: dict[str, str], roll_members: dict[str, list[str]], in_cluster: set[str]
) -> tuple[dict[str, int], dict[str, int | None]]:
    """Drawn node -> the step box it is in, and loop body -> its step box (None: a loop across steps, drawn
    outside them)."""
    rep_step = {nid: i for i, roll in enumerate(core.steps) for nid in roll.nodes}
    step_of: dict[str, int] = {}
    for cid, cnode in core.nodes.items():
        for key in [cid] if cnode.kind == "node" else cnode.members:  # a group: where its autograd nodes are
            if copies.get(key, key) in rep_step:
                step_of[cid] = rep_step[copies.get(key, key)]
                break
    roll_step: dict[str, int | None] = {}
    for roll_id, members in roll_members.items():
        where_steps = {step_of.get(m) for m in members}
        roll_step[roll_id] = where_steps.pop() if len(where_steps) == 1 else None
    if roll_step and None in roll_step.values():  # a loop across steps: draw it outside them
        step_of = {c: s for c, s in step_of.items() if not (c in in_cluster and roll_step.get(core.nodes[c].roll or "") is None)}
    return step_of, roll_step


def _emit_holders(dot: graphviz.Digraph, notes: Annotations, core: Core, drawn: _Drawn) -> None:
    """Lifetime findings: a box beside the node they are about (kept alive, or freed and built on again)."""
    for nid, note in notes.holders.items():
        if nid not in core.nodes:
            continue
        drawn.used.add(note.style)
        box = f"{nid}_{note.style}"
        text = "<br/>".join(html_label_text(t) for t in ([f"{note.name}"] if note.name else []) + note.lines)
        dot.node(box, f"<{text}>", fillcolor=LEGEND[note.style][0], shape="box",
                 style="filled,dashed" if note.style is Mark.FREED else "filled,bold")
        dot.edge(box, nid, style="dashed" if note.style is Mark.FREED else "bold", color="darkorange3")


def _loop_count(core: Core, roll: Roll, copies: dict[str, str]) -> str:
    """`7`, or `5-7` for a loop whose count differs between the steps drawn as one (RL episodes of 5-7 moves)."""
    spread = {nid: span for step_roll in core.steps for nid, span in step_roll.spread.items()}
    for member in roll.nodes:
        span = spread.get(copies.get(member, member))
        if span is not None and span[1]:
            fewest, most = (roll.count * span[0]) // span[1], roll.count * span[1] // span[1]
            return f"{fewest}-{most}" if fewest != most else str(most)
    return str(roll.count)


def _step_label(roll: StepRoll) -> str:
    at = f": backward at line {roll.line}" if roll.line else ""
    numbers, each = roll.numbers, ""
    if roll.optimizer_steps is not None:  # gradient accumulation: optimizer steps, as the step window counts them
        numbers = sorted(set(roll.optimizer_steps))
        calls = Counter(roll.optimizer_steps)
        per = set(calls.values())
        if len(per) == 1:
            k = per.pop()
            each = f", {k} backward call{'s' if k != 1 else ''}{' each' if len(numbers) > 1 else ''}"
        else:
            each = f", {min(calls.values())}-{max(calls.values())} backward calls each"
    if len(numbers) == 1:
        title = f"step {numbers[0]}{each}"
    else:
        title = f"\N{CLOCKWISE OPEN CIRCLE ARROW} step \N{MULTIPLICATION SIGN}{len(numbers)} (steps {steps_text(numbers)}){each}"
    if roll.difference:
        title += f": {roll.difference},"
        at = at.replace(": ", " ", 1)
    return "\n".join([title + at, *roll.notes])


def _header(trace: Trace, script: str | None) -> str:
    parts = []
    if script:
        parts.append(html_label_text(script))
    if not trace.tensors:
        parts.append(html_label_text("the program created no tensors: there is no autograd graph to draw"))
    if trace.window is not None and trace.window.closed:  # the step window: the graph is the window's
        parts.append(html_label_text(trace.window.coverage()))
    unrecorded = trace.unrecorded_threads_summary()
    if unrecorded:  # threads whose calls the graph lacks
        parts.append(html_label_text(unrecorded))
    if trace.exception is not None:
        where = f" at line {trace.exception.location.line}" if trace.exception.location else ""
        first = trace.exception.message.splitlines()[0] if trace.exception.message else ""
        if trace.exception.type in ("SystemExit", "os._exit"):  # an exit, not an error: red only when it failed
            how = "sys.exit" if trace.exception.type == "SystemExit" else "os._exit"
            colour = "red" if trace.exception.exit_code else "gray30"
            text = f"ended by {how}(){where}: exit status {trace.exception.exit_code}"
        else:
            colour, text = "red", f"raised {trace.exception.type}{where}: {shorten(first, 90)}"
        parts.append(f'<FONT COLOR="{colour}">' + html_label_text(text) + "</FONT>")
    return "<BR ALIGN=\"LEFT\"/>".join(parts)


def _where(record: NodeRecord, trace: Trace) -> str:
    if record.created is None:
        return ""
    same = trace.script is not None and Path(trace.script).name == Path(record.created.file).name
    return f"line {record.created.line}" if same else trace.where(record.created.file, record.created.line)


def _emit_autograd_node(
    target: graphviz.Digraph,
    cid: str,
    record: NodeRecord,
    trace: Trace,
    notes: Annotations,
    drawn: _Drawn,
    *,
    big: bool,
    show_saved: bool,
    marks: list[int] | None = None,
) -> None:
    drawn.used.add(Mark.BACKWARD)
    rows = _node_rows(record, trace, big=big, marks=marks)
    attrs: dict[str, str] = {}
    leaf_note = notes.leaves.get(record.variable) if record.variable else None
    if leaf_note is not None and leaf_note.style is Mark.DEAD:
        attrs.update(fillcolor=LEGEND[Mark.DEAD][0], fontcolor="gray45", style="filled,dashed", color="gray55")
    target.node(cid, f"<{'<BR/>'.join(rows)}>", **attrs)

    if record.variable is not None and record.variable in trace.tensors:
        tensor = trace.tensors[record.variable]
        vid = f"{cid}_var"
        style = leaf_note.style if leaf_note else Mark.LEAF
        drawn.used.add(style)
        text = _tensor_label(tensor, name=leaf_note.name if leaf_note else None)
        if leaf_note:
            text += "".join(f"<BR/><I>{html_label_text(line)}</I>" for line in leaf_note.lines)
        extra = {"fontcolor": "gray45", "style": "filled,dashed", "color": "gray55"} if style is Mark.DEAD else {}
        target.node(vid, f"<{text}>", fillcolor=LEGEND[style][0], **extra)
        target.edge(vid, cid)
    _emit_saved(target, cid, record, trace, notes, drawn, big=big, show_saved=show_saved)


def _node_rows(record: NodeRecord, trace: Trace, *, big: bool, marks: list[int] | None) -> list[str]:
    """An autograd node's label lines: its name; module, line and statement; checkpoint; the steps of findings."""
    rows = [f"<B>{html_label_text(record.name)}</B>"]
    detail = "" if is_leaf(record) else _where(record, trace)
    if record.module and not is_leaf(record):
        detail = f"{record.module}  {detail}".strip()
    if record.created is not None and record.created.code and not big and not is_leaf(record):
        code = shorten(statement(record.created.code), 40)  # the statement, not its inline comment
        detail = f"{detail}: {code}" if detail else code
    if detail:
        rows.append(f'<FONT POINT-SIZE="8" COLOR="gray30">{html_label_text(detail)}</FONT>')
    if record.name == _CHECKPOINT:
        rows.append(f'<FONT POINT-SIZE="8" COLOR="blue">{html_label_text(_RECOMPUTED)}</FONT>')
    if marks:
        which = "step" if len(marks) == 1 else "steps"
        rows.append(f'<FONT POINT-SIZE="8" COLOR="red">{html_label_text(f"finding in {which} {steps_text(marks)}")}</FONT>')
    return rows


def _emit_saved(
    target: graphviz.Digraph, cid: str, record: NodeRecord, trace: Trace, notes: Annotations, drawn: _Drawn, *,
    big: bool, show_saved: bool,
) -> None:
    """The node's saved tensors, each in its mark (a finding's, or plain saved), or folded into one box."""
    for saved in shown_saved(record, notes, show_saved, big):
        assert saved.tensor is not None
        tensor = trace.tensors[saved.tensor]
        sid = f"{cid}_s_{quote_id(saved.name)}"
        note = notes.saved.get((record.id, saved.name))
        style = note.style if note else Mark.SAVED
        drawn.used.add(style)
        text = f"{html_label_text(saved.name)}: {_tensor_label(tensor)}"
        if note:
            text += "".join(f"<BR/><B>{html_label_text(line)}</B>" for line in note.lines)
        extra = {"fontcolor": "white"} if style in (Mark.POISONED, Mark.DETACHED_SAVED) else {}
        target.node(sid, f"<{text}>", fillcolor=LEGEND[style][0], **extra)
        target.edge(cid, sid, dir="none")
    folded = folded_saved(record, notes, show_saved, big)
    if folded:
        drawn.used.add(Mark.SAVED)
        text = f"{folded} tensors saved for backward"
        target.node(f"{cid}_saved", f"<{html_label_text(text)}>", fillcolor=LEGEND[Mark.SAVED][0])
        target.edge(cid, f"{cid}_saved", dir="none")


def _tensor_label(tensor: TensorRecord, *, name: str | None = None) -> str:
    shape = "(" + ", ".join(str(s) for s in tensor.shape) + ")"
    label = name or tensor.parameter or (tensor.names[0] if tensor.names else None)
    if label is None:  # unnamed: torchviz shows only the shape
        return html_label_text(shape)
    return html_label_text(f"{label}\n{shape}")


def _group_label(cnode: CoreNode, nodes: dict[str, NodeRecord]) -> str:
    names = Counter(nodes[m].name for m in cnode.members if m in nodes and not is_leaf(nodes[m]))
    params = sum(1 for m in cnode.members if m in nodes and is_leaf(nodes[m]))
    ops = sum(names.values())
    kinds = [f"{n} \N{MULTIPLICATION SIGN}{c}" if c > 1 else n for n, c in names.most_common(3)]
    if len(names) > 3:
        kinds.append("\N{HORIZONTAL ELLIPSIS}")
    top = ", ".join(kinds)
    lines = [f"<B>{html_label_text(cnode.module or cnode.name)}</B>"]
    detail = f"{ops} op{'s' if ops != 1 else ''}" + (f", {params} param{'s' if params != 1 else ''}" if params else "")
    lines.append(f'<FONT POINT-SIZE="8">{html_label_text(detail)}</FONT>')
    if len(top) > GROUP_LINE:  # a kind a line: side by side at a shallow depth, long lines make the picture wide
        top = ",\n".join(kinds)
    if top:
        lines.append(f'<FONT POINT-SIZE="8" COLOR="gray30">{html_label_text(top)}</FONT>')
    if _CHECKPOINT in names:
        lines.append(f'<FONT POINT-SIZE="8" COLOR="blue">{html_label_text(_RECOMPUTED)}</FONT>')
    return "<BR/>".join(lines)


def _homes(core: Core, copies: dict[str, str]) -> dict[str, str]:
    """Where each autograd node ended up: itself, its loop representative, its group, a summary."""
    home: dict[str, str] = {}
    for cid, cnode in core.nodes.items():
        home[copies.get(cid, cid)] = cid
        for member in cnode.members:
            home.setdefault(member, cid)
    for other, rep in core.step_home.items():  # a node of a repeated step: drawn as its representative
        if rep in home:
            home.setdefault(other, home[rep])
    return home


def _entered_by_cuts(notes: Annotations, core: Core, copies: dict[str, str], box_of: dict[str, int]) -> set[int]:
    """The step boxes a cut edge from outside enters (a GAN's `fake.detach()` into the discriminator's step)."""
    home = _homes(core, copies)
    entered = set()
    for cut in notes.cuts:
        src = home.get(cut.source) if cut.source else None
        dst = home.get(cut.target) if cut.target else None
        if src is not None and dst is not None and dst in box_of and box_of.get(src) != box_of[dst]:
            entered.add(box_of[dst])
    return entered


def _emit_cuts(
    dot: graphviz.Digraph, trace: Trace, notes: Annotations, core: Core, copies: dict[str, str], drawn: _Drawn,
    box_of: dict[str, int] | None = None,
) -> None:
    home = _homes(core, copies)
    seen: set[tuple[str, str, str]] = set()
    for i, cut in enumerate(notes.cuts):
        src = home.get(cut.source) if cut.source else None
        if src is None:
            continue
        if cut.target is not None and cut.target in home:
            dst = home[cut.target]
        else:
            dst = f"cut{i}"
            alias = trace.tensors.get(cut.alias) if cut.alias else None
            text = _tensor_label(alias) if alias else html_label_text("detached value")
            drawn.used.add(Mark.UNUSED_ALIAS)
            dot.node(dst, f"<{text}>", fillcolor="white", style="filled,dashed", color="red")
        key = (src, dst, cut.label)
        if key in seen:
            continue
        seen.add(key)
        drawn.used.add(Mark.CUT)
        text = f"<{html_label_text(cut.label)}>"
        # an edge into another step's box enters it under the box's title, where a label at the middle of a short
        # edge would sit on the title: a longer edge puts its label a level above the box, outside it
        extra = {"minlen": "2"} if (box_of or {}).get(src) != (box_of or {}).get(dst) else {}
        dot.edge(src, dst, label=text, style="dashed", color="red", fontcolor="red", penwidth="1.5", **extra)


# the legend's size in points, from its 9 pt monospace text: a character's advance (DejaVu Sans Mono: 0.602 em), a
# row (the line, the cell padding and border), the swatch column with its padding and borders
_LEGEND_CHAR = 9 * 0.61
_LEGEND_ROW = 9 * 1.2 + 2 * 3 + 1
_LEGEND_SWATCH = 24 + 2 * 3 + 2 + 2 * 3 + 2


def _emit_title(dot: graphviz.Digraph, header: str, drawn: _Drawn, summary: list[str]) -> None:
    """The graph's label at its top left: the header, and under it the legend of the marks used. A legend drawn as a
    node would sit beside the top rank, as wide again as itself beside a short picture (depth 0); under the header
    it widens only a picture narrower than itself."""
    rows = []
    for key, (colour, text) in LEGEND.items():
        if key not in drawn.used:
            continue
        if key in (Mark.CUT, Mark.CARRIED):
            swatch = f'<TD><FONT COLOR="{colour}">- - -</FONT></TD>'
        else:
            swatch = f'<TD BGCOLOR="{colour}" WIDTH="24"> </TD>'
        rows.append(f'<TR>{swatch}<TD ALIGN="LEFT">{html_label_text(text)}</TD></TR>')
    for line in summary:
        rows.append(f'<TR><TD COLSPAN="2" ALIGN="LEFT"><I>{html_label_text(line)}</I></TD></TR>')
    if not rows:
        if header:
            dot.attr(label=f"<{header}>", labelloc="t", labeljust="l")
        return
    legend = '<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">' + "".join(rows) + "</TABLE>"
    # dot stretches a table to the width of its cell, here the header's (a long "raised RuntimeError ..." line would
    # make each swatch half the picture wide): the legend's cell is sized to the legend, the font being monospace
    longest = max([len(text) for key, (_, text) in LEGEND.items() if key in drawn.used] + [0])
    width = max(_LEGEND_SWATCH + longest * _LEGEND_CHAR, max((len(line) for line in summary), default=0) * _LEGEND_CHAR)
    height = len(rows) * _LEGEND_ROW
    cells = [f'<TR><TD ALIGN="LEFT" BALIGN="LEFT">{header}</TD></TR>'] if header else []
    cells.append(
        f'<TR><TD ALIGN="LEFT" FIXEDSIZE="TRUE" WIDTH="{ceil(width) + 8}" HEIGHT="{ceil(height) + 2}">'
        f'<FONT POINT-SIZE="9">{legend}</FONT></TD></TR>'
    )
    table = '<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="4" CELLPADDING="0">' + "".join(cells) + "</TABLE>"
    dot.attr(label=f"<{table}>", labelloc="t", labeljust="l", fontsize="11", fontname=FONT)
