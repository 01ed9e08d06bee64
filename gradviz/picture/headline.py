"""The graph-memory headline: the one line the chart (render/graph_memory.py) and the page's chart both show."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis.lifetime import size_text
from ..analysis.memory_profile import MemoryProfile, memory_profile

if TYPE_CHECKING:
    from ..model import Trace

__all__ = ["headline"]


def headline(trace: Trace, profile: MemoryProfile | None = None) -> str:
    """One line a newcomer reads at a glance: the peak, and what grows by how much per step, held by which line."""
    profile = memory_profile(trace) if profile is None else profile
    peak = f"peak {size_text(profile.peak[1])}" if profile.peak else "no saved tensors held"
    if profile.kept:
        _seq, line, per_step, nodes, unit = profile.kept[0]
        grows = f"+{nodes} live autograd nodes" + (f" and +{size_text(per_step)} saved" if per_step else "")
        return f"Graph memory grows by {grows} per {unit}, held by line {line}; saved tensors: {peak}"
    return f"Graph memory: saved tensors {peak}; no graph outlives its step"
