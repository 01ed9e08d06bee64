"""gradviz: see what autograd and memory are really doing in a PyTorch program."""

from __future__ import annotations

from typing import Any

from .model import Event, EventKind, Location, Trace

__version__ = "0.1.0"

__all__ = [
    "Event",
    "EventKind",
    "Location",
    "Trace",
    "__version__",
    "diagnose",
    "trace",
    "trace_script",
]


def __getattr__(name: str) -> Any:
    # torch is heavy: import the tracer (and with it torch) only when it is asked for
    if name in ("trace", "trace_script"):
        from . import tracer

        return getattr(tracer, name)
    if name in ("diagnose", "Finding", "FindingKind", "Severity"):
        from . import analysis

        return getattr(analysis, name)
    raise AttributeError(f"module 'gradviz' has no attribute {name!r}")
