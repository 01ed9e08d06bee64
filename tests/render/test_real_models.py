"""Pictures of real models: memory views that fit, no recorder id anywhere, no false write claim."""

from __future__ import annotations

import html
import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import gradviz
from gradviz.model import EventKind, Trace
from gradviz.render import render

ROOT = Path(__file__).resolve().parents[2]
REALISTIC = ROOT / "tests" / "programs" / "realistic"

#: a recorder id as a word of its own: `t19`, `s23`, `v23`, `n5` (`v0 → v1` versions are words too: see _ids)
_ID = re.compile(r"(?<![\w.\-/#])([tsvn])(\d+)(?![\w(])")


def _ids(text: str) -> list[str]:
    """Recorder ids in visible text. `v<digits>` is also how every view writes a version number (`v0 → v1`,
    `saved at v0`, a table's `v0  v1`): there, only a counter titled by its id (`version counter v23`) is one."""
    return [match.group(0) for match in _ID.finditer(text)
            if match.group(1) != "v" or text[max(0, match.start() - 8):match.start()] == "counter "]


def test_the_id_scanner_tells_ids_from_versions() -> None:
    assert _ids("storage s23 · version counter v23: t19 = h1.data, n5") == ["s23", "v23", "t19", "n5"]
    assert _ids("c: v0 → v1, out: v0 → v0 (not noticed); saved at v0, now v2 (v3); fc1(x), h1.data, x1") == []
    assert _ids("version counter of x\nv0, never moved") == []


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.fixture(scope="module")
def gpt2() -> Trace:
    pytest.importorskip("transformers")  # the test extra; a failure under CI=true (tests/conftest.py)
    return gradviz.trace_script(REALISTIC / "gpt2_config.py")


@pytest.fixture(scope="module")
def vae() -> Trace:
    return gradviz.trace_script(REALISTIC / "vae.py")


@pytest.fixture(scope="module")
def lstm_lm() -> Trace:
    return gradviz.trace_script(REALISTIC / "lstm_lm.py")


# ---------------------------------------------------------------------- the memory view of a real model
@pytest.mark.dot
@pytest.mark.parametrize("name", ["gpt2", "vae", "lstm_lm"])
def test_memory_view_of_a_real_model_fits_3000_px(name: str, request: pytest.FixtureRequest) -> None:
    trace = request.getfixturevalue(name)
    source = render(trace, "memory", findings=gradviz.diagnose(trace)).source
    png = subprocess.run(["dot", "-Tpng", "-Gdpi=96"], input=source.encode(), capture_output=True, check=True).stdout
    width, height = _png_size(png)
    assert height <= 3000, f"{name}: memory view {width}x{height} px at 96 dpi"
    # the parameters are one row per module, not a box (and counter, and storage) each
    assert re.search(r"<B>parameters by module: \d+ in \d+ modules", source)


def test_gpt2_parameters_grouped_by_module_with_what_wrote_them(gpt2: Trace) -> None:
    source = render(gpt2, "memory").source
    table = re.search(r"<B>parameters by module: (\d+) in (\d+) modules.*?</TABLE>", source, re.S)
    assert table is not None
    rows = {cells[0]: cells for row in re.findall(r"<TR>(.*?)</TR>", table.group(0))[1:]
            if (cells := [html.unescape(c) for c in re.findall(r"<TD[^>]*>(?:<FONT[^>]*>)?([^<]*)", row)])}
    assert rows["model.transformer.h.0.attn.c_attn"][1] == "weight, bias"
    # what wrote a module's parameters: one writer a line
    assert rows["model.transformer.h.1.mlp.c_fc"][3] == "initialised (line 7)"
    assert "initialised (line 7)<BR/>AdamW.step() ×3</FONT>" in html.unescape(
        next(row for row in re.findall(r"<TR>(.*?)</TR>", table.group(0)) if ">model.transformer.h.1.mlp.c_fc<" in row))
    # the tied embedding (lm_head.weight is the same Parameter object as transformer.wte.weight): one row
    assert rows["model.transformer.wte"][1] == "weight" and "model.lm_head" not in rows
    assert not re.search(r"<B>model\.transformer\.[\w.]+\.(weight|bias)</B>", source)  # none drawn one by one
    # construction writes are setup: no write box for `model = GPT2LMHeadModel(config)`
    assert "line 7: model = GPT2LMHeadModel" not in source


