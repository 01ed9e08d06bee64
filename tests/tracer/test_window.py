"""The step window: only the first N steps are recorded, then the recorder is gone and the program runs on unchanged."""

from __future__ import annotations

import runpy
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import gradviz
from gradviz import EventKind, Trace

TRAIN = """\
import gc, sys, torch
torch.manual_seed(0)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(steps):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    if step % 10 == 0:
        print("step", step, repr(loss.item()))
from torch.nn.modules.module import _global_forward_hooks, _global_forward_pre_hooks
from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks
print("final", repr(loss.item()), [repr(p.sum().item()) for p in model.parameters()])
print("modes", torch._C._len_torch_function_stack(), "gc", gc.get_threshold()[0], gc.get_freeze_count() > 0)
print("hooks", len(_global_forward_pre_hooks), len(_global_forward_hooks), len(_global_optimizer_pre_hooks))
"""

NO_OPTIMIZER = """\
import torch
torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
for i in range(12):
    loss = (w * torch.randn(3)).tanh().sum()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        w.grad = None
print("w", [repr(v) for v in w.tolist()])
"""

GAN = """\
import torch
torch.manual_seed(0)
G, D = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
opt_d, opt_g = torch.optim.Adam(D.parameters()), torch.optim.Adam(G.parameters())
for i in range(8):
    fake = G(torch.randn(4, 2))
    opt_d.zero_grad()
    d_loss = D(fake.detach()).mean() - D(torch.randn(4, 2)).mean()
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    g_loss = -D(fake).mean()
    g_loss.backward()
    opt_g.step()
print("done", repr(g_loss.item()))
"""


