"""One closed vocabulary of marks (`Mark`), what each finding kind marks (`MARK_OF_KIND`), and one palette and
legend table: the colour of each mark and severity, read by the graph, memory and timeline views (DOT), by the
annotations, and by the page, whose CSS variables and legend are generated from it when a page is made."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ..analysis.findings import FindingKind

__all__ = [
    "MARK_OF_KIND", "NODE_MARKS", "PAGE_LEGEND", "PALETTE", "SAVED_MARKS", "SEVERITIES", "Mark", "Swatch", "css_variables",
    "page_legend",
]


class Mark(str, enum.Enum):
    """Every mark a view draws: a node, tensor, box or edge's meaning. Its value is the name the legends, the page's
    CSS classes (`gv-mark-poisoned`, `--poisoned`) and the page document's `kind` and `mark` fields use."""

    BACKWARD = "backward"
    LEAF = "leaf"
    OUTPUT = "output"
    SAVED = "saved"
    POISONED = "poisoned"
    DETACHED_SAVED = "detached_saved"
    CORRUPTED = "corrupted"
    CORRUPTED_UNREAD = "corrupted_unread"
    DEAD = "dead"
    UPDATED = "updated"
    UNUSED_ALIAS = "unused_alias"
    GROUP = "group"
    SUMMARY = "summary"
    ROLL = "roll"
    STEP = "step"
    CUT = "cut"
    CARRIED = "carried"
    KEPT = "kept"
    FREED = "freed"
    SILENT = "silent"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:  # f"{mark}" is its name on every Python (3.11 would say Mark.DEAD)
        return format(self.value, spec)


#: What each finding kind marks, in every medium: the saved tensor, the leaf, the holder box, the cut edge.
MARK_OF_KIND: dict[FindingKind, Mark] = {
    FindingKind.POISONED_SAVED_TENSOR: Mark.POISONED,  # red: backward raises
    FindingKind.DETACH_INPLACE_SAVED: Mark.DETACHED_SAVED,
    FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR: Mark.CORRUPTED,  # magenta: backward succeeds with wrong gradients
    FindingKind.UPDATE_WITHOUT_GRADIENT: Mark.UPDATED,
    FindingKind.DEAD_PARAMETER: Mark.DEAD,
    FindingKind.CUT_EDGE: Mark.CUT,
    FindingKind.GRAPH_KEPT_ALIVE: Mark.KEPT,  # the value holding many steps' graphs
    FindingKind.BACKWARD_THROUGH_FREED_GRAPH: Mark.FREED,
}

#: The marks a saved tensor can carry (the annotations; the page document's `mark` field).
SAVED_MARKS = (Mark.CORRUPTED, Mark.POISONED, Mark.DETACHED_SAVED, Mark.CORRUPTED_UNREAD)
#: The marks an autograd node can carry besides a plain op (the page document's node `kind`, beside "op").
NODE_MARKS = (Mark.LEAF, Mark.OUTPUT, Mark.DEAD, Mark.UPDATED, Mark.KEPT, Mark.FREED)


@dataclass(frozen=True)
class Swatch:
    """How one meaning is drawn: `colour` (as DOT writes it: an X11 name or #rrggbb), `line` (outline or text,
    when it differs), `tint` (a light fill behind something outlined in `colour`), what the legend says, and the
    same colour for CSS when DOT's name is not a CSS one."""

    colour: str
    legend: str = ""
    line: str | None = None
    tint: str | None = None
    css: str | None = None

    @property
    def css_colour(self) -> str:
        return self.css or self.colour