def test_one_data_alias_a_step_does_not_fill_the_memory_view(trace_of) -> None:  # type: ignore[no-untyped-def]
    trace = trace_of(
        "import torch\n"
        "model = torch.nn.Linear(4, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for step in range(30):\n"
        "    snapshot = model.weight.data\n"
        "    loss = model(torch.randn(3, 4)).sum()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    source = render(trace, "memory").source
    drawn = re.findall(r"<B>snapshot</B>  <FONT[^>]*>([^<]*)</FONT>", source)
    assert drawn == ["×30 (steps 1-30)"]  # one drawn for all thirty (it was the first and the last, then one)
    assert "snapshot = model.weight.data at line 5: made 30 times (steps 1-30), drawn once, titled ×30 (steps 1-30)" \
        in html.unescape(source)
    assert "model.weight" in source  # what it aliases: one parameter for every step, drawn (no mark)


# ---------------------------------------------------------------------- a GAN's per-step pair, drawn once
GAN = """
import torch
import torch.nn as nn
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
optD = torch.optim.SGD(D.parameters(), lr=0.01)
optG = torch.optim.SGD(G.parameters(), lr=0.01)
bce = nn.BCEWithLogitsLoss()
for step in range(100):
    fake = G(torch.randn(8, 4))
    x = fake.detach()
    lossD = bce(D(torch.randn(8, 2)), torch.ones(8, 1)) + bce(D(x), torch.zeros(8, 1))
    optD.zero_grad()
    lossD.backward()
    optD.step()
    lossG = bce(D(fake), torch.ones(8, 1))
    optG.zero_grad()
    lossG.backward()
    optG.step()
"""


def _titles(source: str) -> dict[str, list[str]]:
    """Tensor box title -> the ×N mark of each box with that title ("" when none)."""
    out: dict[str, list[str]] = {}
    for node, title, mark in re.findall(r"^\s*(tensor_\w+) \[label=<<TABLE[^>]*><TR><TD[^>]*><FONT[^>]*><B>([^<]*)</B>"
                                        r"(?:  <FONT[^>]*>([^<]*)</FONT>)?", source, re.M):
        out.setdefault(html.unescape(title), []).append(html.unescape(mark))
    return out


def _height_at_96_dpi(source: str) -> int:
    png = subprocess.run(["dot", "-Tpng", "-Gdpi=96"], input=source.encode(), capture_output=True, check=True).stdout
    return _png_size(png)[1]


@pytest.mark.dot
def test_a_100_step_gan_draws_its_detach_pair_once(trace_of) -> None:  # type: ignore[no-untyped-def]
    trace = trace_of(GAN)
    findings = gradviz.diagnose(trace)
    source = render(trace, "memory", findings=findings).source
    titles = _titles(source)
    # D's step and G's step are steps 1, 2 / 3, 4 / ...: the pair is made in the odd ones, as the graph view counts
    assert titles["x"] == ["×100 (steps 1, 3, …, 199)"] and titles["fake"] == ["×100 (steps 1, 3, …, 199)"]
    assert len(re.findall(r"^\s*storage_\w+ \[", source, re.M)) <= 3  # fake's storage once, not a hundred times
    assert "x = fake.detach() at line 11: made 100 times (steps 1, 3, …, 199), drawn once" in html.unescape(source)
    assert _height_at_96_dpi(source) <= 3000


@pytest.mark.dot
def test_the_dcgan_pair_is_drawn_once_with_its_finding(tmp_path: Path) -> None:
    trace = gradviz.trace_script(REALISTIC / "dcgan.py")
    findings = gradviz.diagnose(trace)
    cut = next(f for f in findings if f.kind.value == "cut_edge")
    source = render(trace, "memory", findings=findings).source
    titles = _titles(source)
    assert titles["x"] == ["×3 (steps 1, 3, 5)"] and titles["fake"] == ["×3 (steps 1, 3, 5)"]
    # the pair drawn is the one the finding names, in the finding's colour
    for tid in cut.tensors:
        assert re.search(rf'^\s*tensor_{tid} \[label=<<TABLE BORDER="3" [^>]*COLOR="red"', source, re.M), tid
    assert _height_at_96_dpi(source) <= 3000


# ---------------------------------------------------------------------- every claim true
def test_a_parameter_the_optimizer_skipped_is_not_drawn_as_written(gallery: Path) -> None:
    """plot_01: `model.layer1.weight` gets no gradient (the cut at line 29), so SGD.step() skips it: its bytes
    and its version stay put, and the memory view must not claim a write, noticed or not."""
    trace = gradviz.trace_script(gallery / "plot_01_testdetach.py")
    weight = trace.tensor("model.layer1.weight")
    steps = trace.events_of(EventKind.OPTIMIZER_STEP)
    assert steps and all(weight.id not in e.data["changed"] for e in steps)  # PyTorch's own word: skipped
    assert all(weight.id not in {v.tensor for v in e.written()} for e in steps)
    source = html.unescape(render(trace, "memory", findings=gradviz.diagnose(trace)).source)
    step_box = re.search(r"write_\d+ \[label=<.*?SGD\.step\(\).*?</TABLE>>\]", source)
    assert step_box is not None
    assert "model.layer2.weight: v3 → v4" in step_box.group(0)
    assert "model.layer1.weight" not in step_box.group(0)
    assert "v1 → v1 (not noticed)" not in source
    # its counter starts where it was before nn.Linear filled it (v0), not at the version it had when first seen
    assert "v0 → v1 (line 24)" in source and "v1 → v1 (line 24)" not in source
    rows = gradviz.render(trace, "timeline").source
    assert "model.layer1.weight: v1 → v1" not in html.unescape(rows)


# ---------------------------------------------------------------------- every name a name
_PROGRAMS = [
    ROOT / "gallery" / "plot_01_testdetach.py",
    ROOT / "gallery" / "plot_02_data_silent.py",
    ROOT / "gallery" / "plot_03_detach_raises.py",
    REALISTIC / "vae.py",
    REALISTIC / "dcgan.py",
]


def _visible(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".svg":
        return "\n".join(html.unescape(t) for t in re.findall(r"<text[^>]*>(.*?)</text>", text, re.S))
    if path.suffix == ".dot":  # the labels, not the node names (`tensor_t1` is an identifier, never drawn)
        attributes = re.findall(r"^\s*[\w\"]+(?: -> [\w\"]+)? \[(.*)\]\s*$", text, re.M)
        return "\n".join(html.unescape(re.sub(r"<[^>]+>", " ", line)) for line in attributes)
    if path.suffix == ".html":
        text = re.sub(r"<(script|style|title)[^>]*>.*?</\1>", " ", text, flags=re.S)
        return html.unescape(re.sub(r"<[^>]+>", " ", text))
    return text


@pytest.mark.dot
@pytest.mark.parametrize("program", _PROGRAMS, ids=lambda p: p.stem)
def test_no_recorder_id_in_any_output(program: Path, tmp_path: Path) -> None:
    def gradviz_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "gradviz", *args], capture_output=True, text=True, timeout=300)

    saved = tmp_path / "trace.json"
    traced = gradviz_cli("render", str(program), "-q", "-o", str(tmp_path / "graph.dot"), "-o",
                         str(tmp_path / "graph.svg"), "-o", str(saved))
    assert saved.exists(), traced.stderr
    outputs = [tmp_path / "graph.dot", tmp_path / "graph.svg"]
    for view in ("memory", "timeline"):  # from the saved trace: the same views, without running the program again
        outputs += [tmp_path / f"{view}.dot", tmp_path / f"{view}.svg"]
        run = gradviz_cli("render", str(saved), "--view", view, "-q", "-o", str(outputs[-2]), "-o", str(outputs[-1]))
        assert outputs[-1].exists(), run.stderr
    outputs.append(tmp_path / "report.html")
    gradviz_cli("render", str(saved), "--view", "report", "-q", "-o", str(outputs[-1]))
    check = gradviz_cli("check", str(saved))
    messages = json.loads(gradviz_cli("check", str(saved), "--json").stdout)["findings"]
    texts = {str(out.name): _visible(out) for out in outputs}
    texts["check"] = check.stdout + check.stderr
    texts["check --json"] = "\n".join(str(v) for f in messages for k, v in f.items()
                                     if isinstance(v, str) and k not in ("kind", "severity", "file"))
    assert len(texts["memory.svg"]) > 100 and messages is not None
    leaks = {name: _ids(text) for name, text in texts.items() if _ids(text)}
    assert not leaks, leaks


