"""The explorer's JSON document and page: what the page is fed, and that nothing from the trace can run in it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import gradviz
from gradviz.explorer import explorer_document, explorer_html, read_document
from gradviz.explorer.page import embed_json
from gradviz.model import EventKind, NodeRecord, Trace


def test_a_finding_points_at_the_node_that_saved_the_corrupted_tensor(data_trace: Trace) -> None:
    findings = gradviz.diagnose(data_trace)
    document = explorer_document(data_trace, findings)
    (finding,) = document["findings"]
    assert finding["kind"] == "silently_corrupted_saved_tensor" and finding["severity"] == "error"
    assert finding["line"] == 24 and document["files"][finding["file"]]["name"] == "plot_02_data_silent.py"
    tanh = next(n for n in data_trace.nodes.values() if n.name == "TanhBackward0")
    assert [document["ids"][i] for i in finding["nodes"]] == [tanh.id]
    node = document["nodes"][finding["nodes"][0]]
    assert node["label"] == "TanhBackward0" and node["mark"] == "corrupted"
    (saved,) = node["saved"]
    assert saved["name"] == "result" and saved["v"] == 0 and document["tensors"][saved["t"]]["name"] == "out"
    # the message keeps its Markdown: the page renders `code` as code
    assert "`out`" in finding["message"]


def test_no_internal_ids_are_shown(data_trace: Trace) -> None:
    document = explorer_document(data_trace, gradviz.diagnose(data_trace))
    shown = json.dumps({k: v for k, v in document.items() if k != "ids"})
    assert not re.search(r'"[tns]\d+"', shown), "a raw tensor/node/storage id reached what the page shows"
    names = {t["name"] for t in document["tensors"]}
    assert {"out", "c", "a"} <= names


def test_names_come_from_the_one_naming_rule(data_trace: Trace, training_trace: Trace) -> None:
    """Tensors and storages are named as every other view names them (analysis/names.py): no recorder id
    (t19, s23, n5) in any text of the page, storages by their first owner."""
    from gradviz.analysis.names import Namer

    for trace in (data_trace, training_trace):
        document = explorer_document(trace, gradviz.diagnose(trace))
        shown = json.dumps({k: v for k, v in document.items() if k not in ("ids", "files")})
        assert not re.search(r"\b[tns]\d+\b", shown), re.search(r".{40}\b[tns]\d+\b.{40}", shown)
        namer = Namer(trace)
        by_name = {namer.tensor(tid) for tid in trace.tensors}
        assert {t["name"] for t in document["tensors"]} <= by_name
        assert all(s["name"].startswith("storage of ") for s in document["memory"]["storages"])
    document = explorer_document(data_trace, [])
    out = next(t for t in document["tensors"] if t["name"] == "out")
    assert out["storage"] == "storage of out"


def test_the_scrubber_follows_versions_through_the_data_write(data_trace: Trace) -> None:
    document = explorer_document(data_trace, gradviz.diagnose(data_trace))
    events = document["events"]
    assert [e["kind"] for e in events] == ["data_get", "inplace_write", "backward"]
    write = events[1]
    names = {document["tensors"][t]["name"]: (before, after) for t, before, after in write["versions"]}
    assert names == {"c": (0, 1), "out": (0, 0)}
    out = next(i for i, t in enumerate(document["tensors"]) if t["name"] == "out")
    assert document["memory"]["start"][str(out)] == 0


def test_training_steps_and_modules_become_boxes(training_trace: Trace) -> None:
    document = explorer_document(training_trace, gradviz.diagnose(training_trace))
    groups = document["groups"]
    steps = [g for g in groups if g["kind"] == "step"]
    assert sum(len(g["numbers"]) for g in steps) == 3
    paths = {g.get("path") for g in groups if g["kind"] == "module"}
    assert {"model", "model.encoder", "model.encoder.fc1", "model.head"} <= paths
    for i, g in enumerate(groups):  # every module's parent is the prefix of its path
        if g["kind"] == "module" and "." in g["path"]:
            assert groups[g["parent"]]["path"] == g["path"].rsplit(".", 1)[0]
    params = {document["tensors"][n["var"]].get("parameter") for n in document["nodes"] if "var" in n}
    assert "model.encoder.fc1.weight" in params
    # the detach cuts the path from the encoder to the head: a cut edge, labelled with the expression
    assert any("detach()" in c["label"] for c in document["cuts"])


def test_hostile_names_cannot_end_the_script_element(data_trace: Trace) -> None:
    trace = Trace.loads(data_trace.to_json())
    payload = '</script><script>alert(1)</script><!--'
    trace.tensor("out").names = [payload]
    trace.tensor("c").names = ['<img src=x onerror="alert(2)">']
    for node in trace.nodes.values():
        node.module = "model.</script>.x"
    assert trace.script is not None
    trace.sources[trace.script] += "\n# </script><svg onload=alert(3)> ]]> -->\n"
    page = explorer_html(trace, gradviz.diagnose(trace), title=payload)
    assert page.count("</script>") == 3  # the data, the layout library and the page's code
    assert "<img" not in page and "<svg onload" not in page and "<!--" not in page
    document = read_document(page)
    assert payload in {t["name"] for t in document["tensors"]}  # the names come back intact as data
    assert document["title"] == payload
    assert "<title>&lt;/script&gt;" in page


def test_embedded_json_escapes_markup_and_line_separators() -> None:
    text = embed_json({"a": "</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><!-- & \u2028"}


def test_a_trace_without_a_graph_says_what_it_has() -> None:
    page = explorer_html(Trace(), [])
    document = read_document(page)
    assert document["nodes"] == [] and document["findings"] == [] and document["chart"] is None
    assert document["facts"]["nodes"] == 0 and document["files"] == []


def test_a_script_that_raised_before_any_op(trace_of) -> None:
    trace = trace_of("import torch\nraise ValueError('<b>bad</b> config')\n")
    document = explorer_document(trace, gradviz.diagnose(trace))
    exception = document["facts"]["exception"]
    assert exception["type"] == "ValueError" and exception["message"] == "<b>bad</b> config"
    assert exception["line"] == 2 and document["nodes"] == []


def test_a_graph_of_20000_nodes_opens_as_boxes() -> None:
    """A loop of 20,000 iterations at one line: one box 'line 3 ×20,000', not 20,000 things to lay out."""
    from gradviz.model import Event, Location, TensorRecord

    trace = Trace(script="/x/loop.py", sources={"/x/loop.py": "import torch\nx = torch.ones(1, requires_grad=True)\nfor _ in range(20000): x = x * 1.0001\nx.backward()\n"})
    trace.tensors["t0"] = TensorRecord("t0", [1], "torch.float32", "cpu", True, True, None, None, None, None, 0, "op", 0, names=["x"])
    trace.nodes["n0"] = NodeRecord("n0", "AccumulateGrad", [], 0, variable="t0")
    previous = "n0"
    for i in range(1, 20001):
        trace.nodes[f"n{i}"] = NodeRecord(f"n{i}", "MulBackward0", [previous], i, created=Location("/x/loop.py", 3, ""))
        previous = f"n{i}"
    trace.events.append(Event(20002, EventKind.BACKWARD, Location("/x/loop.py", 4, "x.backward()"), data={"outcome": "ok"}))
    document = explorer_document(trace, [])
    (line,) = [g for g in document["groups"] if g["kind"] == "line"]
    assert line["label"] == "line 3 \N{MULTIPLICATION SIGN}20,000" and line["line"] == 3
    assert sum(1 for n in document["nodes"] if n["g"] == document["groups"].index(line)) == 20000
    assert len(explorer_html(trace, []).encode()) < 5 * 2**20


def test_source_files_are_shown_relative_to_the_repository(gallery: Path) -> None:
    trace = gradviz.trace_script(gallery / "plot_02_data_silent.py")
    (entry,) = [f for f in explorer_document(trace, gradviz.diagnose(trace))["files"] if f["name"] == "plot_02_data_silent.py"]
    assert entry["path"] == "gallery/plot_02_data_silent.py"  # not the recording machine's absolute path


def test_a_verified_finding_carries_its_measurement_by_tensor_index() -> None:
    """--verify: the page's finding holds the measured error (its text in the message), tensors by index."""
    import contextlib
    import io

    script = Path(__file__).resolve().parents[2] / "gallery" / "plot_02_data_silent.py"
    with contextlib.redirect_stdout(io.StringIO()):
        trace = gradviz.trace_script(script, verify=True)
    document = explorer_document(trace, gradviz.diagnose(trace))
    (finding,) = document["findings"]
    (row,) = finding["measured"]["gradients"]
    assert document["tensors"][row["tensor"]]["name"] == "a"
    assert abs(row["max_abs"] - 0.990134) < 1e-6
    assert "Measured with --verify" in finding["message"]
    shown = json.dumps({k: v for k, v in document.items() if k != "ids"})
    assert not re.search(r'"[tns]\d+"', shown)
