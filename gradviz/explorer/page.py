"""The explorer page: one self-contained HTML file (works from file://, loads nothing) around one JSON document."""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..picture.palette import css_variables
from ..render.escape import html_text
from .document import explorer_document

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..model import Trace
    from ..picture.picture import Picture

__all__ = ["embed_json", "explorer_html", "read_document"]

#: The layout library the page inlines first (third party, built by build.sh).
SCRIPTS = ("vendor/dagre.min.js",)
#: The page's own code, in `assets/panels/`, each file a module (`module.exports = {...}`) that `node --test` can load
#: on its own and the page wraps in a function of its own, so no file sees another's names: the helpers (pure: no DOM,
#: unit-tested in tests/explorer/test_helpers.js and test_page_helpers.js), the core (the document, the store, the
#: frame), the panels (each a factory that gets the helpers, the core and the store, and nothing else: the rule
#: tests/explorer/test_panels.py checks) and `start.js`, which wires them. No build step: edit a file, re-render.
HELPERS = ("helpers.js", "hierarchy.js", "steps.js", "replay.js", "firstview.js")
CORE = ("store.js", "core.js", "skeleton.js")
PANELS = ("findings.js", "graph.js", "view.js", "legend.js", "keys.js", "controls.js", "details.js", "source.js",
          "time.js", "search.js", "address.js")
FILES = (*HELPERS, *CORE, *PANELS, "start.js")


def explorer_html(
    trace: Trace, findings: Sequence[Finding] = (), *, title: str | None = None, picture: Picture | None = None
) -> str:
    """The explorer for `trace` and its findings as one HTML string: no external scripts, styles, fonts or images.
    `picture`: the picture model the other views of this run were drawn from (picture/picture.py)."""
    document = explorer_document(trace, findings, title=title, picture=picture)
    return page_html(document)


def page_html(document: dict[str, Any]) -> str:
    scripts = "".join(f"<script>{_asset(name)}</script>\n" for name in SCRIPTS)
    scripts += f"<script>{page_script()}</script>\n"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<link rel="icon" href="data:,">\n'  # no favicon request, even from file://
        f"<title>{html_text(document['title'])}</title>\n"
        f"<style>{css_variables()}\n{_asset('explorer.css')}</style>\n"
        "</head><body>\n"
        '<div id="gv-app" class="gv-app"><noscript>This page needs JavaScript to draw the trace.</noscript></div>\n'
        f'<script type="application/json" id="gv-data">{embed_json(document)}</script>\n'
        f"{scripts}"
        "</body></html>\n"
    )


def page_script() -> str:
    """The page's modules as one script: one function around them all (nothing global), each file in a function of
    its own that fills its entry of `modules`, then `start` wires the panels and draws."""
    body = "".join(f"(function (module) {{\n{_without_types(_asset(f'panels/{name}'))}}})"
                   f"(modules[{json.dumps(name[:-3])}] = {{ exports: {{}} }});\n" for name in FILES)
    return (f'(function () {{\n"use strict";\nvar modules = {{}};\n{body}'
            "modules.start.exports.start(modules, dagre, document, window);\n})();\n")


def embed_json(document: Any) -> str:
    """JSON text safe inside a <script> element: no `</script>`, `<!--` or `]]>` can appear, whatever the trace's
    names hold (`<`, `>` and `&` are written as \\u escapes, which JSON.parse reads back as the same characters)."""
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def read_document(page: str) -> dict[str, Any]:
    """The JSON document embedded in an explorer page (what the page draws); ValueError if there is none."""
    start = page.find('<script type="application/json" id="gv-data">')
    end = page.find("</script>", start)
    if start < 0 or end < 0:
        raise ValueError("not a gradviz explorer page: no embedded trace document")
    document: dict[str, Any] = json.loads(page[start + len('<script type="application/json" id="gv-data">'):end])
    return document


def _without_types(text: str) -> str:
    """A module's code without what only its type checker reads: `// @ts-check` and the JSDoc blocks (`/** ... */`)
    that take whole lines; a JSDoc cast inside a line stays. ValueError for a block that ends with code after it."""
    out, inside = [], False
    for line in text.split("\n"):
        bare = line.strip()
        if bare == "// @ts-check":
            continue
        inside = inside or bare.startswith("/**")
        if inside:
            if "*/" in bare:
                inside = False
                if not bare.endswith("*/"):
                    raise ValueError(f"code after a JSDoc block: {line!r}")
            continue
        out.append(line)
    return "\n".join(out)


def _asset(name: str) -> str:
    text = resources.files("gradviz.explorer").joinpath("assets", *name.split("/")).read_text(encoding="utf-8")
    # inlined code must not end its own <script> element early
    return text.replace("</script", "<\\/script")
