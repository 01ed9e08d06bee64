"""The sentinel: after the step window, a step that runs something new is traced again, whole, and diagnosed.

`gradviz check` in a subprocess, as users run it, on 2,000-step runs of tiny models (a few seconds each): a validation
pass that keeps its graphs alive, layers unfrozen at step 800 behind a `.detach()`, and both fixed.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path
from typing import Any

import pytest
import torch

import gradviz
from gradviz import Trace

ROOT = Path(__file__).resolve().parents[2]

VALIDATION = """\
import sys
import torch

torch.manual_seed(0)
steps = int(sys.argv[1])
fixed = sys.argv[2] == "fixed"
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 4), torch.randn(8, 1)
batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
for step in range(1, steps + 1):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    if step % 500 == 0:
        model.eval()
        val_loss = 0.0
        for vx, vy in batches:
            out = model(vx)
            batch_loss = torch.nn.functional.mse_loss(out, vy)
            if fixed:
                val_loss += batch_loss.item()
            else:
                val_loss += batch_loss
        model.train()
        print("validation", step, round(float(val_loss), 6))
"""
VALIDATION_LINE = 25  # `val_loss += batch_loss`
# `out = model(vx)`: the model called in eval mode, never recorded so (the window re-arms before its forward, so the
# first batch is recorded inside its modules; its first new call site, F.mse_loss at line 21, comes after that batch)
VALIDATION_REARM = 20
REARM_REASON = "a model's training flag changed"
VALIDATION_FIXED_LINE = 23  # `val_loss += batch_loss.item()`

UNFREEZE = """\
import sys
import torch

torch.manual_seed(0)
steps = int(sys.argv[1])
fixed = sys.argv[2] == "fixed"
backbone = torch.nn.Linear(4, 8)
head = torch.nn.Linear(8, 1)


def set_trainable(module, flag):
    for p in module.parameters():
        p.requires_grad_(flag)


set_trainable(backbone, False)
opt = torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.01)
x, y = torch.randn(8, 4), torch.randn(8, 1)
for step in range(steps):
    if step == 800:
        set_trainable(backbone, True)
    features = torch.relu(backbone(x))
    if not fixed:
        features = features.detach()
    loss = torch.nn.functional.mse_loss(head(features), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("backbone moved", bool((backbone.weight.grad is not None)))
"""
UNFREEZE_FLIP_LINE = 13  # `p.requires_grad_(flag)`: a site the window saw (freezing), now turning it on
UNFREEZE_CUT_LINE = 24  # `features = features.detach()`


def _check(tmp_path: Path, text: str, *args: str, options: tuple[str, ...] = ()) -> tuple[dict[str, Any], str]:
    """`gradviz check --json prog.py -- args`: its JSON document, and the program's own output (on stderr)."""
    script = tmp_path / "prog.py"
    script.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "gradviz", "check", "--json", *options, str(script), "--", *args],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout), proc.stderr


def _text(tmp_path: Path, text: str, *args: str) -> str:
    script = tmp_path / "prog.py"
    script.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "gradviz", "check", str(script), "--", *args],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )
    return proc.stdout


def _untraced(tmp_path: Path, text: str, *args: str) -> str:
    script = tmp_path / "plain.py"
    script.write_text(text)
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=300).stdout


def test_pytorch_itself_the_validation_graphs_stay_alive_and_the_cut_starves_the_unfrozen_layers():
    """The two bugs, as PyTorch has them: `val_loss += loss` without no_grad holds a graph; a `.detach()` after
    the backbone leaves its weights without a gradient once they require one."""
    model = torch.nn.Linear(4, 1)
    val_loss = 0.0
    for _ in range(3):
        val_loss += torch.nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1))
    assert val_loss.grad_fn is not None and val_loss.requires_grad
    backbone, head = torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)
    head(torch.relu(backbone(torch.randn(8, 4))).detach()).sum().backward()
    assert backbone.weight.grad is None and head.weight.grad is not None


def test_a_validation_pass_that_keeps_graphs_alive_is_found_after_the_window(tmp_path):
    document, program_output = _check(tmp_path, VALIDATION, "2000", "buggy")
    kinds = [(f["kind"], f["line"]) for f in document["findings"]]
    assert kinds == [("graph_kept_alive", VALIDATION_LINE)]
    window = document["window"]
    assert window["description"] == "steps 1-100 of 2,000 traced"
    # the first validation (after step 500) is traced again; the ones after it run code already seen
    assert [(r["step"], r["reason"], r["kind"], r["line"]) for r in window["rearmed"]] == [
        (500, REARM_REASON, "validation", VALIDATION_REARM)
    ]
    # the program printed what it prints untraced (its output goes to stderr under --json, with its warnings)
    printed = [line for line in program_output.splitlines() if line.startswith("validation")]
    assert printed == _untraced(tmp_path, VALIDATION, "2000", "buggy").splitlines()


