"""Pictures of realistic models (GPT-2 from a transformers config, nanoGPT, REINFORCE, a GAN, a VAE, an LSTM with
TBPTT, reentrant checkpoints, two models one after the other): one box per distinct step, any module depth, and a
default view that fits a page or says why."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gradviz
from gradviz.model import Trace
from gradviz.render import render
from gradviz.render.graph_fit import BOX_BUDGET, PAGE_PX, layout

PROGRAMS = Path(__file__).resolve().parents[1] / "programs" / "realistic"
SCRIPTS = [
    pytest.param("gpt2", marks=pytest.mark.transformers),
    "nanogpt", "reinforce", "dcgan", "vae", "lstm_lm", "checkpoint_reentrant", "two_models",
]
#: the step boxes of each program's default view: (count, steps)
STEPS = {
    "gpt2": [(3, "1-3")],
    "nanogpt": [(6, "1-6")],
    "reinforce": [(16, "1-16")],
    "dcgan": [(3, "1, 3, 5"), (3, "2, 4, 6")],
    "vae": [(5, "1-5")],
    "lstm_lm": [(48, "1-48")],
    "checkpoint_reentrant": [(4, "1-4")],
    "two_models": [(4, "1-4"), (4, "5-8")],
}
#: the module boxes at depths 0, 1 and 2 (every box drawn at that depth is one of these, and each of these is drawn)
BOXES = {
    "gpt2": [{"model"}, {"model.transformer", "model.lm_head"},
             {"model.transformer.wte", "model.transformer.wpe", "model.transformer.h", "model.transformer.ln_f",
              "model.lm_head"}],
    "nanogpt": [{"model"}, {"model.transformer", "model.lm_head"},
                {"model.transformer.wte", "model.transformer.wpe", "model.transformer.h", "model.transformer.ln_f",
                 "model.lm_head"}],
    "reinforce": [{"policy"}, {"policy.affine1", "policy.affine2"}, {"policy.affine1", "policy.affine2"}],
    "dcgan": [{"netG", "netD", "criterion"}, {"netG.main", "netD.main", "criterion"},
              # netG.main.7 (the Tanh) stays an op: fake.detach() cuts the graph there, a finding drawn as itself
              {*(f"netG.main.{i}" for i in range(7)), *(f"netD.main.{i}" for i in range(6)), "criterion"}],
    "vae": [{"model"}, {f"model.fc{i}" for i in (1, 21, 22, 3, 4)}, {f"model.fc{i}" for i in (1, 21, 22, 3, 4)}],
    "lstm_lm": [{"model"}, {"model.embed", "model.lstm", "model.decoder"}, {"model.embed", "model.lstm", "model.decoder"}],
    "checkpoint_reentrant": [{"model"}, {"model.stem", "model.blocks", "model.head"},
                             {"model.stem", "model.blocks.0", "model.blocks.1", "model.blocks.2", "model.head"}],
    "two_models": [{"regressor", "classifier"}, {f"{m}.{i}" for m in ("regressor", "classifier") for i in range(3)},
                   {f"{m}.{i}" for m in ("regressor", "classifier") for i in range(3)}],
}

pytestmark = pytest.mark.slow  # each script trains for a few seconds under the tracer


@pytest.fixture(scope="module")
def traces() -> dict[str, Trace]:
    return {}


def _trace(traces: dict[str, Trace], name: str) -> Trace:
    if name not in traces:
        traces[name] = gradviz.trace_script(PROGRAMS / f"{name}.py")
        assert traces[name].exception is None, traces[name].exception
    return traces[name]


def _boxes(source: str) -> list[str]:
    """The ids of the boxes a person sees (the legend is not one)."""
    return [n for n in re.findall(r"^\s*(\w+) \[label=", source, re.M) if n != "legend"]


def _groups(source: str) -> set[str]:
    return set(re.findall(r"^\s*group\d+ \[label=<<B>([\w.]+)</B>", source, re.M))


def _step_clusters(source: str) -> list[tuple[int, str]]:
    out = []
    for title in re.findall(r"label=<((?:↻ )?step [^>]*)>", source):
        rolled = re.match(r"↻ step ×(\d+) \(steps ([^)]*)\)", title)
        single = re.match(r"step (\d+)", title)
        out.append((int(rolled.group(1)), rolled.group(2)) if rolled else (1, single.group(1)))  # type: ignore[union-attr]
    return out


@pytest.mark.parametrize("name", SCRIPTS)
def test_steps_of_one_structure_are_one_box(traces: dict[str, Trace], name: str) -> None:
    trace = _trace(traces, name)
    source = render(trace).source
    clusters = _step_clusters(source)
    assert clusters == STEPS[name]
    assert sum(count for count, _ in clusters) == len(trace.events_of("backward"))
    titles = re.findall(r"label=<((?:↻ )?step [^>]*)>", source)
    assert len(set(titles)) == len(titles)  # no two step boxes alike


@pytest.mark.parametrize("name", SCRIPTS)
def test_depths_0_1_2_name_their_boxes_and_never_grow_shallower(traces: dict[str, Trace], name: str) -> None:
    trace = _trace(traces, name)
    counts = []
    for depth, expected in enumerate(BOXES[name]):
        source = render(trace, depth=depth).source
        assert _groups(source) == expected, depth
        counts.append(len(_boxes(source)))
    assert counts[0] <= counts[1] <= counts[2]
    assert counts[2] <= len(_boxes(render(trace, depth="all").source))
    # --collapse-modules is depth 1
    assert _groups(render(trace, collapse_modules=True).source) == BOXES[name][1]


@pytest.mark.dot
@pytest.mark.parametrize("name", SCRIPTS)
def test_default_view_fits_a_page(traces: dict[str, Trace], name: str, tmp_path: Path) -> None:
    trace = _trace(traces, name)
    diagram = render(trace)
    assert len(_boxes(diagram.source)) <= BOX_BUDGET
    png = tmp_path / f"{name}.png"
    diagram.save(png)
    width, height = struct.unpack(">II", png.read_bytes()[16:24])  # the IHDR chunk; dot draws at 96 dpi
    assert max(width, height) <= 2500, (width, height, diagram.messages)
    # what the one line printed claims is what dot drew: the boxes and the size of this very PNG
    assert not any("may not fit" in m or "larger than a page" in m for m in diagram.messages)
    for message in diagram.messages:
        claim = re.search(r"to fit a page: (\d+) boxes, ([\d,]+) × ([\d,]+) px at 96 dpi", message)
        assert claim is not None, message
        assert int(claim.group(1)) == len(_boxes(diagram.source))
        claimed = (int(claim.group(2).replace(",", "")), int(claim.group(3).replace(",", "")))
        assert abs(claimed[0] - width) <= 2 and abs(claimed[1] - height) <= 2, (claimed, width, height)


DEFAULT_DEPTH = re.compile(
    r"graph view: every op would be about \d+ boxes, so modules are drawn at depth (\d+) \(0-(\d+)\) to fit a page: "
    r"(\d+) boxes, ([\d,]+) × ([\d,]+) px at 96 dpi; --depth N draws another depth, --depth all every op"
)


def _depth(source: str) -> int:
    """How deep the deepest module box drawn is (`model` 0, `model.transformer` 1, ...)."""
    return max(path.count(".") for path in _groups(source))


@pytest.mark.dot
def test_nanogpt_default_depth_is_the_deepest_that_fits_and_draws_the_blocks(traces: dict[str, Trace]) -> None:
    """The depth is measured (dot's layout, so fonts and Graphviz's version may move it): what is fixed is the rule,
    the deepest depth that fits a page, and that the message, the caption and the picture agree on it."""
    trace = _trace(traces, "nanogpt")
    diagram = render(trace)
    (message,) = diagram.messages
    said = DEFAULT_DEPTH.fullmatch(message)
    assert said is not None, message
    depth, top, boxes = int(said.group(1)), int(said.group(2)), int(said.group(3))
    size = (int(said.group(4).replace(",", "")), int(said.group(5).replace(",", "")))
    assert top == 5  # the module tree: model > transformer > h > h.N > h.N.attn > its layers
    assert 3 <= depth < top  # collapsed to fit, deep enough to draw the blocks h.0 and h.1
    # the ModuleDict and ModuleList are never called; their children are still boxes named by path: each block,
    # as a box or opened into its attn and mlp boxes
    groups = _groups(diagram.source)
    assert "model.transformer.wte" in groups
    for block in ("model.transformer.h.0", "model.transformer.h.1"):
        assert block in groups or {f"{block}.attn", f"{block}.mlp"} <= groups, groups
    assert _depth(diagram.source) == depth
    assert boxes == len(_boxes(diagram.source)) <= BOX_BUDGET and max(size) <= PAGE_PX
    assert f"modules drawn at depth {depth} of 0-{top} to fit a page (--depth)" in diagram.source
    assert not render(trace, depth=depth).messages  # asked for: nothing to explain
    for deeper in range(depth + 1, top + 1):  # the deepest that fits: every deeper picture does not
        drawn = render(trace, depth=deeper)
        laid_out = layout(drawn.digraph)
        assert laid_out is not None
        assert len(_boxes(drawn.source)) > BOX_BUDGET or max(laid_out[0]) > PAGE_PX, (deeper, laid_out[0])


def test_vae_partial_batch_said_in_words(traces: dict[str, Trace]) -> None:
    source = render(_trace(traces, "vae"), depth="all").source
    assert "↻ step ×5 (steps 1-5): backward at line 48<BR/>step 5: batch of 6" in source
    assert "(16, 784)" in source and "(6, 784)" not in source  # drawn with the shapes of most steps


def test_a_step_that_differs_says_how(tmp_path: Path) -> None:
    script = tmp_path / "carried.py"
    script.write_text(textwrap.dedent("""\
        import torch
        cell = torch.nn.RNNCell(3, 3)
        h = torch.zeros(1, 3)
        for step in range(5):
            h = cell(torch.randn(1, 3), h)
            loss = h.pow(2).sum()
            loss.backward(retain_graph=True)
    """))
    source = render(gradviz.trace_script(script)).source
    # step 1 starts from zeros; every later step continues the graph of the one before (the state is not detached)
    titles = re.findall(r"label=<((?:↻ )?step [^>]*)>", source)
    assert titles == ["step 1: no carried state, backward at line 7", "↻ step ×4 (steps 2-5): backward at line 7"]


def test_window_draws_nothing_of_the_next_step(tmp_path: Path) -> None:
    script = tmp_path / "no_optimizer.py"
    script.write_text(textwrap.dedent("""\
        import torch
        w = torch.randn(4, 4, requires_grad=True)
        for i in range(5):
            loss = (torch.randn(2, 4) @ w).tanh().sum()
            loss.backward()
            with torch.no_grad():
                w -= 0.1 * w.grad
                w.grad = None
    """))
    trace = gradviz.trace_script(script, steps=2)
    assert trace.window is not None and trace.window.closed and trace.window.unit == "backward"
    # the window ends as backward 3 starts: the forward of step 3 was recorded, and is not drawn
    assert sum(1 for n in trace.nodes.values() if n.name == "TanhBackward0") == 3
    source = render(trace).source
    assert source.count("<B>TanhBackward0</B>") == 1
    assert _step_clusters(source) == [(2, "1-2")]


def test_cli_says_which_depth_and_takes_depth(tmp_path: Path) -> None:
    out = tmp_path / "g.dot"
    run = subprocess.run(
        [sys.executable, "-m", "gradviz", "render", str(PROGRAMS / "nanogpt.py"), "-o", str(out),
         "-o", str(tmp_path / "g.svg")],
        capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("graph view:")]
    said = DEFAULT_DEPTH.fullmatch(line)
    assert said is not None and said.group(2) == "5", line
    assert 3 <= int(said.group(1)) < 5 and _depth(out.read_text()) == int(said.group(1))  # what it says it drew
    run = subprocess.run(
        [sys.executable, "-m", "gradviz", "render", str(PROGRAMS / "nanogpt.py"), "--depth", "1", "-o", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "graph view:" not in run.stdout
    assert _groups(out.read_text()) == {"model.transformer", "model.lm_head"}
    bad = subprocess.run(
        [sys.executable, "-m", "gradviz", "render", str(PROGRAMS / "nanogpt.py"), "--depth", "-1", "-o", str(out)],
        capture_output=True, text=True, timeout=60,
    )
    assert bad.returncode == 2 and "--depth: must be 0 or more (0: one box per model), got -1" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_reentrant_checkpoint_blocks_are_named_and_marked_recomputed(traces: dict[str, Trace]) -> None:
    trace = _trace(traces, "checkpoint_reentrant")
    checkpoints = [n for n in trace.nodes.values() if n.name == "CheckpointFunctionBackward"]
    assert len(checkpoints) == 12  # three blocks, four steps
    # the block each one runs again, named as in the forward (not the module of the op after it, model.head), at the
    # line that called checkpoint(...) (not the line of the op after it, `return self.head(h)`)
    assert [n.module for n in checkpoints] == ["model.blocks.2", "model.blocks.1", "model.blocks.0"] * 4
    call = next(i for i, line in enumerate(trace.sources[trace.script].splitlines(), 1) if "= checkpoint(" in line)
    assert {(n.created.file, n.created.line) for n in checkpoints if n.created} == {(trace.script, call)}
    assert all(n.created is not None for n in checkpoints)
    source = render(trace, depth="all").source
    assert source.count("recomputed in backward (checkpoint, use_reentrant=True): its ops are not drawn") == 3
    assert not re.search(r"CheckpointFunctionBackward</B><BR/><FONT[^>]*>model\.head", source)
    for block in ("model.blocks.0", "model.blocks.1", "model.blocks.2"):
        assert re.search(rf"CheckpointFunctionBackward</B><BR/><FONT[^>]*>{re.escape(block)}  line {call}: h = checkpoint", source)
    block = render(trace, depth=2).source
    assert re.search(r"<B>model\.blocks\.1</B><BR/>.*1 op.*CheckpointFunctionBackward.*recomputed in backward", block)


def test_depth_must_be_a_depth(traces: dict[str, Trace]) -> None:
    trace = _trace(traces, "checkpoint_reentrant")
    with pytest.raises(ValueError, match="depth must be a whole number of at least 0 or 'all', got 'deep'"):
        render(trace, depth="deep")


def test_a_cut_edge_into_a_step_box_does_not_cross_its_title(traces: dict[str, Trace]) -> None:
    """`fake.detach()` in the generator's step cuts the path into the discriminator's step: that box, which the red
    edge enters from above, has its title at the bottom; the generator's box keeps its title on top."""
    source = render(_trace(traces, "dcgan")).source
    assert re.search(r"✂ fake\.detach\(\)\s+line \d+", source)
    titles = {m.group(2): "labelloc=b" in m.group(0)
              for m in re.finditer(r"label=<(↻ step ×\d+ \(steps ([^)]*)\)[^>]*)>[^\n]*", source)}
    assert titles == {"1, 3, 5": True, "2, 4, 6": False}