# ---------------------------------------------------------------------- the graph-memory chart shows what grows
def _nodes_at_backwards(trace: Trace) -> list[int]:
    from gradviz.analysis.memory_profile import memory_profile

    profile = memory_profile(trace)
    counts = []
    for seq, _line in profile.backwards:
        alive = [n for at, n in profile.live_nodes if at <= seq]
        counts.append(alive[-1] if alive else 0)
    return counts


def test_live_nodes_rise_step_by_step_when_total_loss_keeps_the_graphs(gallery: Path) -> None:
    """`total_loss += loss`: backward frees every step's saved tensors (the bytes fall back), but the nodes stay
    linked to total_loss: the chart's node curve climbs by the same amount each step."""
    counts = _nodes_at_backwards(gradviz.trace_script(gallery / "plot_22_total_loss_kept_alive.py"))
    assert len(counts) == 6
    growth = [b - a for a, b in zip(counts, counts[1:])]
    assert len(set(growth)) == 1 and growth[0] > 0, counts
    from gradviz.picture.headline import headline

    assert f"grows by +{growth[0]} live autograd nodes per step" in headline(
        gradviz.trace_script(gallery / "plot_22_total_loss_kept_alive.py"))


def test_live_nodes_stay_flat_in_a_clean_loop(gallery: Path) -> None:
    counts = _nodes_at_backwards(gradviz.trace_script(gallery / "plot_19_clean_training_loop.py"))
    assert len(counts) > 2 and len(set(counts[1:])) == 1, counts


