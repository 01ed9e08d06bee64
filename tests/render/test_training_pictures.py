"""Pictures of real training scripts: steps rolled into one with ×N, modules collapsed, findings kept visible."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gradviz
from gradviz.model import Trace
from gradviz.render import render

PROGRAMS = Path(__file__).resolve().parents[1] / "programs" / "realistic"
SCRIPTS = ["lstm_lm", "actor_critic", "lbfgs", "dcgan", "cnn"]

pytestmark = pytest.mark.slow  # each script trains for a few seconds under the tracer


@pytest.fixture(scope="module")
def traces() -> dict[str, Trace]:
    return {name: gradviz.trace_script(PROGRAMS / f"{name}.py") for name in SCRIPTS}


def _drawn(source: str) -> list[str]:
    """The ids of the boxes a person sees (the legend is not one)."""
    return [n for n in re.findall(r"^\s*(\w+) \[label=", source, re.M) if n != "legend"]


def _step_clusters(source: str) -> list[tuple[int, str]]:
    return [(int(n), steps) for n, steps in re.findall(r"step ×(\d+) \(steps ([^)]*)\)", source)]


@pytest.mark.parametrize("name", SCRIPTS)
def test_default_and_collapsed_views_fit_and_keep_every_finding(traces: dict[str, Trace], name: str) -> None:
    trace = traces[name]
    findings = gradviz.diagnose(trace)
    default = render(trace, findings=findings).source
    collapsed = render(trace, findings=findings, collapse_modules=True).source
    drawn, boxes = _drawn(default), _drawn(collapsed)
    assert len(drawn) <= 150
    assert len(boxes) <= 60 and len(boxes) < len(drawn)
    assert "cluster_step" in default and "cluster_step" in collapsed  # the rolled marker: ↻ step ×N
    assert _step_clusters(default) and _step_clusters(default) == _step_clusters(collapsed)
    assert "fillcolor=darkolivegreen1" in default and "fillcolor=darkolivegreen1" in collapsed  # the loss
    for finding in findings:  # every cut is drawn once, at its line, in both views
        assert finding.kind.value == "cut_edge"
        label = f"line {finding.line}>"
        assert re.search(rf"\[label=<✂ [^>]*{label}", default), finding.message
        assert re.search(rf"\[label=<✂ [^>]*{label}", collapsed), finding.message
    assert "collapsed nn.Module call" in collapsed


def test_lstm_language_model_draws_48_chunks_once(traces: dict[str, Trace]) -> None:
    trace = traces["lstm_lm"]
    assert len(trace.events_of("backward")) == 48
    source = render(trace).source
    assert _step_clusters(source) == [(48, "1-48")]
    assert "↻ step ×48 (steps 1-48): backward at line 32" in source
    # the two detached states (h and c) are cut at line 28, each drawn once for all 47 chunks that cut them
    assert len(re.findall(r"label=<✂ s\.detach\(\)  line 28>", source)) == 2
    assert "MkldnnRnnLayerBackward0" in source
    collapsed = render(trace, collapse_modules=True).source
    group = re.search(r'<B>model\.lstm</B><BR/><FONT POINT-SIZE="8">(\d+) ops?, 4 params', collapsed)
    assert group is not None  # nn.LSTM is one box, its four parameters in it


def test_cnn_partial_batch_is_the_same_step_said_in_words(traces: dict[str, Trace]) -> None:
    source = render(traces["cnn"]).source
    # 70 images in batches of 16, two epochs: the 6-image batch (steps 5 and 10) builds the same graph with other
    # shapes: one box for all ten steps, drawn with the common shapes, the partial batch named in its title
    assert _step_clusters(source) == [(10, "1-10")]
    assert "↻ step ×10 (steps 1-10): backward at line 34<BR/>steps 5, 10: batch of 6" in source
    assert "(16, 10)" in source and "(6, 10)" not in source


def test_dcgan_discriminator_and_generator_steps(traces: dict[str, Trace]) -> None:
    trace = traces["dcgan"]
    source = render(trace).source
    assert _step_clusters(source) == [(3, "1, 3, 5"), (3, "2, 4, 6")]
    assert "backward at line 55" in source and "backward at line 59" in source
    assert re.search(r"label=<✂ fake\.detach\(\)  line 54>", source)
    # one model's parameters are all named from the variable holding it
    labels = {t.label for t in trace.tensors.values() if t.parameter}
    assert {"netG.main.0.weight", "netG.main.1.weight", "netD.main.0.weight", "netD.main.3.bias"} <= labels
    assert not any(label.startswith("main.") for label in labels)


def test_actor_critic_episodes_and_lbfgs_closure_calls(traces: dict[str, Trace]) -> None:
    ac = render(traces["actor_critic"]).source
    assert _step_clusters(ac) == [(8, "1-8")]
    assert "loop body ×6 iterations" in ac  # the six environment steps of an episode, rolled inside it
    labels = {t.label for t in traces["actor_critic"].tensors.values() if t.parameter}
    assert {"actor.fc1.weight", "critic.fc1.weight"} <= labels
    lbfgs = render(traces["lbfgs"]).source
    clusters = _step_clusters(lbfgs)
    # steps are optimizer steps, as the step window counts them: 3 L-BFGS steps of 6 closure calls each
    assert clusters == [(3, "1-3")] and len(traces["lbfgs"].events_of("backward")) == 18
    assert "↻ step ×3 (steps 1-3), 6 backward calls each: backward at line 16" in lbfgs


def test_step_k_draws_that_backward_as_it_was(traces: dict[str, Trace]) -> None:
    trace = traces["cnn"]
    last = render(trace, step=10, depth="all").source  # every op (the default draws the modules as boxes)
    assert "backward 10 of 10 (line 34)" in last and "cluster_step" not in last
    assert "(6, 1, 12, 12)" in last and "(16, 1, 12, 12)" not in last
    with pytest.raises(ValueError, match="step 11 does not exist: the program made 10 backward"):
        render(trace, step=11)


def test_max_nodes_keeps_losses_and_findings(traces: dict[str, Trace]) -> None:
    for name in ("lstm_lm", "dcgan", "actor_critic"):
        trace = traces[name]
        findings = gradviz.diagnose(trace)
        source = render(trace, findings=findings, max_nodes=15).source
        assert "fillcolor=darkolivegreen1" in source, name
        for finding in findings:
            assert f"line {finding.line}>" in source, name


def test_cut_message_names_each_root_once_with_a_count(traces: dict[str, Trace]) -> None:
    (cut,) = gradviz.diagnose(traces["lstm_lm"])
    # the roots of the first backward the cut value reaches, each once (not `loss`, `loss`, ... for every chunk)
    assert "flows on into `loss`, but backward (line 32)" in cut.message
    assert cut.message.count("`loss`") == 1
    (gan_cut,) = gradviz.diagnose(traces["dcgan"])
    # named as the memory view and the page name it: by the expression that made it
    assert "`err_real.add(err_fake)` made at line 55" in gan_cut.message
    assert not re.search(r"\(t\d+\)", gan_cut.message)  # never our internal ids


def test_memory_view_shows_the_model_and_summarises_the_data(traces: dict[str, Trace]) -> None:
    trace = traces["cnn"]
    source = render(trace, "memory").source
    # no finding and no alias involves a parameter: one row per module, with what wrote them (initialisation
    # folded into one mention, then the optimizer's steps), no parameter drawn one by one
    table = re.search(r"<B>parameters by module: 8 in 4 modules, [\d.]+ KiB.*?</TABLE>", source, re.S)
    assert table is not None
    rows = [[html.unescape(c) for c in re.findall(r"<TD[^>]*>(?:<FONT[^>]*>)?([^<]*)", row)]
            for row in re.findall(r"<TR>(.*?)</TR>", table.group(0))[1:]]
    assert [row[0] for row in rows] == ["model.conv1", "model.conv2", "model.fc1", "model.fc2"]
    assert rows[0][1] == "weight, bias" and rows[0][3] == "initialised (line 11)"  # one writer a line
    conv1 = html.unescape(re.findall(r"<TR>(.*?)</TR>", table.group(0))[1])
    assert ">model.conv1<" in conv1 and "initialised (line 11)<BR/>SGD.step() ×10</FONT>" in conv1
    assert not re.search(r"<B>model\.\w+\.(weight|bias)</B>", source)
    pipeline = re.search(r"data pipeline: (\d+) tensors without gradients \(inputs, targets, transforms; ([\d.]+) KiB\)", source)
    assert pipeline is not None and int(pipeline.group(1)) > 20
    # what the last step keeps alive for backward: one table by module and line, largest first, with bytes
    table = re.search(r"<B>saved for backward in step 10 of 10 \(backward at line 34\): ([\d.]+) KiB</B>(.*?)</TABLE>",
                      source, re.S)
    assert table is not None
    rows = re.findall(r'<TD ALIGN="LEFT" BALIGN="LEFT">([^<]*)</TD><TD ALIGN="LEFT"><FONT POINT-SIZE="9">([^<]*)'
                      r'</FONT></TD><TD ALIGN="RIGHT">(\d+)</TD>', table.group(2))
    assert rows[0][0].startswith("model.pool line 19: x = self.pool(torch.relu(self.conv1(x)))")
    assert rows[0][1:] == ("MaxPool2DWithIndicesBackward0", "2")
    assert ("ConvolutionBackward0", "1") in {(op, n) for where, op, n in rows if where.startswith("model.conv1 line 19")}
    assert any(op == "AddmmBackward0" for _, op, _ in rows)
    # the activations are in the table, not drawn one by one (with a counter and a storage each)
    drawn = re.findall(r"^\s*(\w+) \[label=<<TABLE[^\n]*?<B>([^<]*)</B>", source, re.M)
    assert not [title for _, title in drawn if title.startswith("max_pool2d")]
    assert not [node for node, _ in drawn if node.startswith("counter_")]  # the parameters are in the table
    hidden = re.search(r"… (\d+) other tensors \(every step&#x27;s activations, views, results\) not drawn one by one", source)
    assert hidden is not None and int(hidden.group(1)) > 100  # ten steps of activations, said once
    everything = render(trace, "memory", show_all=True).source
    assert "data pipeline" not in everything and "saved for backward in step 10 of 10" not in everything  # no table: all drawn


def test_cli_step_and_show_all(tmp_path: Path) -> None:
    out = tmp_path / "step.dot"
    run = subprocess.run(
        [sys.executable, "-m", "gradviz", "render", str(PROGRAMS / "lbfgs.py"), "--step", "3", "-o", str(out), "-q"],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "backward 3 of 18 (line 16)" in out.read_text()
    bad = subprocess.run(
        [sys.executable, "-m", "gradviz", "render", str(PROGRAMS / "lbfgs.py"), "--step", "99", "-o", str(out), "-q"],
        capture_output=True, text=True, timeout=120,
    )
    assert bad.returncode == 2 and "step 99 does not exist" in bad.stderr and "Traceback" not in bad.stderr
    mem = tmp_path / "mem.dot"
    run = subprocess.run(
        [sys.executable, "-m", "gradviz", "render", str(PROGRAMS / "cnn.py"), "--view", "memory", "--show-all",
         "-o", str(mem), "-q"],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "data pipeline" not in mem.read_text()


def test_report_of_a_training_script_rolls_its_steps(traces: dict[str, Trace]) -> None:
    """The report (the explorer page) draws each group of same-graph steps once, as a box naming its steps."""
    from gradviz.explorer import explorer_document
    from gradviz.picture.steps import split_steps

    trace = traces["cnn"]
    document = explorer_document(trace, gradviz.diagnose(trace))
    steps = split_steps(trace)
    assert [s["number"] for s in document["steps"]] == [s.number for s in steps]
    boxes = [g for g in document["groups"] if g["kind"] == "step"]
    assert sorted(n for g in boxes for n in g["numbers"]) == [s.number for s in steps]
    assert len(boxes) < len(steps)  # steps of one shape share a box
    # the scrubber begins with the in-place writes of parameter initialisation, before the first step
    assert "self.conv1 = nn.Conv2d(1, 4, 3, padding=1)" in document["events"][0]["code"]


def test_report_source_folds_library_files_and_drops_untouched_ones(traces: dict[str, Trace]) -> None:
    from dataclasses import replace

    from gradviz.explorer import explorer_document
    from gradviz.model import Event, EventKind, Location
    from gradviz.paths import relative

    trace = replace(traces["cnn"], sources=dict(traces["cnn"].sources), events=list(traces["cnn"].events))
    library = "/venv/lib/python3.11/site-packages/torchvision/transforms/functional.py"
    trace.sources[library] = "\n".join(f"line_{n} = {n}" for n in range(1, 963))
    trace.sources["/work/helpers.py"] = "def unused():\n    pass\n"
    trace.events.append(Event(10**9, EventKind.INPLACE_WRITE, Location(library, 500, "line_500 = 500")))
    files = {f["path"]: f for f in explorer_document(trace, [])["files"]}
    # shown relative to the repository when inside it, absolute outside (the library, the helper)
    assert files[relative(str(PROGRAMS / "cnn.py"))]["lines"][0] is not None  # the script in full
    assert "/work/helpers.py" not in files  # nothing there is implicated
    folded = files[library]
    assert folded["library"] and folded["lines"] is None
    assert [n for n, _text in folded["excerpt"]] == list(range(497, 504))  # the line and three either side


def test_collapsed_boxes_are_named_from_the_models_variables(traces: dict[str, Trace]) -> None:
    dcgan = render(traces["dcgan"], collapse_modules=True).source
    boxes = re.findall(r"^\s*group\d+ \[label=<<B>([\w.]+)</B>", dcgan, re.M)
    # the generator's and the discriminator's `main` are told apart; no box named after a class
    assert set(boxes) == {"netG.main", "netD.main", "criterion"}
    assert boxes.count("netD.main") == 3  # D on real, D on fake (step 1), D on fake (step 2): one box per call
    cnn = render(traces["cnn"], collapse_modules=True).source
    boxes = re.findall(r"^\s*group\d+ \[label=<<B>([\w.]+)</B>", cnn, re.M)
    assert "model" not in boxes and {"model.conv1", "model.fc2", "model.pool"} <= set(boxes)
    # the relu between two layers, in the model's own forward, stays an op with its line, not a one-op box
    assert re.search(r"<B>ReluBackward0</B>.*model  line 19: x = self\.pool\(torch\.relu\(self\.conv1\(x\)\)\)", cnn)
    assert "_s_" not in cnn  # the overview draws no saved tensors where no finding points
