"""sphinx-gallery image scraper: the gradviz diagrams (and traces) an example block created become its images.

Use it in a Sphinx `conf.py`::

    sphinx_gallery_conf = {..., "image_scrapers": ("gradviz.sphinx.scraper",)}
    # or ("gradviz",) once gradviz exposes _get_sg_image_scraper, or the `scraper` object itself

Each block's new `Diagram` objects are saved as SVG (graph, memory and timeline views); a `Trace` with no
Diagram drawn from it is drawn as its graph view. Set `gallery_conf["gradviz_image_format"] = "png"` for PNG.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["scraper", "scrape_objects"]

# what this scraper already saved for the current example, kept in the example's own block_vars
_SEEN_KEY = "_gradviz_scraped"
_FORMATS = ("svg", "png")


def scrape_objects(namespace: dict[str, Any], seen: list[Any]) -> list[Any]:
    """The Diagrams to save from `namespace`, in definition order, that are not in `seen` (compared by identity).

    A Trace counts when no Diagram in `namespace` shows it; it is drawn as its graph view.
    """
    from .model import Trace
    from .render import Diagram

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

    from .model import Trace
    from .render import render

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
    return figure_rst(paths, gallery_conf["src_dir"])