# ---------------------------------------------------------------------- static SVGs scale to their container
@pytest.mark.dot
def test_svgs_scale_to_their_container(gallery: Path, tmp_path: Path) -> None:
    trace = gradviz.trace_script(gallery / "plot_02_data_silent.py")
    for view in ("graph", "memory", "timeline", "graph-memory"):
        diagram = render(trace, view)
        for svg in (diagram.svg(), diagram._repr_mimebundle_()["image/svg+xml"],
                    diagram.save(tmp_path / f"{view}.svg").read_text(encoding="utf-8")):
            root = re.search(r"<svg\b[^>]*>", svg).group(0)
            assert 'width="100%"' in root and "viewBox=" in root and "height=" not in root.replace("height: auto", "")
            natural = re.search(r"max-width: ([\d.]+)(pt|px)", root)
            assert natural is not None and float(natural.group(1)) > 50


# ---------------------------------------------------------------------- manual SGD through `.data`
@pytest.fixture(scope="module")
def manual_sgd() -> Trace:
    return gradviz.trace_script(REALISTIC / "manual_sgd_lm.py")


def _dot_height(source: str) -> int:
    png = subprocess.run(["dot", "-Tpng", "-Gdpi=96"], input=source.encode(), capture_output=True, check=True).stdout
    return _png_size(png)[1]


@pytest.mark.dot
def test_manual_sgd_through_data_is_a_row_of_the_parameter_table(manual_sgd: Trace) -> None:
    source = render(manual_sgd, "memory", findings=gradviz.diagnose(manual_sgd)).source
    text = html.unescape(source)
    # every parameter is updated at line 34 through `.data` in each of the 12 steps: one row per module says so
    assert "line 34: p.data.add_(p.grad, alpha=-lr) ×12 — bytes changed, version not (through .data)" in text
    assert re.search(r"<B>parameters by module: 11 in 3 modules", source)
    # no parameter nor its `.data` alias drawn one by one
    assert not re.search(r"<B>model\.[\w.]+(\.data)?</B>", source)
    assert "line 34: p.data.add_" not in re.sub(r"<B>parameters by module.*?</TABLE>", "", text, flags=re.S)
    # the aliases as one note line for the line that makes them, not one per parameter
    assert text.count("`.data` at line 34") == 1
    assert "`.data` at line 34: 132 aliases of 11 parameters" in text
    assert "no tensor shares memory" not in text  # the `.detach()` state and saved tensors say otherwise
    assert _dot_height(source) <= 3000


@pytest.mark.dot
def test_manual_sgd_timeline_folds_each_call_site_over_the_parameters(manual_sgd: Trace) -> None:
    from gradviz.picture.timeline_rows import timeline_rows

    rows = timeline_rows(manual_sgd, gradviz.diagnose(manual_sgd))
    updates = [r for r in rows if r.line == 34]
    assert updates and all(r.alias.startswith("11 tensors: model.encoder.weight") for r in updates)
    assert sum(r.count for r in updates) == 12  # one row per step (folded ×N), not 22 per step
    assert "11 tensors: bytes changed, version unchanged (written through an alias with its own counter: .data)" \
        in updates[0].versions_lines
    clips = [r for r in rows if r.line == 32]
    assert sum(r.count for r in clips) == 12 and clips[0].versions_lines == ["11 tensors written, v0 → v1 each"]
    # `model = RNNModel().to("cpu")` (Module._apply sets each parameter's .data): part of the set-up row
    assert not [r for r in rows if r.line == 22]
    setup = [r for r in rows if r.alias == "model set up"]
    assert setup[0].versions_lines == ["11 parameters initialised in place (11 writes at lines 13-15)",
                                          "11 parameters moved: .data set at line 22 (Module.to / _apply)"]
    assert _dot_height(render(manual_sgd, "timeline", findings=gradviz.diagnose(manual_sgd)).source) <= 3000


@pytest.mark.dot
@pytest.mark.parametrize("program", ["dcgan.py", "lstm_lm.py"])
def test_timeline_of_a_realistic_program_fits_3000_px(program: str) -> None:
    trace = gradviz.trace_script(REALISTIC / program)
    source = render(trace, "timeline", findings=gradviz.diagnose(trace)).source
    assert _dot_height(source) <= 3000
    # the model's set-up is one row, and no call site over many tensors takes a row per tensor
    assert html.unescape(source).count("model set up") == 1
