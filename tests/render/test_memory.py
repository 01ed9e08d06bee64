"""The memory view: storages, tensors with byte ranges, version counters as their own nodes, writes."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

import gradviz
from gradviz.analysis import names
from gradviz.model import (
    Event,
    EventKind,
    Location,
    StorageRecord,
    TensorRecord,
    Trace,
    VersionChange,
    VersionCounterRecord,
)
from gradviz.render import render
from gradviz.render.memory import memory_digraph
from gradviz.render.memory_boxes import FINDING_COLOURS


def edges(source: str) -> set[tuple[str, str]]:
    return set(re.findall(r"^\s*(\w+) -> (\w+)", source, re.M))


def node_line(source: str, name: str) -> str:
    lines = [line for line in source.splitlines() if re.match(rf"\s*{name} \[", line)]
    assert len(lines) == 1, f"node {name} appears {len(lines)} times"
    return lines[0]


def test_data_alias_shares_the_storage_but_not_the_version_counter(data_trace: Trace) -> None:
    out, c = data_trace.tensor("out"), data_trace.tensor("c")
    source = memory_digraph(data_trace, gradviz.diagnose(data_trace)).source
    found = edges(source)
    assert out.storage == c.storage
    assert (f"tensor_{out.id}", f"storage_{out.storage}") in found
    assert (f"tensor_{c.id}", f"storage_{c.storage}") in found
    assert out.version_counter != c.version_counter
    assert (f"tensor_{out.id}", f"counter_{out.version_counter}") in found
    assert (f"tensor_{c.id}", f"counter_{c.version_counter}") in found
    # c's counter is the fresh one .data made
    assert "fresh counter (made by .data)" in node_line(source, f"counter_{c.version_counter}")
    assert "not moved by the write at line 24" in node_line(source, f"counter_{out.version_counter}")


def test_detach_alias_shares_storage_and_version_counter(detach_trace: Trace) -> None:
    out, c = detach_trace.tensor("out"), detach_trace.tensor("c")
    source = memory_digraph(detach_trace, gradviz.diagnose(detach_trace)).source
    found = edges(source)
    assert out.version_counter == c.version_counter
    assert {(f"tensor_{out.id}", f"counter_{out.version_counter}"),
            (f"tensor_{c.id}", f"counter_{out.version_counter}")} <= found
    counter_nodes = re.findall(r"^\s*(counter_\w+) \[", source, re.M)
    assert counter_nodes.count(f"counter_{out.version_counter}") == 1  # one node, shared
    assert "v0 → v1 (line 24)" in node_line(source, f"counter_{out.version_counter}")


def test_versions_before_and_after_the_write(data_trace: Trace, detach_trace: Trace) -> None:
    data_source = memory_digraph(data_trace, gradviz.diagnose(data_trace)).source
    write = [e for e in data_trace.events if e.kind is EventKind.INPLACE_WRITE][0]
    label = node_line(data_source, f"write_{write.seq}")
    assert "c: v0 → v1" in label
    assert "out: v0 → v0 (not noticed)" in label
    assert "line 24: c.zero_()" in label  # the trailing comment is dropped
    assert (f"storage_{data_trace.tensor('out').storage}", f"write_{write.seq}") in edges(data_source)

    detach_source = memory_digraph(detach_trace, gradviz.diagnose(detach_trace)).source
    write = [e for e in detach_trace.events if e.kind is EventKind.INPLACE_WRITE][0]
    label = node_line(detach_source, f"write_{write.seq}")
    assert "c: v0 → v1" in label and "out: v0 → v1" in label and "not noticed" not in label


def test_tensors_and_labels(data_trace: Trace) -> None:
    source = memory_digraph(data_trace, gradviz.diagnose(data_trace)).source
    out, c = data_trace.tensor("out"), data_trace.tensor("c")
    out_label = node_line(source, f"tensor_{out.id}")
    assert "<B>out</B>" in out_label and "[3] float32" in out_label and "TanhBackward0" in out_label
    assert "saved by TanhBackward0 (result) at v0" in out_label
    assert "c = out.data" in node_line(source, f"tensor_{c.id}")
    storage = node_line(source, f"storage_{out.storage}")
    assert "12 bytes · float32 · cpu" in storage and "shared by out, c" in storage
    assert re.search(rf'tensor_{c.id} -> storage_{c.storage} \[label="bytes \[0, 12\)"', source)


def test_findings_are_coloured_like_the_graph_view(data_trace: Trace, detach_trace: Trace) -> None:
    silent = FINDING_COLOURS["silently_corrupted_saved_tensor"]
    poisoned = FINDING_COLOURS["poisoned_saved_tensor"]
    assert silent != poisoned
    data_source = memory_digraph(data_trace, gradviz.diagnose(data_trace)).source
    out = data_trace.tensor("out")
    assert f'COLOR="{silent}"' in node_line(data_source, f"tensor_{out.id}")
    assert f'COLOR="{silent}"' in node_line(data_source, f"storage_{out.storage}")
    detach_source = memory_digraph(detach_trace, gradviz.diagnose(detach_trace)).source
    assert f'COLOR="{poisoned}"' in node_line(detach_source, f"tensor_{detach_trace.tensor('out').id}")
    # without findings nothing is highlighted
    plain = memory_digraph(data_trace, []).source
    assert silent not in plain and poisoned not in plain


def test_uninvolved_tensors_are_summarised(data_trace: Trace) -> None:
    source = memory_digraph(data_trace, []).source
    a = data_trace.tensor("a")  # a leaf nothing aliases, writes or saves
    assert f"tensor_{a.id} [" not in source
    shown = len(re.findall(r"^\s*tensor_\w+ \[", source, re.M))
    other = re.search(r"… (\d+) other tensors? not shown", source)
    pipeline = re.search(r"data pipeline: (\d+) tensors? without gradients", source)
    assert other is not None
    assert int(other.group(1)) + (int(pipeline.group(1)) if pipeline else 0) == len(data_trace.tensors) - shown
    everything = memory_digraph(data_trace, [], show_all=True).source
    assert f"tensor_{a.id} [" in everything and "other tensors not shown" not in everything


def big_trace(n: int) -> Trace:
    """n independent tensors plus one `.data` alias pair and one write through it."""
    trace = Trace(script="big.py")
    where = Location("big.py", 3, "c.zero_()")
    for i in range(n):
        tid, sid, vid = f"t{i}", f"s{i}", f"v{i}"
        trace.storages[sid] = StorageRecord(sid, "cpu", 4, 1000 + i, "float32")
        trace.version_counters[vid] = VersionCounterRecord(vid, [tid])
        trace.tensors[tid] = TensorRecord(tid, [1], "float32", "cpu", False, True, None, sid, (0, 4), vid, 0, "op", i)
    alias = TensorRecord("c0", [1], "float32", "cpu", False, True, None, "s0", (0, 4), "vc", 0, "data", n,
                         names=["c"], source="t0")
    trace.tensors["c0"] = alias
    trace.version_counters["vc"] = VersionCounterRecord("vc", ["c0"], created_by="data")
    trace.events.append(Event(n + 1, EventKind.INPLACE_WRITE, where, tensor="c0",
                              versions=[VersionChange("c0", 0, 1), VersionChange("t0", 0, 0)],
                              data={"storage": "s0", "byte_range": [0, 4], "counter": "vc"}))
    return trace


def test_thousands_of_tensors_keep_only_the_aliases() -> None:
    trace = big_trace(3000)
    source = memory_digraph(trace, []).source
    assert re.findall(r"^\s*(tensor_\w+) \[", source, re.M) == ["tensor_t0", "tensor_c0"]
    assert "… 2999 other tensors not shown" in source
    assert ("tensor_t0", "storage_s0") in edges(source) and ("tensor_c0", "storage_s0") in edges(source)
    bounded = memory_digraph(trace, [], show_all=True, max_tensors=50).source
    assert len(re.findall(r"^\s*tensor_\w+ \[", bounded, re.M)) == 50
    assert "tensor_c0 [" in bounded  # the alias outranks the bystanders
    assert "… 2951 other tensors not shown (limit of 50: max_tensors)" in bounded


HOSTILE = 'x<b>&"{y}|z\nw'


def hostile_trace() -> Trace:
    trace = big_trace(2)
    trace.tensors["t0"].names = [HOSTILE]
    trace.tensors["c0"].names = ["<script>alert(1)</script>"]
    trace.events[0] = Event(trace.events[0].seq, EventKind.INPLACE_WRITE, Location("big.py", 3, 'c.add_(1)  # "<&>"'),
                            tensor="c0", versions=trace.events[0].versions, data=trace.events[0].data)
    return trace


def test_hostile_names_are_escaped_in_dot() -> None:
    source = memory_digraph(hostile_trace(), []).source
    assert "x&lt;b&gt;&amp;&quot;{y}|z<BR/>w" in source
    assert "&lt;script&gt;" in source
    assert "<script>" not in source and "<b>" not in source


@pytest.mark.dot
def test_hostile_names_lay_out_and_show_as_written() -> None:
    svg = memory_digraph(hostile_trace(), []).pipe(format="svg").decode("utf-8")
    assert "x&lt;b&gt;&amp;&quot;{y}|z" in svg or "x&lt;b&gt;&amp;\"{y}|z" in svg
    assert "<script>" not in svg


@pytest.mark.dot
def test_memory_view_through_render(data_trace: Trace) -> None:
    diagram = render(data_trace, "memory")
    assert diagram.view == "memory"
    svg = diagram.svg()
    assert "<svg" in svg and "version counter of" in svg and "storage of out" in svg and "storage s1" not in svg


# ---------------------------------------------------------------------- an alias made in every step, drawn once
def test_steps_are_written_as_a_person_writes_them() -> None:
    from gradviz.picture.per_step import steps_text

    assert steps_text([1, 2, 3, 4]) == "1-4"
    assert steps_text([1, 3, 5, 7, 9]) == "1, 3, 5, 7, 9"
    assert steps_text([1, 3, 5, 7, 9, 11, 13]) == "1, 3, …, 13"
    assert steps_text([1, 3, 5]) == "1, 3, 5"
    assert steps_text([2, 5]) == "2, 5"
    assert steps_text([1, 2, 4, 8, 9, 11, 12, 20]) == "1-2, 4, 8-9, 11-12, 20"  # (as the window's "steps 1-2 of 5")
    assert steps_text([1, 2, 4, 8, 10, 11, 13, 20, 22]) == "1-2, 4, 8, 10-11, 13, 20, … (9 steps)"
    assert steps_text([*range(1, 121), *range(122, 151)]) == "1-120, 122-150"  # (a validation step rolled apart)
    assert steps_text([1, 3, 6, 8, 11, 13, 16, 18]) == "1, 3, 6, 8, 11, 13, … (8 steps)"


def test_the_alias_a_finding_names_is_the_one_drawn_with_its_versions(  # type: ignore[no-untyped-def]
    trace_of, line_of
) -> None:
    program = """
        import torch
        w = torch.nn.Parameter(torch.ones(3))
        for step in range(6):
            out = torch.tanh(w * 2)
            c = out.data
            if step == 3:
                c.zero_()
            out.sum().backward()
        """
    trace = trace_of(program)
    findings = gradviz.diagnose(trace)
    corrupted = next(f for f in findings if f.kind.value == "silently_corrupted_saved_tensor")
    source = memory_digraph(trace, findings).source
    drawn = re.findall(r"^\s*tensor_(\w+) \[label=<<TABLE[^>]*><TR><TD[^>]*><FONT[^>]*><B>c</B>(?:  <FONT[^>]*>"
                       r"([^<]*)</FONT>)?", source, re.M)
    alias = trace.tensors[drawn[0][0]]
    assert len(drawn) == 1 and drawn[0][1] == "×6 (steps 1-6)"
    assert alias.id in corrupted.tensors  # step 4's c, the one the finding names: not the last one
    write_line = line_of(program, "c.zero_()")
    assert f"line {write_line}: c.zero_()" in source  # its write, with its versions
    assert re.search(r"c: v0 → v1", source) and "out: v0 → v0 (not noticed)" in source
    assert f'COLOR="{FINDING_COLOURS["silently_corrupted_saved_tensor"]}"' in node_line(source, f"tensor_{alias.id}")


def test_the_nothing_to_see_note_only_when_true(trace_of) -> None:  # type: ignore[no-untyped-def]
    quiet = trace_of("import torch\nx = torch.ones(3)\ny = x + 1\n")
    assert "no tensor shares memory" in memory_digraph(quiet).source
    # a model whose parameters all sit in the table and whose activations are saved: nothing drawn one by one,
    # but things are written and saved, so the note would be false
    trained = trace_of(
        "import torch\n"
        "model = torch.nn.Linear(4, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for step in range(3):\n"
        "    loss = torch.tanh(model(torch.randn(3, 4))).sum()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    source = memory_digraph(trained, gradviz.diagnose(trained)).source
    assert "parameters by module" in source and "saved for backward" in source
    assert "no tensor shares memory" not in source


def test_repeated_writes_at_one_line_are_one_box(trace_of) -> None:  # type: ignore[no-untyped-def]
    trace = trace_of(
        "import torch\n"
        "w = torch.zeros(3, requires_grad=True)\n"
        "view = w.data\n"
        "for step in range(40):\n"
        "    view.add_(1.0)\n"
    )
    source = memory_digraph(trace, gradviz.diagnose(trace)).source
    boxes = re.findall(r"<B>line 5: view\.add_\(1\.0\)</B>", source)
    assert len(boxes) == 1
    assert "×40 (the last drawn; every write here alike)" in source


def test_a_tied_weight_says_it_is_one_storage_for_both_modules(trace_of) -> None:  # type: ignore[no-untyped-def]
    trace = trace_of(
        "import torch\n"
        "import torch.nn as nn\n"
        "class LM(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.wte = nn.Embedding(10, 4)\n"
        "        self.head = nn.Linear(4, 10, bias=False)\n"
        "        self.wte.weight = self.head.weight\n"
        "    def forward(self, idx):\n"
        "        return self.head(self.wte(idx))\n"
        "model = LM()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for step in range(2):\n"
        "    loss = model(torch.randint(0, 10, (3,))).sum()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    source = html.unescape(memory_digraph(trace, gradviz.diagnose(trace)).source)
    assert "weight: one tensor, one storage, also model.head's (tied weight)" in source
    assert "no tensor shares memory" not in source


def test_buffers_and_state_dict_aliases_are_summed_up(trace_of) -> None:  # type: ignore[no-untyped-def]
    trace = trace_of(
        "import torch\n"
        "import torch.nn as nn\n"
        "model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for step in range(3):\n"
        "    loss = model(torch.randn(5, 4)).pow(2).mean()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "state = model.state_dict()\n"
    )
    source = html.unescape(memory_digraph(trace, gradviz.diagnose(trace)).source)
    # running_mean, running_var, num_batches_tracked: one note line, not a box (and counter, storage) each
    assert "buffers: 3 tensors without gradients filled as the modules were built" in source
    # built: running_mean.zero_(), running_var.fill_(1), num_batches_tracked.zero_(); then three forwards in
    # training mode: batch_norm updates running_mean and running_var (moving no version), num_batches_tracked += 1
    assert "written 12 times in all" in source
    assert not re.search(r"<B>(zeros|ones|tensor)\(\)", source)
    assert "`.detach()` at line 10: 6 aliases of 6 parameters, not used again, no finding involved" in source
    assert "parameters by module: 6 in 3 modules" in source
    assert not re.search(r"<B>[^<]*\.detach\(\)</B>", source)


# ---------------------------------------------------------------------- names derived once per drawing
def test_one_namer_per_memory_view(gallery: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every label of the memory view (tensors, counters, storages, writes, the parameter table, the notes) reads one
    `Namer`: the one the diagnosis built for its passes, handed to the picture. Without a picture:
    render() and memory_digraph() build one per call."""
    from gradviz.analysis import diagnosis
    from gradviz.picture.picture import Picture

    trace = gradviz.trace_script(gallery / "plot_14_ema_data_between.py")
    diagnosed = diagnosis(trace)  # the analysis names its evidence with the run's Namer, built here
    findings = diagnosed.findings
    picture = Picture(trace, findings, life=diagnosed.lifetimes, namer=diagnosed.namer)
    built: list[Trace] = []
    real_init = names.Namer.__init__

    def init(self: names.Namer, trace: Trace) -> None:
        built.append(trace)
        real_init(self, trace)

    monkeypatch.setattr(names.Namer, "__init__", init)
    first = render(trace, "memory", findings=findings, picture=picture).source
    assert built == []  # the diagnosis' own
    second = render(trace, "memory", findings=list(findings)).source
    assert built == [trace] and second == first
    direct = memory_digraph(trace, list(findings)).source
    assert built == [trace, trace] and direct == first
    # the drawing names tensors in every place a name appears: a write's box, the parameter table, the notes
    text = html.unescape(first)
    assert "line 26: pt.data.mul_(0.99).add_(0.01 * ps.data)" in text
    assert "parameters by module: 3 in 2 modules" in text
    assert "saved for backward in step 1 of 1" in text