def _script(tmp_path: Path, text: str, name: str = "prog.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _untraced(path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """What the program prints run as `python path args` (in this process: a subprocess would import torch again)."""
    capsys.readouterr()
    saved = sys.argv
    sys.argv = [str(path), *args]
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = saved
    return capsys.readouterr().out


def _traced(path: Path, capsys: pytest.CaptureFixture[str], *args: str, **window: object) -> tuple[Trace, str]:
    capsys.readouterr()
    trace = gradviz.trace_script(path, list(args), **window)  # type: ignore[arg-type]
    return trace, capsys.readouterr().out


def test_window_of_optimizer_steps_records_only_them_and_counts_the_rest(tmp_path, capsys):
    path = _script(tmp_path, TRAIN)
    trace, out = _traced(path, capsys, "40", steps=3)
    window = trace.window
    assert window is not None
    assert (window.unit, window.limit, window.traced, window.closed, window.total) == ("step", 3, 3, True, 40)
    assert window.describe() == "steps 1-3 of 40 traced"
    assert len(trace.events_of(EventKind.OPTIMIZER_STEP)) == 3
    assert len(trace.events_of(EventKind.BACKWARD)) == 3
    # after the window only the final print's new code (line 16, after the loop) is recorded again: the sentinel
    assert [(r.line, r.reason, r.step) for r in window.rearmed] == [(16, "new code", 40)]
    assert max(op.seq for op in trace.ops if op.seq < window.rearmed[0].start) < window.closed_at
    assert {op.line for op in trace.ops if op.seq > window.closed_at} == {16}
    assert trace.exception is None and not trace.internal_errors
    untraced, _ = _traced(path, capsys, "40", steps=3, sentinel=False)
    assert max(op.seq for op in untraced.ops) < untraced.window.closed_at  # nothing recorded after the window
    assert untraced.window.rearmed == []


def test_after_the_window_the_program_runs_unchanged_with_no_mode_hooks_or_gc_changes(tmp_path, capsys):
    path = _script(tmp_path, TRAIN)
    plain = _untraced(path, capsys, "30")
    _, out = _traced(path, capsys, "30", steps=2, sentinel=False)
    # same values to the last bit, and (seen from inside the program) no mode, hook or GC setting of ours left
    assert out == plain
    # (GC settings: as the untraced program prints them, out == plain above; they differ across Pythons, 2000 on 3.13,
    # and `import torch` 2.14.1 on 3.12 freezes objects of its own)
    assert "modes 0 " in out and "gc " in out
    # with the sentinel (the default) the same values; its mode stays on, GC settings are the program's own
    # (the final lines are new code: recorded again, with the recorder's optimizer pre-hook beside the sentinel's, and
    # the sentinel's module pre-hook, which reads a model's training flag)
    _, watched = _traced(path, capsys, "30", steps=2)
    # (on Python 3.12+ the module pre-hook is on only after a `train()` that leaves a model in a flag never
    # recorded: sentinel.py)
    hooks = "hooks 0 0 2" if sys.version_info >= (3, 12) else "hooks 1 0 2"
    assert watched.replace("modes 1 ", "modes 0 ").replace(hooks, "hooks 0 0 0") == plain
    assert "modes 1 " in watched and hooks in watched
    _, full = _traced(path, capsys, "30")
    assert "modes 1 " in full  # without a window the recorder is still on at the end: the check above means it


def test_window_without_an_optimizer_counts_backward_calls(tmp_path, capsys):
    path = _script(tmp_path, NO_OPTIMIZER)
    plain = _untraced(path, capsys)
    trace, out = _traced(path, capsys, steps=4, sentinel=False)
    assert out == plain
    window = trace.window
    assert (window.unit, window.traced, window.closed, window.total, window.at_least) == ("backward", 4, True, None, 5)
    assert window.describe() == "backward calls 1-4 of 5+ traced"
    assert len(trace.events_of(EventKind.BACKWARD)) == 4
    # the graph of the fifth loss was built inside the window and is still alive there: it is in the trace
    losses = [t for t in trace.tensors.values() if "loss" in t.names]
    assert losses and losses[-1].freed is None and losses[-1].grad_fn is not None


def test_stop_after_ends_the_program_at_the_window_as_if_it_had_finished(tmp_path, capsys):
    path = _script(tmp_path, TRAIN)
    trace, out = _traced(path, capsys, "40", steps=2, stop_after=True)
    assert trace.exception is None
    assert trace.window.stopped and trace.window.traced == 2
    assert trace.window.describe() == "steps 1-2 traced, then the program was stopped there (--stop-after)"
    assert out.splitlines() == ["step 0 " + out.split()[2]]  # only what the program printed in the first 2 steps


def test_two_optimizers_each_make_n_steps_inside_the_window(tmp_path, capsys):
    path = _script(tmp_path, GAN)
    plain = _untraced(path, capsys)
    trace, out = _traced(path, capsys, steps=3)
    assert out == plain
    steps = trace.events_of(EventKind.OPTIMIZER_STEP)
    assert [e.data["optimizer_id"] for e in steps] == ["o0", "o1"] * 3
    assert trace.window.describe() == "steps 1-3 of 8 traced"
    assert [f.kind.value for f in gradviz.diagnose(trace)] == ["cut_edge"]


def test_a_run_shorter_than_the_window_is_traced_whole(tmp_path, capsys):
    path = _script(tmp_path, TRAIN)
    trace, _ = _traced(path, capsys, "4", steps=10)
    assert (trace.window.closed, trace.window.traced, trace.window.total) == (False, 4, 4)
    assert trace.window.describe() == "all 4 steps traced"


def test_the_window_survives_json():
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    opt = torch.optim.SGD([a], lr=0.1)
    with gradviz.trace(steps=2) as t:
        for _ in range(5):
            opt.zero_grad()
            (a * a).sum().backward()
            opt.step()
    again = Trace.loads(t.to_json())
    assert again.window == t.window
    assert again.window.describe() == "steps 1-2 of 5 traced"


def test_with_block_stop_after_ends_the_block_only():
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    opt = torch.optim.SGD([a], lr=0.1)
    done = []
    with gradviz.trace(steps=2, stop_after=True) as t:
        for i in range(10):
            opt.zero_grad()
            (a * a).sum().backward()
            opt.step()
            done.append(i)
    assert done == [0]  # stopped inside step 2, before the line after it
    assert t.window.stopped and t.exception is None
    assert torch._C._len_torch_function_stack() == 0


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_bad_window_sizes_are_refused(bad):
    with pytest.raises(ValueError, match="at least 1"):
        gradviz.trace(steps=bad)


def test_stop_after_needs_a_window():
    with pytest.raises(ValueError, match="stop_after needs steps=N"):
        gradviz.trace(stop_after=True)


def test_the_window_lets_go_of_tensors_at_once(tmp_path, capsys):
    path = _script(
        tmp_path,
        textwrap.dedent(
            """\
            import weakref, torch
            w = torch.ones(2, requires_grad=True)
            opt = torch.optim.SGD([w], lr=0.1)
            refs = []
            for i in range(4):
                opt.zero_grad()
                y = (w * 2).sum()
                refs.append(weakref.ref(y))
                y.backward()
                opt.step()
                del y
            print("alive", sum(r() is not None for r in refs))
            """
        ),
    )
    trace, out = _traced(path, capsys, steps=1)
    assert out == "alive 0\n"
    assert trace.window.describe() == "step 1 of 4 traced"