#: Every mark, by the name the graph view's legend and the page's CSS classes use (`gv-mark-poisoned`, `--poisoned`).
PALETTE: dict[Mark, Swatch] = {
    Mark.BACKWARD: Swatch("lightgrey", "backward node (grad_fn)"),
    Mark.LEAF: Swatch("lightblue", "leaf tensor or parameter: receives .grad"),
    Mark.OUTPUT: Swatch("darkolivegreen1", "output: backward starts here", css="#caff70"),
    Mark.SAVED: Swatch("orange", "tensor saved for backward", line="#b36b00", tint="#fff6e5"),
    Mark.POISONED: Swatch("#ff6666", "saved tensor changed in place: backward raises", tint="#ffe3e3"),
    Mark.DETACHED_SAVED: Swatch("#ff6666", "saved input detached in place: backward raises", tint="#ffe3e3"),
    Mark.CORRUPTED: Swatch("orchid", "saved tensor's bytes changed, version unchanged: gradient silently wrong",
                          tint="#f9e3f8"),
    # --verify measured the same write and found the gradients identical (the backward does not read what changed)
    Mark.CORRUPTED_UNREAD: Swatch("thistle", "saved tensor's bytes changed, version unchanged: --verify measured "
                                  "gradients identical", tint="#f4eef6"),
    Mark.DEAD: Swatch("#eeeeee", "parameter that never receives a gradient", line="gray55", css="#eeeeee"),
    Mark.UPDATED: Swatch("gold", "parameter updated without a gradient", tint="#fff6cc"),
    Mark.UNUSED_ALIAS: Swatch("white", "detached value not used by any op that needs grad"),
    Mark.GROUP: Swatch("#f5ecd7", "collapsed nn.Module call"),
    Mark.SUMMARY: Swatch("white", "part of the graph not shown (max_nodes)"),
    Mark.ROLL: Swatch("#eef4ff", "loop body drawn once for all its iterations"),
    Mark.STEP: Swatch("#f3faee", "training step (backward call) drawn once for all steps of the same graph"),
    Mark.CUT: Swatch("red", "gradient path cut by .detach() / .data (dashed)", tint="#ffe8e8"),
    Mark.CARRIED: Swatch("blue", "value carried from the previous iteration (dashed)"),
    Mark.KEPT: Swatch("#ffd8a8", "value keeping the graphs of many steps alive (graph_kept_alive)", line="#d9822b",
                      tint="#fff1e0"),
    Mark.FREED: Swatch("#ffcccc", "graph an earlier backward freed, built on again (dashed)", line="#cc4444",
                       tint="#ffecec"),
    # a write that changed bytes and left the version where it was (`.data`): the memory view, timeline and page
    Mark.SILENT: Swatch("#a0309a", "in-place write the version counter did not notice"),
}

#: Finding severities: the accent (`colour`) and the row or line fill behind it (`tint`).
SEVERITIES: dict[str, Swatch] = {
    "error": Swatch("#c62828", tint="#fde3e3"),
    "warning": Swatch("#b26a00", tint="#fff1cc"),
    "info": Swatch("#1f6fbf", tint="#e3eefc"),
}

#: The marks the page colours its graph nodes and rows with.
_PAGE_MARKS = (Mark.BACKWARD, Mark.LEAF, Mark.OUTPUT, Mark.POISONED, Mark.CORRUPTED, Mark.CORRUPTED_UNREAD, Mark.DEAD,
               Mark.UPDATED, Mark.KEPT, Mark.GROUP, Mark.STEP, Mark.ROLL, Mark.SILENT)


def css_variables() -> str:
    """The palette as the page's CSS custom properties (`:root { --error: ...; --poisoned: ... }`)."""
    declarations = []
    for name, swatch in SEVERITIES.items():
        declarations.append(f"--{name}: {swatch.css_colour}; --{name}-fill: {swatch.tint};")
    for name in _PAGE_MARKS:
        declarations.append(f"--{name.value}: {PALETTE[name].css_colour};")
    return ":root { " + " ".join(declarations) + " }"


#: The marks the page's legend names from this table (explorer/assets/panels/legend.js; the rest are the page's own:
#: a faded future, a search match, a picked finding's outline).
PAGE_LEGEND = (Mark.OUTPUT, Mark.LEAF, Mark.DEAD, Mark.UPDATED, Mark.KEPT, Mark.CORRUPTED, Mark.CORRUPTED_UNREAD,
               Mark.POISONED, Mark.DETACHED_SAVED, Mark.GROUP, Mark.CUT, Mark.FREED)


def page_legend() -> dict[str, str]:
    """What the page's legend says of each mark it shares with the static views: the same words as their legends."""
    return {mark.value: PALETTE[mark].legend for mark in PAGE_LEGEND}
