"""gradviz: see what autograd and memory are really doing in a PyTorch program."""

from __future__ import annotations

from typing import Any

from .torch_support import check_installed

check_installed()  # before anything else: an unsupported torch is refused with one line

from . import tracefile  # noqa: F401 - they lend the trace its JSON methods and notebook display
from .integrations import notebook  # noqa: F401
from .model import Event, EventKind, ExceptionRecord, Location, ProgramError, Trace
from .render import Diagram, render  # the function shadows the subpackage name on purpose
from .render.views import PAGES
from .version import __version__

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


def _explorer_page(trace: Trace, findings: Any, picture: Any) -> str:
    from .explorer import explorer_html  # lazily: the page's modules and assets are loaded only when a page is made

    return explorer_html(trace, findings, picture=picture)


PAGES.make = _explorer_page  # the report view: render draws the images, the explorer makes the page


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext gradviz`: registers the `%%gradviz` cell magic (IPython is imported only here)."""
    from .integrations.notebook import load_ipython_extension as load

    load(ipython)


def _get_sg_image_scraper() -> Any:
    """sphinx-gallery's hook: `image_scrapers: ("gradviz",)` uses this scraper."""
    from .integrations.sphinx import scraper

    return scraper


def __getattr__(name: str) -> Any:
    # torch is heavy: import the tracer (and with it torch) only when it is asked for
    if name in ("trace", "trace_module", "trace_script"):
        from . import tracer

        return getattr(tracer, name)
    if name in ("diagnose", "Finding", "FindingKind", "Severity"):
        from . import analysis

        return getattr(analysis, name)
    if name in ("make_dot", "draw"):
        from .integrations import compat

        return getattr(compat, name)
    raise AttributeError(f"module 'gradviz' has no attribute {name!r}")
