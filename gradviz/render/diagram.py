"""`Diagram`: one rendered view of a trace, saved to a file whose suffix picks the format."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import graphviz

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..model import Trace
    from ..picture.picture import Picture

__all__ = ["Diagram", "GraphvizNotFound", "SAVE_FORMATS"]

#: Suffixes `Diagram.save` understands, and what each writes.
SAVE_FORMATS: dict[str, str] = {
    ".svg": "SVG image (needs Graphviz's dot)",
    ".png": "PNG image (needs Graphviz's dot)",
    ".pdf": "PDF document (needs Graphviz's dot)",
    ".dot": "DOT source text",
    ".json": "the trace and its findings as JSON",
    ".html": "the self-contained HTML report",
}

_IMAGE_FORMATS = (".svg", ".png", ".pdf")

INSTALL_ADVICE = (
    "Install Graphviz: `apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` (macOS), "
    "`conda install -c conda-forge graphviz`, or a package from https://graphviz.org/download/ "
    "— then make sure `dot` is on PATH."
)


def mime_subset(bundle: dict[str, Any], include: Any = None, exclude: Any = None) -> dict[str, Any]:
    """The part of a MIME bundle that IPython's `include` / `exclude` arguments of `_repr_mimebundle_` ask for."""
    return {k: v for k, v in bundle.items() if (not include or k in include) and not (exclude and k in exclude)}


class GraphvizNotFound(RuntimeError):
    """Graphviz's `dot` program is not installed or not on PATH."""

    def __init__(self, message: str, *, dot_path: Path | None = None) -> None:
        super().__init__(message)
        self.dot_path = dot_path


