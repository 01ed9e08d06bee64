"""The graph view on the seed document's examples: golden DOT text and the marks a newcomer needs to read it."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

import gradviz
from gradviz.analysis import diagnose
from gradviz.analysis.findings import Finding, FindingKind, SavedTensorEvidence
from gradviz.render import render

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("GRADVIZ_UPDATE_GOLDEN") == "1"  # regenerate with GRADVIZ_UPDATE_GOLDEN=1 pytest ...


def _trace(path: Path) -> gradviz.Trace:
    with contextlib.redirect_stdout(io.StringIO()):
        return gradviz.trace_script(path)


@pytest.fixture(scope="module")
def seeds(gallery: Path) -> dict[str, gradviz.Trace]:
    names = ["plot_01_testdetach", "plot_02_data_silent", "plot_03_detach_raises"]
    return {name: _trace(gallery / f"{name}.py") for name in names}


def _node_line(source: str, node_id: str) -> str:
    match = re.search(rf"^\s*{re.escape(node_id)} \[.*$", source, re.M)
    assert match, f"node {node_id} not in the DOT text"
    return match.group(0)


def _saved_node(source: str, text: str) -> str:
    lines = [line for line in source.splitlines() if "_s_" in line.split("[")[0] and "->" not in line and text in line]
    assert len(lines) == 1, f"expected one saved-tensor node containing {text!r}, got {lines}"
    return lines[0]


@pytest.mark.parametrize("name", ["plot_01_testdetach", "plot_02_data_silent", "plot_03_detach_raises"])
def test_golden_dot(seeds: dict[str, gradviz.Trace], name: str) -> None:
    trace = seeds[name]
    source = render(trace, findings=diagnose(trace)).source
    golden = GOLDEN / f"graph_{name}.dot"
    if UPDATE:  # only when asked: a normal run never writes into the tree
        golden.write_text(source, encoding="utf-8")
    assert golden.is_file(), f"{golden} is missing: regenerate it with GRADVIZ_UPDATE_GOLDEN=1 and review the diff"
    assert source == golden.read_text(encoding="utf-8")


def test_same_program_same_dot(gallery: Path) -> None:
    first = _trace(gallery / "plot_02_data_silent.py")
    second = _trace(gallery / "plot_02_data_silent.py")
    assert render(first).source == render(second).source
    assert "0x" not in render(first).source and "/work" not in render(first).source  # no pointers, no paths


def test_data_example_marks_the_silently_corrupted_saved_tensor(seeds: dict[str, gradviz.Trace]) -> None:
    source = render(seeds["plot_02_data_silent"]).source
    saved = _saved_node(source, "result")
    assert "fillcolor=orchid" in saved
    assert "bytes changed via c = out.data, line 24;" in saved
    assert "version unchanged (v0)" in saved
    assert "TanhBackward0" in _node_line(source, "n0")
    # the legend explains orchid, and nothing the picture does not use
    assert "gradient silently wrong" in source
    assert "backward raises" not in source and "cut by" not in source


def test_detach_example_marks_the_poisoned_saved_tensor_and_the_error(seeds: dict[str, gradviz.Trace]) -> None:
    source = render(seeds["plot_03_detach_raises"]).source
    saved = _saved_node(source, "result")
    assert 'fillcolor="#ff6666"' in saved
    assert "saved v0, now v1," in saved and "written at line 24 via c" in saved
    assert "raised RuntimeError at line 31" in source
    assert "saved tensor changed in place: backward raises" in source
    assert "orchid" not in source


def test_testdetach_cut_edges_and_dead_parameter(seeds: dict[str, gradviz.Trace]) -> None:
    trace = seeds["plot_01_testdetach"]
    source = render(trace).source
    relu = [n.id for n in trace.nodes.values() if n.name == "ReluBackward0"]
    cuts = re.findall(r"^\s*(\w+) -> (\w+) \[label=<✂ x\.detach\(\)  line 29> .*style=dashed", source, re.M)
    assert len(cuts) == 1  # three training steps of one shape: drawn once, the cut with them
    assert "step ×3 (steps 1-3): backward at line 42" in source
    # `--step 2` draws the second step as it was
    second = render(trace, step=2).source
    assert len(re.findall(r"✂ x\.detach\(\)  line 29", second)) == 1
    assert "backward 2 of 3 (line 42)" in second and "step ×3" not in second
    for src, dst in cuts:
        assert src in relu
        assert trace.nodes[dst].name == "MmBackward0" and trace.nodes[dst].module == "model.layer2"
    assert "color=red" in source
    dead = [line for line in source.splitlines() if "_var [" in line and "no gradient" in line]
    assert dead and all("layer1.weight" in line and "#eeeeee" in line for line in dead)
    live = [line for line in source.splitlines() if "_var [" in line and "layer2.weight" in line]
    assert live and all("lightblue" in line and "no gradient" not in line for line in live)
    # the relu output is not a backward root: it is not painted green
    assert not any(line.strip().startswith(f"{r}_out ") for r in relu for line in source.splitlines())


def test_hand_built_findings_without_diagnose(seeds: dict[str, gradviz.Trace]) -> None:
    trace = seeds["plot_02_data_silent"]
    write = next(e for e in trace.events if e.kind.value == "inplace_write")
    out = trace.tensor("out")
    c = trace.tensor("c")
    # the graph view draws what the finding's evidence says, without searching the events again
    evidence = SavedTensorEvidence(
        node=out.grad_fn, saved_name="result", tensor=out.id, saved_version=0, version_now=None,
        write_event=write.seq, write_line=24, writer=c.id, writer_alias="c = out.detach()", shared_counter=True,
    )
    finding = Finding(
        FindingKind.POISONED_SAVED_TENSOR, None, 24, "m", "f", tensors=[out.id], nodes=[out.grad_fn],
        events=[write.seq], evidence=[evidence],
    )
    source = render(trace, findings=[finding]).source
    saved = _saved_node(source, "result")
    assert "#ff6666" in saved and "written at line 24 via c" in saved
    assert "saved v0, now v?," in saved and "(c = out.detach() shares the counter)" in saved
    assert render(trace, findings=[]).source.count("#ff6666") == 0
    # a finding without evidence (a file written before evidence was kept) marks no saved tensor
    bare = Finding(FindingKind.POISONED_SAVED_TENSOR, None, 24, "m", "f", tensors=[out.id], nodes=[out.grad_fn])
    assert "#ff6666" not in _saved_node(render(trace, findings=[bare]).source, "result")


def test_show_saved_false_keeps_only_flagged_saved_tensors(seeds: dict[str, gradviz.Trace]) -> None:
    trace = seeds["plot_01_testdetach"]
    assert "_s_" not in render(trace, show_saved=False).source
    flagged = render(seeds["plot_03_detach_raises"], show_saved=False).source
    assert "saved v0, now v1" in flagged


def test_collapse_modules_groups_module_calls(seeds: dict[str, gradviz.Trace]) -> None:
    trace = seeds["plot_01_testdetach"]
    source = render(trace, findings=[], collapse_modules=True).source
    groups = re.findall(r"^\s*group\d+ \[label=<<B>([\w.]+)</B>", source, re.M)
    assert "model.layer2" in groups and "model.layer1" in groups  # named from the model's variable
    assert "collapsed nn.Module call" in source
    # with findings, the calls that hold them stay expanded
    expanded = render(trace, collapse_modules=True).source
    assert "ReluBackward0" in expanded and "✂ x.detach()" in expanded


def test_hostile_names_stay_escaped(seeds: dict[str, gradviz.Trace]) -> None:
    trace = gradviz.Trace.from_dict(seeds["plot_02_data_silent"].to_dict())
    evil = 'a<b>&"c{d}|e\nf'
    trace.tensor("out").names = [evil]
    trace.tensor("a").names = ["</TD></TR></TABLE>>"]
    trace.nodes["n0"].module = "mod<|{}>"
    trace.script = "/tmp/we<ird>&.py"
    source = render(trace).source
    assert "a&lt;b&gt;&amp;&quot;c{d}|e<BR/>f" in source
    assert "&lt;/TD&gt;&lt;/TR&gt;&lt;/TABLE&gt;&gt;" in source
    assert "mod&lt;|{}&gt;" in source and "we&lt;ird&gt;&amp;.py" in source


@pytest.mark.dot
def test_hostile_names_render_through_dot(seeds: dict[str, gradviz.Trace], tmp_path: Path) -> None:
    trace = gradviz.Trace.from_dict(seeds["plot_02_data_silent"].to_dict())
    trace.tensor("out").names = ['x<y & "z" {w}|v']
    svg = render(trace).svg()
    assert "x&lt;y &amp; &quot;z&quot; {w}|v" in svg
    assert "<y" not in svg.replace("&lt;y", "")
