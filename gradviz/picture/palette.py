"""One palette and legend table: the colour of each mark and severity, read by the graph, memory and timeline
views (DOT) and by the page, whose CSS variables are generated from it when a page is made."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PALETTE", "SEVERITIES", "Swatch", "css_variables", "page_legend"]


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
PALETTE: dict[str, Swatch] = {
    "backward": Swatch("lightgrey", "backward node (grad_fn)"),
    "leaf": Swatch("lightblue", "leaf tensor or parameter: receives .grad"),
    "output": Swatch("darkolivegreen1", "output: backward starts here", css="#caff70"),
    "saved": Swatch("orange", "tensor saved for backward", line="#b36b00", tint="#fff6e5"),
    "poisoned": Swatch("#ff6666", "saved tensor changed in place: backward raises", tint="#ffe3e3"),
    "detached_saved": Swatch("#ff6666", "saved input detached in place: backward raises", tint="#ffe3e3"),
    "corrupted": Swatch("orchid", "saved tensor's bytes changed, version unchanged: gradient silently wrong",
                        tint="#f9e3f8"),
    # --verify measured the same write and found the gradients identical (the backward does not read what changed)
    "corrupted_unread": Swatch("thistle", "saved tensor's bytes changed, version unchanged: --verify measured "
                               "gradients identical", tint="#f4eef6"),
    "dead": Swatch("#eeeeee", "parameter that never receives a gradient", line="gray55", css="#eeeeee"),
    "updated": Swatch("gold", "parameter updated without a gradient", tint="#fff6cc"),
    "unused_alias": Swatch("white", "detached value not used by any op that needs grad"),
    "group": Swatch("#f5ecd7", "collapsed nn.Module call"),
    "summary": Swatch("white", "part of the graph not shown (max_nodes)"),
    "roll": Swatch("#eef4ff", "loop body drawn once for all its iterations"),
    "step": Swatch("#f3faee", "training step (backward call) drawn once for all steps of the same graph"),
    "cut": Swatch("red", "gradient path cut by .detach() / .data (dashed)", tint="#ffe8e8"),
    "carried": Swatch("blue", "value carried from the previous iteration (dashed)"),
    "kept": Swatch("#ffd8a8", "value keeping the graphs of many steps alive (graph_kept_alive)", line="#d9822b",
                  tint="#fff1e0"),
    "freed": Swatch("#ffcccc", "graph an earlier backward freed, built on again (dashed)", line="#cc4444",
                   tint="#ffecec"),
    # a write that changed bytes and left the version where it was (`.data`): the memory view, timeline and page
    "silent": Swatch("#a0309a", "in-place write the version counter did not notice"),
}

#: Finding severities: the accent (`colour`) and the row or line fill behind it (`tint`).
SEVERITIES: dict[str, Swatch] = {
    "error": Swatch("#c62828", tint="#fde3e3"),
    "warning": Swatch("#b26a00", tint="#fff1cc"),
    "info": Swatch("#1f6fbf", tint="#e3eefc"),
}

#: The marks the page colours its graph nodes and rows with.
_PAGE_MARKS = ("backward", "leaf", "output", "poisoned", "corrupted", "dead", "updated", "kept", "group", "step", "roll",
               "silent")


def css_variables() -> str:
    """The palette as the page's CSS custom properties (`:root { --error: ...; --poisoned: ... }`)."""
    declarations = []
    for name, swatch in SEVERITIES.items():
        declarations.append(f"--{name}: {swatch.css_colour}; --{name}-fill: {swatch.tint};")
    for name in _PAGE_MARKS:
        declarations.append(f"--{name}: {PALETTE[name].css_colour};")
    return ":root { " + " ".join(declarations) + " }"


#: The marks the page's legend names from this table (explorer/assets/panels/legend.js; the rest are the page's own:
#: a faded future, a search match, a picked finding's outline).
_PAGE_LEGEND = ("output", "leaf", "dead", "updated", "kept", "corrupted", "poisoned", "detached_saved", "group", "cut",
                "freed")


def page_legend() -> dict[str, str]:
    """What the page's legend says of each mark it shares with the static views: the same words as their legends."""
    return {name: PALETTE[name].legend for name in _PAGE_LEGEND}
