"""Steps the sentinel traced again after the window, as every medium names them (issue 35, item 3): a 12-step loop
traced with `--steps 3`, whose validation pass after step 6 keeps each batch's graph (`val_loss += loss`), is
re-armed there; the steps it records again are steps 7 and 8 of the run, never "step 4, 5" (the next after the
window), and the count of graphs kept alive is what PyTorch keeps alive."""

from __future__ import annotations

import gc
import json
import re
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest

import gradviz
from gradviz.explorer import explorer_document

from .conftest import svg_texts

PROGRAM = '''\
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
batches = [(torch.randn(4, 8), torch.randint(0, 4, (4,))) for _ in range(5)]
for step in range(1, 13):
    model.train()
    loss = F.cross_entropy(model(torch.randn(8, 8)), torch.randint(0, 4, (8,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 6:
        model.eval()
        val_loss = 0.0
        for x, y in batches:
            val_loss += F.cross_entropy(model(x), y)
print("done")
'''
VAL_LINE = 19  # `val_loss += F.cross_entropy(model(x), y)`


def graphs_alive_in_pytorch(program: str = PROGRAM) -> int:
    """The program run plainly, a weak reference kept to each validation batch's ReLU output (saved by the ReLU
    and the linear layer after it, so held by that batch's graph alone): how many graphs PyTorch itself keeps
    alive at the end (what `val_loss` holds). A forward hook changes no result or gradient."""
    source = program.replace("model.eval()", "model.eval(); model[2].register_forward_hook("
                             "lambda module, args, output: kept.append(weakref.ref(output)))")
    scope: dict[str, Any] = {"kept": [], "weakref": weakref, "__name__": "__main__"}
    exec(compile(source, "<plain run>", "exec"), scope)  # noqa: S102 - our own test program
    gc.collect()
    return len({id(ref()) for ref in scope["kept"] if ref() is not None})  # (a hook added at each eval() sees each once)


def run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gradviz", *args], cwd=folder, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("rearmed")
    (folder / "train.py").write_text(PROGRAM, encoding="utf-8")
    out: dict[str, Any] = {"folder": folder}
    rendered = run(folder, "render", "train.py", "--steps", "3", "-o", "graph.svg", "-o", "trace.json")
    assert rendered.returncode == 0, rendered.stderr
    memory = run(folder, "render", "trace.json", "--view", "memory", "-o", "memory.svg")
    assert memory.returncode == 0, memory.stderr
    chart = run(folder, "render", "trace.json", "--view", "graph-memory", "-o", "chart.svg")
    assert chart.returncode == 0, chart.stderr
    for form in ("json", "sarif", "github", "text"):
        result = run(folder, "check", "train.py", "--steps", "3", "--format", form)
        assert result.returncode == 0, result.stderr
        out[form] = result.stdout
    out["render"] = rendered
    return out


def test_pytorch_keeps_every_validation_batchs_graph_and_check_and_render_say_that_many(outputs) -> None:
    truth = graphs_alive_in_pytorch()
    assert truth == 5
    (kept,) = [f for f in json.loads(outputs["json"])["findings"] if f["kind"] == "graph_kept_alive"]
    assert (kept["line"], kept["count"]) == (VAL_LINE, truth)
    # steps 9-12 ran untraced after the step traced again: the count is what the traced steps keep, and says so
    assert f"the graphs of {truth} iterations (counted in the steps traced" in kept["message"]
    trace = gradviz.Trace.load(outputs["folder"] / "trace.json")
    (rendered,) = [f for f in gradviz.diagnose(trace) if f.kind.value == "graph_kept_alive"]
    assert rendered.count == truth and rendered.message == kept["message"]
    # the run ended normally: nothing ran out of memory
    assert "out of memory" not in kept["message"] and "for as long as the loop goes on" in kept["message"]


