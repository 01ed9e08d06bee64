"""The networkx views of a trace that the passes (and users) build on."""

from __future__ import annotations

from pathlib import Path

import gradviz
from gradviz.analysis import autograd_graph, dataflow_graph


def test_graphs_of_the_data_example(gallery: Path) -> None:
    trace = gradviz.trace_script(gallery / "plot_02_data_silent.py")
    a, out, c = (trace.tensor(name).id for name in ("a", "out", "c"))

    flow = dataflow_graph(trace)
    assert flow.has_edge(a, out) and flow.has_edge(out, c)
    assert [d for _, _, d in flow.edges(out, data=True) if d.get("alias")] == [
        {"seq": trace.events_of("data_get")[0].seq, "op": "data_get", "alias": True}
    ]
    assert not flow.has_edge(c, out)  # a write through c moves bytes, not dataflow edges

    graph = autograd_graph(trace)
    tanh = trace.tensors[out].grad_fn
    assert graph.nodes[tanh]["name"] == "TanhBackward0"
    (accumulate,) = graph.successors(tanh)
    assert graph.nodes[accumulate]["name"] == "AccumulateGrad" and graph.nodes[accumulate]["variable"] == a