def test_a_metric_read_after_backward_stays_with_its_step(traces: dict[str, Trace]) -> None:
    # `scores.mean().item()` after each of three backward calls: the mean of the generator step's scores is made
    # after that backward and reads its graph; it is not state carried into the next iteration's first step
    trace = _trace(traces, "gan_metrics")
    source = render(trace, depth="all").source
    assert _step_clusters(source) == [(4, "1, 4, 7, 10"), (4, "2, 5, 8, 11"), (4, "3, 6, 9, 12")]
    assert "carries state" not in source and "no carried state" not in source
    # each step box draws its own metric: three MeanBackward0, one per backward line
    assert source.count("<B>MeanBackward0</B>") == 3


def test_episodes_of_different_length_are_one_step_box_with_the_range(traces: dict[str, Trace]) -> None:
    # 9 episodes of 5, 7 or 6 moves: the same graph but for how often the move loop ran
    trace = _trace(traces, "episodes_5_to_7")
    source = render(trace, depth="all").source
    assert _step_clusters(source) == [(9, "1-9")]
    assert "loop body ×5-7 iterations" in source
    assert source.count("<B>CatBackward0</B>") == 1 and source.count("<B>GatherBackward0</B>") == 1
    assert "other shapes" not in source and "batch of" not in source  # a longer episode's cat is not a batch


