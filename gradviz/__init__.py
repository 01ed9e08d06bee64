"""gradviz: see what autograd and memory are really doing in a PyTorch program."""

from __future__ import annotations

from typing import Any

from .model import Event, EventKind, ExceptionRecord, Location, ProgramError, Trace
from .render import Diagram, draw, render  # the function shadows the subpackage name on purpose


__version__ = "0.1.0"

__all__ = [
    "Event",
    "EventKind",
    "ExceptionRecord",
    "Location",
    "Trace",
    "__version__",
    "Diagram",
    "diagnose",
    "draw",
    "load_ipython_extension",
    "make_dot",
    "ProgramError",
    "render",
    "trace",
    "trace_module",
    "trace_script",
]


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext gradviz`: registers the `%%gradviz` cell magic (IPython is imported only here)."""
    from .notebook import load_ipython_extension as load

    load(ipython)


def _get_sg_image_scraper() -> Any:
    """sphinx-gallery's hook: `image_scrapers: ("gradviz",)` uses this scraper."""
    from .sphinx import scraper

    return scraper


def __getattr__(name: str) -> Any:
    # torch is heavy: import the tracer (and with it torch) only when it is asked for
    if name in ("trace", "trace_module", "trace_script"):
        from . import tracer

        return getattr(tracer, name)
    if name in ("diagnose", "Finding", "FindingKind", "Severity"):
        from . import analysis

        return getattr(analysis, name)
    if name == "make_dot":
        from .compat import make_dot

        return make_dot
    raise AttributeError(f"module 'gradviz' has no attribute {name!r}")
