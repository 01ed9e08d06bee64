"""Big graphs: iterative walks (20,000-node chains), loop rolling, a node per use of shared parameters, module
collapsing and the max_nodes bound that keeps every finding's neighbourhood."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from gradviz.analysis.findings import Finding, FindingKind, SavedTensorEvidence
from gradviz.model import Location, NodeRecord, SavedTensorRecord, TensorRecord, Trace
from gradviz.picture.simplify import Core, CoreNode, find_repeats
from gradviz.render import render


def _tensor(tid: str, *, names: list[str] | None = None, parameter: str | None = None, grad_fn: str | None = None) -> TensorRecord:
    return TensorRecord(
        id=tid, shape=[2], dtype="float32", device="cpu", requires_grad=True, is_leaf=grad_fn is None,
        grad_fn=grad_fn, storage=None, byte_range=None, version_counter=None, version=0, origin="op", seq=0,
        names=names or [], parameter=parameter,
    )


def _chain(n: int, name: str = lambda i: f"Op{i}Backward0") -> Trace:  # type: ignore[assignment]
    """n autograd nodes in a chain, n0 the output; node i uses node i+1."""
    trace = Trace()
    for i in range(n):
        trace.nodes[f"n{i}"] = NodeRecord(f"n{i}", name(i), [f"n{i + 1}"] if i < n - 1 else [], seq=n - i)
    return trace


def _drawn_nodes(source: str) -> list[str]:
    return re.findall(r"^\s*(\w+) \[label=", source, re.M)


def test_find_repeats() -> None:
    assert find_repeats(list("abcabcabcabcx")) == [(0, 3, 4)]
    assert find_repeats(list("xyabababab")) == [(2, 2, 4)]
    assert find_repeats(list("abcabcabc")) == []  # three repetitions are drawn as they are
    assert find_repeats(list("aaaaaaa")) == [(0, 1, 7)]


def test_20000_node_chain_of_distinct_ops_is_cut_to_max_nodes() -> None:
    source = render(_chain(20_000), findings=[]).source  # no RecursionError anywhere
    drawn = _drawn_nodes(source)
    assert "n0" in drawn and "n19999" not in drawn
    assert len(drawn) <= 300
    hidden = re.search(r"… (\d+) nodes not shown", source)
    assert hidden and int(hidden.group(1)) == 20_000 - len([d for d in drawn if re.fullmatch(r"n\d+", d)])
    assert "nodes not shown (max_nodes=300)" in source


def test_20000_node_chain_of_one_op_rolls_into_one_loop() -> None:
    source = render(_chain(20_000, lambda i: "MulBackward0"), findings=[]).source
    assert "loop body ×19999 iterations" in source  # the first node has no input: not the same op
    assert re.search(r"^\s*(\w+) -> \1 \[color=blue constraint=false style=dashed\]", source, re.M)  # carried


def test_max_nodes_keeps_the_neighbourhood_of_a_deep_finding() -> None:
    trace = _chain(5_000)
    trace.tensors["t0"] = _tensor("t0", names=["h"])
    trace.nodes["n4000"].saved = [SavedTensorRecord("self", "t0", 0)]
    trace.tensors["t0"].version = 2
    evidence = SavedTensorEvidence(node="n4000", saved_name="self", tensor="t0", saved_version=0, version_now=2,
                                   write_event=None, write_line=7, shared_counter=True)
    finding = Finding(FindingKind.POISONED_SAVED_TENSOR, None, 7, "m", "f", tensors=["t0"], nodes=["n4000"],
                      evidence=[evidence])
    source = render(trace, findings=[finding], max_nodes=100).source
    drawn = _drawn_nodes(source)
    assert {"n0", "n3999", "n4000", "n4001", "n4000_s_self"} <= set(drawn)
    assert "saved v0, now v2," in source
    assert len(drawn) <= 100
    assert source.count("nodes not shown") >= 2  # the stretches on both sides of the finding


def test_roll_leaves_the_iteration_with_a_finding_expanded() -> None:
    trace = _chain(40, lambda i: ["TanhBackward0", "AddBackward0"][i % 2])
    finding = Finding(FindingKind.CUT_EDGE, None, 3, "m", "f", nodes=["n20"])
    source = render(trace, findings=[finding]).source
    assert re.search(r"^\s*n20 \[label=<<B>TanhBackward0</B>>\]$", source, re.M)
    counts = sorted(int(c) for c in re.findall(r"loop body ×(\d+) iterations", source))
    # n39 (no input) differs; then bodies (n38, n37) ... (n22, n21) roll, (n20, n19) stays, (n18, n17) ... (n2, n1) roll
    assert counts == [9, 9]
    assert re.search(r"^\s*n19 \[label=<<B>AddBackward0</B>>\]$", source, re.M)


def test_rnn_cell_loop_rolls_with_carried_edge() -> None:
    torch = pytest.importorskip("torch")
    import gradviz

    torch.manual_seed(0)
    cell = torch.nn.RNNCell(3, 3)
    with gradviz.trace() as trace:
        h = torch.zeros(1, 3)
        for _ in range(12):
            h = cell(torch.ones(1, 3), h)
        h.sum().backward()
    source = render(trace, findings=[]).source
    assert "loop body ×12 iterations" in source
    assert "color=blue constraint=false style=dashed" in source
    assert len(re.findall(r"\[label=<<B>TanhBackward0</B>", source)) == 1
    for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
        assert name in source


def test_shared_parameter_gets_a_node_per_use() -> None:
    trace = Trace()
    trace.tensors["t0"] = _tensor("t0", parameter="emb.weight")
    trace.nodes["acc"] = NodeRecord("acc", "AccumulateGrad", [], seq=0, variable="t0")
    n = 80
    for i in range(n):  # distinct ops so that nothing rolls; each uses the previous one and the parameter
        nxt = [f"n{i + 1}" if i < n - 1 else None, "acc"]
        trace.nodes[f"n{i}"] = NodeRecord(f"n{i}", f"Op{i}Backward0", nxt, seq=n - i)
    source = render(trace, findings=[]).source
    copies = re.findall(r"^\s*(acc_u\d+) \[label=", source, re.M)
    assert len(copies) == n
    for copy in copies:
        assert len(re.findall(rf"^\s*{copy} -> ", source, re.M)) == 1
        assert re.search(rf"^\s*{copy}_var \[label=<emb\.weight", source, re.M)
    assert not re.search(r"^\s*acc \[", source, re.M)


def test_core_split_shared_keeps_single_use_leaves() -> None:
    core = Core()
    for nid in ("a", "b", "p", "q"):
        core.add_node(CoreNode(nid, nid))
    core.add_edge("p", "a")
    core.add_edge("p", "b")
    core.add_edge("q", "a")
    copies = core.split_shared({"p", "q"})
    assert copies == {"p_u0": "p", "p_u1": "p"}
    assert set(core.edges) == {("p_u0", "a"), ("p_u1", "b"), ("q", "a")}


def _modular(blocks: int, ops_per_block: int) -> Trace:
    trace = Trace()
    n = blocks * ops_per_block
    for i in range(n):
        block, op = divmod(i, ops_per_block)
        trace.nodes[f"n{i}"] = NodeRecord(
            f"n{i}", f"Op{op}Backward0", [f"n{i + 1}"] if i < n - 1 else [], seq=n - i,
            module=f"layer{block}.conv{op}", created=Location("/x/model.py", 10 + op),
        )
    return trace


@pytest.mark.dot
def test_too_many_nodes_collapse_module_calls_automatically(tmp_path: Path) -> None:
    # 480 nodes: more than the 80 boxes of the default view; depth 0 (one box per outermost module) draws 60 boxes
    diagram = render(_modular(60, 8), findings=[])
    source = diagram.source
    groups = re.findall(r"^\s*group\d+ \[label=<<B>([\w.]+)</B>", source, re.M)
    assert groups[:2] == ["layer0", "layer1"] and len(groups) == 60
    # but a chain of 60 boxes is taller than a page: said in the legend and to the user, with the size dot draws
    assert "larger than a page even at depth 0 (one box per model)" in source
    png = diagram.save(tmp_path / "chain.png")
    width, height = struct.unpack(">II", png.read_bytes()[16:24])
    assert height > 2500
    assert diagram.messages == [
        f"graph view: 60 boxes, {width:,} × {height:,} px at 96 dpi even at depth 0 (one box per model), larger than "
        "a page (2,500 px either way); --step K draws one step, --max-nodes N summarises beyond N boxes"
    ]
    assert "8 ops" in source


def test_without_dot_the_size_is_estimated_and_said_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no `dot` anywhere on PATH
    diagram = render(_modular(60, 8), findings=[])
    assert diagram.messages == [
        "graph view: 60 boxes, 61 deep, up to 1 side by side (estimated: Graphviz's dot was not found to lay it out) "
        "even at depth 0 (one box per model), it may not fit a page; --step K draws one step, --max-nodes N "
        "summarises beyond N boxes"
    ]
    assert len(re.findall(r"^\s*group\d+ \[label=", diagram.source, re.M)) == 60
    # with a budget of its own (max_nodes), only the box count decides
    budget = render(_modular(60, 8), findings=[], max_nodes=100)
    assert "modules drawn at depth 0 of 0-1 to fit 100 boxes (--depth)" in budget.source
    assert budget.messages == [
        "graph view: 480 boxes, so modules are drawn at depth 0 (0-1) to fit 100 boxes; --depth N draws another "
        "depth, --depth all every op"
    ]


def test_collapse_modules_depth_is_selectable() -> None:
    source = render(_modular(3, 4), findings=[], collapse_modules=2).source
    groups = re.findall(r"^\s*group\d+ \[label=<<B>([\w.]+)</B>", source, re.M)
    assert groups == [f"layer{b}.conv{o}" for b in range(3) for o in range(4)]
    assert "modules collapsed" not in source  # asked for, not forced


def _layers(n: int, *, shared: bool) -> Trace:
    """n identical layers (a chain of MmBackward0), each fed by a parameter: its own, or one shared by all."""
    trace = Trace()
    for i in range(n):
        pid = "t0" if shared else f"t{i}"
        trace.tensors.setdefault(pid, _tensor(pid, parameter=f"layers.{0 if shared else i}.weight"))
        acc = f"n{2 * i + 1}"
        trace.nodes[f"n{2 * i}"] = NodeRecord(f"n{2 * i}", "MmBackward0", [f"n{2 * i + 2}" if i < n - 1 else None, acc], seq=n - i)
        trace.nodes[acc] = NodeRecord(acc, "AccumulateGrad", [], seq=n - i, variable=pid)
    return trace


def test_a_loop_reuses_its_weights_a_stack_of_layers_does_not() -> None:
    rolled = render(_layers(20, shared=True), findings=[]).source
    assert "loop body ×" in rolled
    stacked = render(_layers(20, shared=False), findings=[]).source
    assert "loop body" not in stacked
    assert len(re.findall(r"\[label=<<B>MmBackward0</B>>\]", stacked)) == 20


def test_cut_keeps_parameters_with_the_op_that_uses_them() -> None:
    source = render(_layers(400, shared=False), findings=[]).source
    summaries = re.findall(r"… (\d+) nodes not shown", source)
    assert len(summaries) == 1  # one stretch hidden, not a scatter of lone parameters
    for mm in re.findall(r"^\s*(n\d*[02468]) \[label=<<B>MmBackward0", source, re.M):
        acc = f"n{int(mm[1:]) + 1}"
        assert re.search(rf"^\s*{acc}_var \[label=<layers\.\d+\.weight", source, re.M), f"{mm} lost its parameter"


@pytest.mark.dot
def test_a_wide_picture_that_fits_is_drawn_whole_without_a_warning(tmp_path: Path) -> None:
    """Ten heads side by side: more than the box-count estimate allowed (7 side by side, "may not fit"); laid out by
    dot, every op fits a page, so every op is drawn and nothing is said."""
    trace = Trace()
    heads = 10
    trace.nodes["n0"] = NodeRecord("n0", "AddBackward0", [f"n{1 + 2 * h}" for h in range(heads)], seq=0,
                                   created=Location("/x/model.py", 30))
    for h in range(heads):
        a, b = f"n{1 + 2 * h}", f"n{2 + 2 * h}"
        trace.nodes[a] = NodeRecord(a, "TanhBackward0", [b], seq=1, module=f"head{h}", created=Location("/x/model.py", 20))
        trace.nodes[b] = NodeRecord(b, "MmBackward0", [], seq=2, module=f"head{h}", created=Location("/x/model.py", 21))
    diagram = render(trace, findings=[])
    assert diagram.messages == []
    assert "group" not in diagram.source and diagram.source.count("<B>MmBackward0</B>") == heads
    png = diagram.save(tmp_path / "heads.png")
    width, height = struct.unpack(">II", png.read_bytes()[16:24])
    assert max(width, height) <= 2500