def test_the_text_report_names_the_step_traced_again(tmp_path):
    out = _text(tmp_path, VALIDATION, "1000", "buggy")
    assert f"gradviz: traced again after step 500: {REARM_REASON} at line {VALIDATION_REARM} (validation)" in out
    assert "1 warning" in out and f"prog.py:{VALIDATION_LINE}" in out


def test_the_page_says_what_the_findings_cover_as_the_text_does(tmp_path):
    """The page's header names the step traced again after the window (its finding comes from there), in the words
    the CLI prints, not only "steps 1-100 of 1,000 traced"."""
    from gradviz.explorer import explorer_document

    script = tmp_path / "prog.py"
    script.write_text(VALIDATION)
    trace = gradviz.trace_script(script, ["1000", "buggy"], steps=100)
    window = explorer_document(trace, gradviz.diagnose(trace))["facts"]["window"]
    assert window == (
        f"steps 1-100 of 1,000 traced; traced again after step 500: {REARM_REASON} at line "
        f"{VALIDATION_REARM} (validation). Findings and views cover these steps."
    )
    assert trace.window is not None and window.startswith(trace.window.describe())
    # the graph view's header says the same
    source = html.unescape(gradviz.render(trace, "graph").source)  # (DOT's HTML labels escape the apostrophe)
    assert f"traced again after step 500: {REARM_REASON} at line {VALIDATION_REARM} (validation)" in source


def test_the_fixed_validation_pass_is_traced_again_and_has_no_finding(tmp_path):
    document, _ = _check(tmp_path, VALIDATION, "2000", "fixed")
    assert document["findings"] == []
    assert [(r["step"], r["kind"], r["line"]) for r in document["window"]["rearmed"]] == [
        (500, "validation", VALIDATION_REARM)
    ]


def test_no_sentinel_traces_the_window_only(tmp_path):
    document, _ = _check(tmp_path, VALIDATION, "2000", "buggy", options=("--no-sentinel",))
    assert document["findings"] == []  # the validation ran after the window: not seen, as before the sentinel
    assert document["window"]["rearmed"] == []


def test_layers_unfrozen_at_step_800_behind_a_detach_are_found(tmp_path):
    document, _ = _check(tmp_path, UNFREEZE, "2000", "buggy")
    dead = [f for f in document["findings"] if f["kind"] == "dead_parameter"]
    assert [(f["line"], f["parameters"]) for f in dead] == [(UNFREEZE_CUT_LINE, ["backbone.weight", "backbone.bias"])]
    rearmed = document["window"]["rearmed"]
    # the flip is made at a site the window saw (the same helper froze them): the flip itself re-arms the window
    assert (rearmed[0]["step"], rearmed[0]["reason"], rearmed[0]["kind"], rearmed[0]["line"]) == (
        800, "requires_grad turned on", "unfreezing", UNFREEZE_FLIP_LINE
    )


def test_unfrozen_layers_without_the_cut_have_no_finding(tmp_path):
    document, _ = _check(tmp_path, UNFREEZE, "2000", "fixed")
    assert document["findings"] == []
    assert document["window"]["rearmed"][0]["kind"] == "unfreezing"


def test_the_first_validation_batch_is_recorded_inside_its_modules(tmp_path):
    """`model.eval()` then `model(vx)`: the model called with a flag it was never recorded with re-arms the window
    before its forward, so the first of the 3 validation batches is recorded as the others are: each of its linear
    layers a node inside its module, made at the model's call (line 20), not op by op as nodes found later, made
    before recording restarted (without a module, at the loss's line 21)."""
    script = tmp_path / "prog.py"
    script.write_text(VALIDATION)
    trace = gradviz.trace_script(script, ["1000", "buggy"], steps=100)
    (rearmed,) = trace.window.rearmed
    validation = [n for n in trace.nodes.values() if n.name == "AddmmBackward0" and n.created is not None
                  and n.created.line == VALIDATION_REARM]
    assert len(validation) == 6  # 3 batches x 2 layers
    assert sorted(n.module for n in validation) == ["model.0"] * 3 + ["model.2"] * 3
    assert not [n for n in trace.nodes.values() if n.seq > rearmed.start and n.module is None
                and n.name in ("AddmmBackward0", "ReluBackward0")]


def test_trace_size_grows_with_code_paths_not_with_steps(tmp_path):
    """The same program, 1,000 and 3,000 steps: two validations or six, one traced again; the traces' JSON differs
    by a few bytes (the step count), not by the 2,000 steps."""
    script = tmp_path / "val.py"
    script.write_text(VALIDATION)
    sizes = {}
    for steps in (1000, 3000):
        trace = gradviz.trace_script(script, [str(steps), "buggy"], steps=100)
        assert [r.step for r in trace.window.rearmed] == [500]
        sizes[steps] = len(trace.to_json())
    assert abs(sizes[3000] - sizes[1000]) < 0.02 * sizes[1000], sizes


