"""What graph-lifetime analysis needs from the tracer: when the program stopped running, so tensors released with
its variables afterwards count as alive at its end (the loop variable, `total_loss`, a list of losses)."""

from __future__ import annotations

from typing import Any


def mark_end(recorder: Any) -> None:
    """Called when tracing stops, before the program's namespace is let go: a seq of its own marks the end."""
    if recorder.trace.ended is None:
        recorder.trace.ended = next(recorder._seq)