def test_a_wider_layer_is_not_called_a_batch_and_a_cut_off_graph_is_said(traces: dict[str, Trace]) -> None:
    # the batch is 64 in every step; the second layer's weight.T is (300, 300) where the first's is (200, 300)
    source = render(_trace(traces, "layerwise"), depth="all").source
    titles = re.findall(r"label=<((?:↻ )?step .*?)> style=", source)
    assert "batch of" not in source
    assert titles == [
        "↻ step ×3 (steps 1-3): backward at line 13",
        # step 4 also draws the first layer's output, made before its backward and cut off by the detach
        "step 4: also holds the graph cut off by torch.relu(layer(inputs)).detach() at line 15, backward at line 13",
        # the second layer is another model under the same loop variable: its steps train other parameters
        "↻ step ×2 (steps 5-6): the same ops on other parameters (layer#2.weight, layer#2.bias), backward at line 13",
    ]


def test_gradient_accumulation_counts_optimizer_steps_as_the_window_does(tmp_path: Path) -> None:
    script = PROGRAMS / "accumulate.py"
    whole = render(gradviz.trace_script(script), depth="all").source
    assert _step_clusters(whole) == [(4, "1-4")]
    assert "↻ step ×4 (steps 1-4), 2 backward calls each: backward at line 12" in whole
    windowed = gradviz.trace_script(script, steps=2)
    assert windowed.window is not None and windowed.window.unit == "step"
    assert windowed.window.describe().startswith("steps 1-2 ")
    assert "↻ step ×2 (steps 1-2), 2 backward calls each: backward at line 12" in render(windowed).source


def test_an_op_saving_many_tensors_draws_them_as_one_box(traces: dict[str, Trace]) -> None:
    # the LSTM's backward node saves a dozen tensors; kept out of its module box by the TBPTT cut, it would draw a
    # strip of them. They are one box that says how many; an op saving a few still draws each
    trace = _trace(traces, "lstm_lm")
    source = render(trace, depth="all").source
    many = [n for n in trace.nodes.values() if sum(s.tensor is not None for s in n.saved) > 4]
    assert many, "the LSTM's node saves more than 4 tensors"
    counts = {sum(s.tensor is not None for s in n.saved) for n in many}
    for count in counts:
        assert f"{count} tensors saved for backward" in source
    assert re.search(r"\[label=<mat2: \(\d+, \d+\)>", source)  # the decoder's matmul still draws its own
