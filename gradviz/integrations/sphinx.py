"""sphinx-gallery image scraper: the gradviz diagrams (and traces) an example block created become its images.

Use it in a Sphinx `conf.py`::

    sphinx_gallery_conf = {..., "image_scrapers": ("gradviz",)}  # (gradviz._get_sg_image_scraper returns `scraper`)
    # or the `scraper` object itself

Each block's new `Diagram` objects are saved as SVG (graph, memory and timeline views); a `Trace` with no
Diagram drawn from it is drawn as its graph view. Set `gallery_conf["gradviz_image_format"] = "png"` for PNG.

A plain example script (`plot_*.py` that uses torch and makes no Diagram or Trace itself, as in gradviz's own
gallery) is traced after its last block: the script is run again under the tracer, as `gradviz render` runs it
(its output discarded; the first `gradviz_steps` optimizer steps, default 100, then it is stopped there), and
drawn in the views of `gallery_conf["gradviz_views"]` (default `("graph",)`).
"""

from __future__ import annotations

import contextlib
import io
import types
from pathlib import Path
from typing import Any

__all__ = ["scraper", "scrape_objects", "trace_plain_example"]

# what this scraper already saved for the current example, kept in the example's own block_vars
_SEEN_KEY = "_gradviz_scraped"
_FORMATS = ("svg", "png")


def scrape_objects(namespace: dict[str, Any], seen: list[Any]) -> list[Any]:
    """The Diagrams to save from `namespace`, in definition order, that are not in `seen` (compared by identity).

    A Trace counts when no Diagram in `namespace` shows it; it is drawn as its graph view.
    """
    from ..model import Trace
    from ..render import Diagram

    diagrams = [v for v in namespace.values() if isinstance(v, Diagram) and v.digraph is not None]
    drawn_traces = [d.trace for d in diagrams]
    found: list[Any] = []
    for value in namespace.values():
        if any(value is s for s in seen) or any(value is f for f in found):
            continue
        if isinstance(value, Diagram) and value.digraph is not None:
            found.append(value)
        elif isinstance(value, Trace) and not any(value is t for t in drawn_traces):
            found.append(value)
    return found


def scraper(block: Any, block_vars: dict[str, Any], gallery_conf: dict[str, Any], **kwargs: Any) -> str:
    """sphinx-gallery's scraper protocol: save this block's new gradviz diagrams, return their rST."""
    from sphinx_gallery.scrapers import figure_rst

    from ..model import Trace
    from ..render import render

    fmt = str(gallery_conf.get("gradviz_image_format", "svg")).lower()
    if fmt not in _FORMATS:
        raise ValueError(f"gradviz_image_format {fmt!r} is not supported; choose one of {', '.join(_FORMATS)}")
    seen: list[Any] = block_vars.setdefault(_SEEN_KEY, [])
    paths: list[Path] = []
    for value in scrape_objects(block_vars["example_globals"], seen):
        seen.append(value)
        diagram = render(value, "graph") if isinstance(value, Trace) else value
        path = Path(next(block_vars["image_path_iterator"])).with_suffix(f".{fmt}")
        diagram.save(path)
        paths.append(path)
    if not seen and _is_plain_torch_example(block, block_vars):
        for diagram in trace_plain_example(block_vars["src_file"], gallery_conf):
            path = Path(next(block_vars["image_path_iterator"])).with_suffix(f".{fmt}")
            diagram.save(path)
            paths.append(path)
            seen.append(diagram)
    rst: str = figure_rst(paths, gallery_conf["src_dir"])
    return rst


def trace_plain_example(src_file: str | Path, gallery_conf: dict[str, Any] | None = None) -> list[Any]:
    """Run a plain example script under the tracer, as `gradviz render` would, and draw it: one Diagram per view
    of `gradviz_views` (default: the graph view). Its printed output is discarded (sphinx-gallery already showed
    the first run's)."""
    from ..analysis import diagnose
    from ..render import VIEWS, render
    from ..tracer import trace_script

    conf = gallery_conf or {}
    views = tuple(conf.get("gradviz_views", ("graph",)))
    unknown = [v for v in views if v not in VIEWS or v == "report"]
    if unknown:
        raise ValueError(f"gradviz_views: {unknown[0]!r} is not a picture view; choose from "
                         + ", ".join(v for v in VIEWS if v != "report"))
    steps = int(conf.get("gradviz_steps", 100))
    discarded = io.StringIO()
    with contextlib.redirect_stdout(discarded), contextlib.redirect_stderr(discarded):
        trace = trace_script(Path(src_file), steps=steps, stop_after=True)
    findings = diagnose(trace)
    return [render(trace, view, findings=findings) for view in views]


def _is_plain_torch_example(block: Any, block_vars: dict[str, Any]) -> bool:
    """True at the last code block of an example that imported torch and made no gradviz object of its own."""
    src_file = block_vars.get("src_file")
    if not src_file or getattr(block, "type", "code") != "code":
        return False
    namespace = block_vars.get("example_globals", {})
    if not any(isinstance(v, types.ModuleType) and v.__name__.split(".")[0] == "torch" for v in namespace.values()):
        return False
    from sphinx_gallery.py_source_parser import split_code_and_text_blocks

    blocks = split_code_and_text_blocks(src_file)[1]
    last = max((b.lineno for b in blocks if b.type == "code"), default=None)
    return last is not None and getattr(block, "lineno", last) == last