def test_the_steps_traced_again_keep_their_numbers_in_the_run(outputs) -> None:
    trace = gradviz.Trace.load(outputs["folder"] / "trace.json")
    assert [(e.step, e.kind) for e in trace.window.rearmed] == [(6, "validation")]
    # the graph view, through dot: the boxes of the steps traced again are steps 7 and 8
    texts = " | ".join(svg_texts(outputs["folder"] / "graph.svg"))
    assert re.search(r"step 7: .*backward at line 13", texts) and "validation after step 6" in texts
    assert re.search(r"step 8: .*backward at line 13", texts)
    assert "traced again after the validation after step 6" in texts
    assert not re.search(r"\bsteps? [45]\b", texts), texts
    # the memory view: the last step drawn is step 8 of the run, the 5th traced
    memory = " | ".join(svg_texts(outputs["folder"] / "memory.svg"))
    assert "step 8, the last of 5 traced" in memory and "step 5 of 5" not in memory
    # the page's document: its step picker and boxes read the same numbers
    document = explorer_document(trace, gradviz.diagnose(trace))
    assert [s["number"] for s in document["steps"]] == [1, 2, 3, 7, 8]
    # the graph-memory chart's x axis (matplotlib, its text kept as text): a tick per backward, by step number
    x_axis = (outputs["folder"] / "chart.svg").read_text().split('id="matplotlib.axis_2"')[0]
    ticks = re.findall(r'id="xtick_\d+".*?<text[^>]*>\s*(\d+)\s*</text>', x_axis, re.S)
    assert ticks == ["1", "2", "3", "7", "8"], ticks
    assert sorted(trace.run_steps().values()) == [7, 8]  # the one place they are derived


def test_sarif_and_github_say_what_the_window_covered_and_what_was_traced_again(outputs) -> None:
    # (the model called in eval mode, never recorded so, re-arms the window before its forward)
    coverage = "steps 1-3 of 12 traced; traced again after step 6: a model's training flag changed at line 19 (validation)"
    (sarif_run,) = json.loads(outputs["sarif"])["runs"]
    said = sarif_run.get("properties", {}).get("window")
    assert said is not None, "the SARIF log does not say that only part of the run was traced"
    assert said["coverage"] == coverage and said["description"] == "steps 1-3 of 12 traced"
    assert [(r["step"], r["kind"], r["line"], r["file"], r["label"]) for r in said["rearmed"]] == [
        (6, "validation", VAL_LINE, "train.py", "validation after step 6")]
    notices = [line for line in outputs["github"].splitlines() if line.startswith("::notice")]
    assert "::notice::gradviz: steps 1-3 of 12 traced" in notices
    assert ("::notice file=train.py,line=19,title=gradviz%3A validation after step 6::traced again after step 6: "
            "a model's training flag changed at line 19 (validation)") in notices
    assert json.loads(outputs["json"])["window"]["coverage"] == coverage


def test_a_count_of_graphs_kept_alive_is_a_lower_bound_when_the_line_ran_untraced_too(tmp_path: Path) -> None:
    """The validation runs after step 6 and again after step 10, accumulating into one `val_loss`: PyTorch keeps
    10 graphs alive at the end. The sentinel traces the first validation (new code) but not the second (code it
    has seen), so gradviz counts 5: the message must say that the count covers the steps traced only."""
    program = PROGRAM.replace("    if step == 6:\n        model.eval()\n        val_loss = 0.0\n",
                              "    if step in (6, 10):\n        model.eval()\n")
    program = program.replace("for step in range(1, 13):", "val_loss = 0.0\nfor step in range(1, 13):")
    assert graphs_alive_in_pytorch(program) == 10
    (tmp_path / "train.py").write_text(program, encoding="utf-8")
    result = run(tmp_path, "check", "train.py", "--steps", "3", "--format", "json")
    assert result.returncode == 0, result.stderr
    (kept,) = [f for f in json.loads(result.stdout)["findings"] if f["kind"] == "graph_kept_alive"]
    assert (kept["line"], kept["count"]) == (VAL_LINE, 5)
    assert ("the graphs of 5 iterations (counted in the steps traced: the run went on untraced and may keep more) "
            "stay alive at the end") in kept["message"]