class Diagram:
    """A rendered view: DOT text (`.source`), the `graphviz.Digraph`, and the trace and findings it shows."""

    def __init__(
        self,
        *,
        view: str,
        trace: Trace,
        findings: list[Finding],
        digraph: graphviz.Digraph | None,
        html: str | None = None,
        image: Callable[[str], bytes] | None = None,
        svg: str | None = None,
    ) -> None:
        self.view = view
        self.trace = trace
        self.findings = list(findings)
        self.digraph = digraph
        self._html = html
        self._image = image  # a chart drawn without Graphviz (graph-memory): format name -> bytes
        self._svg: str | None = svg  # dot's SVG of `digraph`, when it was already drawn (to measure it)
        self.messages: list[str] = []  # how the view was drawn, for the user (`modules drawn at depth 2 ...`)
        self.picture: Picture | None = None  # the picture model it was drawn from, for the page made from it

    # ------------------------------------------------------------------ content
    @property
    def source(self) -> str:
        """The DOT text of this view ('' for the HTML report, which is not a graph)."""
        return self.digraph.source if self.digraph is not None else ""

    def svg(self) -> str:
        """The picture as SVG text (runs `dot`; raises GraphvizNotFound when it is missing)."""
        if self._svg is None and self._image is not None:
            self._svg = self._image("svg").decode("utf-8")
        if self._svg is None:
            if self.digraph is None:
                raise ValueError(f"the {self.view!r} view is an HTML page, not a graph; save it as .html")
            self._svg = self._pipe("svg").decode("utf-8")
        return scalable_svg(self._svg)

    def html(self) -> str:
        """The self-contained HTML report of the trace and findings."""
        if self._html is None:
            from .views import page_html

            self._html = page_html(self.trace, self.findings, self.picture)
        return self._html

    def to_json(self, *, indent: int | None = None) -> str:
        """The trace file (docs/trace-format.md) with this view's name and findings added: `Trace.load` reads it."""
        from ..tracefile.write import dumps

        document = self.trace.to_dict()
        document["view"] = self.view
        document["findings"] = [f.to_dict() for f in self.findings]
        return dumps(document, indent=indent)

    # ------------------------------------------------------------------ saving
    def save(self, path: str | Path) -> Path:
        """Write the diagram to `path`; the suffix picks the format (see SAVE_FORMATS). Returns the path."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in SAVE_FORMATS:
            choices = ", ".join(SAVE_FORMATS)
            raise ValueError(f"cannot save {str(path)!r}: unknown suffix {path.suffix!r}; choose one of {choices}")
        if suffix == ".html":
            write_text(path, self.html())
        elif suffix == ".json":
            write_text(path, self.to_json())
        elif self._image is not None:
            if suffix == ".dot":
                raise ValueError(f"cannot save the {self.view!r} view as .dot: it is a chart; choose .svg, .png or .pdf")
            data = self._image(suffix[1:])
            path.write_bytes(scalable_svg(data.decode("utf-8")).encode("utf-8") if suffix == ".svg" else data)
        elif self.digraph is None:
            raise ValueError(
                f"cannot save the {self.view!r} view as {suffix}: it is an HTML page; choose .html or .json"
            )
        elif suffix == ".dot":
            write_text(path, self.source)
        elif suffix == ".svg":
            text = self._svg if self._svg is not None else self._pipe("svg", path=path).decode("utf-8")
            path.write_bytes(scalable_svg(text).encode("utf-8"))
        else:
            data = self._pipe(suffix[1:], path=path)
            path.write_bytes(data)
        return path

    def _pipe(self, fmt: str, *, path: Path | None = None) -> bytes:
        assert self.digraph is not None
        try:
            data: bytes = self.digraph.pipe(format=fmt)
            return data
        except graphviz.ExecutableNotFound:
            dot_path = None
            where = ""
            if path is not None:
                dot_path = path.with_suffix(".dot")
                write_text(dot_path, self.source)
                where = f" The DOT source was written to {str(dot_path)!r}; render it later with `dot -T{fmt}`."
            target = f" to write {path.name!r}" if path is not None else f" to draw {fmt.upper()}"
            raise GraphvizNotFound(
                f"Graphviz's `dot` program was not found on PATH; it is needed{target}. {INSTALL_ADVICE}{where}",
                dot_path=dot_path,
            ) from None

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        if self._image is not None:
            bundle = {"image/svg+xml": self.svg()}
        elif self.digraph is None:
            from .views import inline_html

            bundle = {"text/html": inline_html(self.html())}
        else:
            try:
                bundle = {"image/svg+xml": self.svg()}
            except GraphvizNotFound as exc:
                bundle = {"text/plain": str(exc)}
        return mime_subset(bundle, include, exclude)

    def __repr__(self) -> str:
        count = len(self.findings)
        return f"<gradviz.Diagram view={self.view!r}, {count} finding{'' if count == 1 else 's'}>"


def write_text(path: Path, text: str) -> None:
    """Write `text` as UTF-8, whole or not at all. A lone surrogate (an undecodable file name the program ran
    from) becomes `\\udcff`, which in JSON is the escape of the same character, so nothing is lost there."""
    path.write_bytes(text.encode("utf-8", "backslashreplace"))


_SVG_ROOT = re.compile(r"<svg\b[^>]*>", re.S)
_SIZE = re.compile(r'\s(width|height)="([\d.]+)(pt|px)?"')


def scalable_svg(svg: str) -> str:
    """The SVG scaled to its container (`width="100%"`, the `viewBox` keeping its proportions), never drawn
    larger than its natural size (`max-width`): a notebook cell, a report or a Sphinx page shows all of it."""
    root = _SVG_ROOT.search(svg)
    if root is None:
        return svg
    tag = root.group(0)
    sizes = {name: (float(value), unit or "px") for name, value, unit in _SIZE.findall(tag)}
    if "width" not in sizes or "height" not in sizes or 'width="100%"' in tag:
        return svg
    (width, unit), (height, _) = sizes["width"], sizes["height"]
    new = _SIZE.sub("", tag)
    if "viewBox" not in new:
        new = new[:-1].rstrip("/") + f' viewBox="0 0 {width:g} {height:g}"' + (" />" if tag.endswith("/>") else ">")
    style = f"max-width: {width:g}{unit}; height: auto"
    new = new.replace("<svg", f'<svg width="100%" style="{style}"', 1)
    return svg[: root.start()] + new + svg[root.end():]