BACKWARD_TWICE = """\
import torch

torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(3))
opt = torch.optim.SGD([w], lr=0.01)
state = torch.zeros(3)
for step in range(400):
    loss = (w * w).sum()
    if step >= 300:
        state = torch.tanh(state + w)  # carried across steps without .detach()
        loss = loss + state.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_backward_through_a_freed_graph_on_a_step_traced_again(tmp_path):
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        exec(compile(BACKWARD_TWICE, "truth.py", "exec"), {})  # PyTorch itself: step 301 raises
    document, _ = _check(tmp_path, BACKWARD_TWICE)
    assert [(f["kind"], f["line"]) for f in document["findings"]][:1] == [("backward_through_freed_graph", 10)]  # the carried state
    assert [(r["step"], r["kind"], r["line"]) for r in document["window"]["rearmed"]] == [(300, "new code", 10)]


def test_rearmed_steps_survive_json_in_a_with_block():
    w = torch.ones(2, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    with gradviz.trace(steps=2) as t:
        for step in range(6):
            opt.zero_grad()
            loss = (w * 2).sum()
            if step == 4:
                loss = loss + w.pow(2).sum()  # new code at step 5
            loss.backward()
            opt.step()
    # (the kind of a step: the function the new code is in, when no model is in eval mode)
    assert [(r.step, r.reason, r.kind) for r in t.window.rearmed] == [
        (4, "new code", "test_rearmed_steps_survive_json_in_a_with_block()")
    ]
    assert t.window.rearmed[0].end is not None  # steps 5 and 6 done: recording stopped again
    again = Trace.loads(t.to_json())
    assert again.window == t.window
    assert again.window.describe_rearmed() == [t.window.describe_rearmed()[0]]
    assert torch._C._len_torch_function_stack() == 0


def test_a_one_step_window_sees_zero_grad_run_its_loop_at_step_2():
    """Step 1's zero_grad() found no gradient to clear; step 2's clears them, code the window never ran: step 2 is
    traced again at the zero_grad() line (what is new is in torch.optim, named at the program's line)."""
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    line = None
    with gradviz.trace(steps=1) as t:
        for _ in range(4):
            line = sys._getframe().f_lineno + 1
            opt.zero_grad(set_to_none=False)
            model(torch.ones(3, 2)).sum().backward()
            opt.step()
    assert [(r.step, r.reason, r.line) for r in t.window.rearmed] == [(1, "new code", line)]
    with gradviz.trace(steps=2) as t:  # a window of two steps has seen it
        for _ in range(4):
            opt.zero_grad(set_to_none=False)
            model(torch.ones(3, 2)).sum().backward()
            opt.step()
    assert t.window.rearmed == []


def test_a_training_flag_set_directly_is_found_at_the_steps_end_even_with_a_module_freed():
    """`model[1].training = False` (no `eval()`), from a line every step runs: the flags are read at the end of each
    optimizer step, so the next step is traced again for it; a module of the model freed after the window (its weak
    reference dead) leaves the reading of the others intact (PyTorch: the dropout really stopped dropping)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5), torch.nn.Linear(4, 1))
    model.extra = torch.nn.Linear(1, 1)  # (a module of the model, never called)
    extra = weakref.ref(model.extra)
    opt = torch.optim.SGD([p for layer in model[::2] for p in layer.parameters()], lr=0.01)
    x = torch.ones(8, 4)
    with gradviz.trace(steps=2) as t:
        for step in range(1, 9):
            model._modules.pop("extra") if step == 4 else None  # freed at the 4th step
            model[1].training = step < 6  # set directly, from the 6th step on
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    assert extra() is None
    assert bool((model[1](torch.ones(100)) == 1).all())  # PyTorch: the flag set directly turned dropout off
    assert [(r.reason, r.kind) for r in t.window.rearmed] == [("a model's training flag changed", "training flag")]
    assert t.window.rearmed[0].step == 6  # found at the end of the 6th step: the 7th is traced


def test_old_traces_without_rearmed_steps_still_load():
    document = json.loads(
        gradviz.Trace(torch_version="2.13.0").to_json()
    )
    document["window"] = {"unit": "step", "limit": 3, "traced": 3, "closed": True, "closed_at": 5, "total": 9,
                          "at_least": None, "stopped": False}
    loaded = Trace.loads(json.dumps(document))
    assert loaded.window is not None and loaded.window.rearmed == [] and loaded.window.describe() == "steps 1-3 of 9 traced"


def test_the_sentinel_keeps_the_program_unchanged(tmp_path):
    text = textwrap.dedent(VALIDATION)
    document, program_output = _check(tmp_path, text, "1500", "fixed")
    printed = [line for line in program_output.splitlines() if line.startswith("validation")]
    assert printed == _untraced(tmp_path, text, "1500", "fixed").splitlines()
