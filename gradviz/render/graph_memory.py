"""The graph-memory view: a matplotlib chart of the live autograd nodes and the bytes their saved tensors hold."""

from __future__ import annotations

import io
import textwrap
from typing import TYPE_CHECKING, Any

from ..analysis.lifetime import size_text
from ..analysis.memory_profile import MemoryProfile, memory_profile
from ..picture.headline import headline

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..model import Trace
    from ..picture.picture import Picture

IMAGE_FORMATS = ("svg", "png", "pdf")


def graph_memory_image(trace: Trace, findings: list[Finding], fmt: str, picture: Picture | None = None) -> bytes:
    """The chart as `fmt` (svg, png or pdf) bytes. Matplotlib is imported here only, with a non-GUI canvas."""
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"the graph-memory view draws {', '.join(IMAGE_FORMATS)}, not {fmt!r}")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    profile = picture.memory_profile if picture is not None else memory_profile(trace)
    figure = Figure(figsize=(9, 4.8), dpi=100)
    FigureCanvasAgg(figure)  # a canvas of our own: never pyplot, never the program's backend
    axes = figure.add_subplot(1, 1, 1)
    xs = [0] + [seq for seq, _ in profile.points] + [profile.end]
    ys = [0] + [size for _, size in profile.points] + [profile.points[-1][1] if profile.points else 0]
    scale, unit = _unit(max(ys))
    axes.step(xs, [y / scale for y in ys], where="post", color="#d62728", linewidth=1.8, label="saved tensors held")
    axes.fill_between(xs, [y / scale for y in ys], step="post", color="#d62728", alpha=0.12)
    for seq, _line in profile.backwards:
        axes.axvline(seq, color="#888888", linewidth=0.6, linestyle=":")
    _live_nodes(axes, profile)
    _x_axis(axes, trace, profile)
    _marks(axes, profile, scale)
    axes.set_ylim(bottom=0, top=max(max(ys) / scale * 1.7, 1))  # room above the curve for the holders box
    axes.set_xlim(0, max(profile.end, 1))
    axes.set_ylabel(f"saved tensors held by live graphs ({unit})", color="#d62728")
    # the headline wrapped, left-aligned above the legend: one line of it was wider than the figure and clipped
    axes.set_title(_wrapped(_drawable(headline(trace, profile)), 70), fontsize=10, loc="left", pad=22)
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    buffer = io.BytesIO()
    from matplotlib import rc_context

    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "gradviz"}):  # real, searchable text; stable ids
        figure.savefig(buffer, format=fmt, metadata=_metadata(fmt))
    return buffer.getvalue()


def _live_nodes(axes: Any, profile: MemoryProfile) -> None:
    """The live autograd nodes on a second axis, and one legend for both curves."""
    nodes_axis = axes.twinx()  # what a kept-alive graph grows by even when backward freed its saved tensors
    node_xs = [0] + [seq for seq, _ in profile.live_nodes] + [profile.end]
    node_ys = [0] + [n for _, n in profile.live_nodes] + [profile.live_nodes[-1][1] if profile.live_nodes else 0]
    nodes_axis.step(node_xs, node_ys, where="post", color="#1f77b4", linewidth=1.4, label="live autograd nodes")
    nodes_axis.set_ylim(bottom=0, top=max(max(node_ys) * 1.7, 1))
    nodes_axis.set_ylabel("live autograd nodes", color="#1f77b4")
    nodes_axis.tick_params(axis="y", colors="#1f77b4")
    handles = axes.get_legend_handles_labels()[0] + nodes_axis.get_legend_handles_labels()[0]
    # above the plot, right: inside it, it covered the holders box and the curves
    axes.legend(handles=handles, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, fontsize=8, frameon=False)


def _x_axis(axes: Any, trace: Trace, profile: MemoryProfile) -> None:
    """x reads in training steps when backward ran, else in program order."""
    if profile.backwards:
        # a tick at each backward (every k-th when there are many)
        every = max(1, len(profile.backwards) // 12)
        run = trace.run_steps()  # a step traced again after the window is labelled with its number in the run
        ticks = [(seq, str(run.get(seq, n))) for n, (seq, _) in enumerate(profile.backwards, start=1)
                 if n % every == 0 or n == 1 or (seq in run and run[seq] - 1 not in run.values())]
        axes.set_xticks([seq for seq, _ in ticks], [label for _, label in ticks])
        lines = sorted({line for _, line in profile.backwards if line is not None})
        where = f" at line {', '.join(map(str, lines[:3]))}" if lines else ""
        axes.set_xlabel(_wrapped(f"step: backward call number{where} (dotted lines); program order in between"))
    else:
        axes.set_xlabel("program order (no backward ran: nothing freed the saved tensors)")


def _marks(axes: Any, profile: MemoryProfile, scale: float) -> None:
    """The peak, each kept-alive graph's note, and the holders at the peak."""
    if profile.peak is not None:
        seq, size = profile.peak
        axes.plot([seq], [size / scale], marker="v", color="black")
        near_end = seq > 0.85 * max(profile.end, 1)  # centred there, it ran over the right axis
        axes.annotate(f"peak {size_text(size)}", (seq, size / scale), xytext=(0, 8), textcoords="offset points",
                      ha="right" if near_end else "center", fontsize=9, fontweight="bold")
    for seq, line, per_step, nodes, per in profile.kept:
        grows = f"+{size_text(per_step)}" if per_step else f"+{nodes} nodes"
        # the note sits inside the plot, in its middle: placed off the point it ran over the right axis' labels
        axes.annotate(
            _wrapped(f"graph_kept_alive: line {line} keeps every {per}'s graph ({grows} per {per})", 40),
            (seq, _height_at(profile.points, seq) / scale),
            xytext=(0.5, 0.62), textcoords="axes fraction", ha="center", fontsize=8, color="#9c5700",
            bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85, "edgecolor": "#e0c090"},
            arrowprops={"arrowstyle": "->", "color": "#9c5700"},
        )
    if profile.top_holders:
        held = ["held at the peak:"] + [f"{size_text(b):>9}  {_drawable(where)}" for where, b in profile.top_holders]
        axes.text(0.01, 0.98, "\n".join(held), transform=axes.transAxes, va="top", ha="left", fontsize=7,
                  family="monospace", bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85, "edgecolor": "#cccccc"})


def _wrapped(text: str, width: int = 90) -> str:
    """`text` in lines of at most `width` characters, so that no label runs past the figure or over an axis."""
    return "\n".join(textwrap.wrap(text, width)) or text


def _drawable(text: str) -> str:
    """Text fonts can draw: an undecodable file name's lone surrogates become `\\udcff` escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _metadata(fmt: str) -> dict[str, str | None]:
    # no creation date: the same trace gives the same file
    return {"Date": None} if fmt == "svg" else {"CreationDate": None} if fmt == "pdf" else {}


def _unit(largest: int) -> tuple[float, str]:
    for scale, unit in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
        if largest >= scale:
            return float(scale), unit
    return 1.0, "B"


def _height_at(points: list[tuple[int, int]], seq: int) -> int:
    height = 0
    for at, size in points:
        if at > seq:
            break
        height = size
    return height
