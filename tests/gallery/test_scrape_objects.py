"""Which objects the sphinx-gallery scraper picks from an example's globals (no Sphinx, no dot)."""

from __future__ import annotations

import graphviz

from gradviz.integrations.sphinx import scrape_objects
from gradviz.model import Trace
from gradviz.render import Diagram


def _diagram(trace: Trace, view: str = "graph") -> Diagram:
    return Diagram(view=view, trace=trace, findings=[], digraph=graphviz.Digraph())


def test_new_diagrams_in_order_and_undrawn_traces() -> None:
    drawn, undrawn = Trace(script="a.py"), Trace(script="b.py")
    memory, graph = _diagram(drawn, "memory"), _diagram(drawn)
    report = Diagram(view="report", trace=drawn, findings=[], digraph=None, html="<p></p>")
    namespace = {"t": drawn, "memory": memory, "other": undrawn, "graph": graph, "page": report, "alias": memory, "n": 3}
    found = scrape_objects(namespace, seen=[])
    # the drawn trace is shown by its diagrams; the report is a page, not an image; the alias is not drawn twice
    assert [id(x) for x in found] == [id(memory), id(undrawn), id(graph)]


def test_already_scraped_objects_are_skipped() -> None:
    trace = Trace()
    first, second = _diagram(trace), _diagram(trace)
    assert scrape_objects({"first": first, "second": second}, seen=[first]) == [second]
    assert scrape_objects({"first": first}, seen=[first]) == []
