"""Each thread's autograd graphs are its own (issue 36 item 2): torch numbers the nodes of every thread from 0, so
two threads' nodes share numbers; two threads that each run a forward and a backward, one after the other or
interleaved in any order, give no finding on a correct program, and a `.data` bug in one of them is found at its
line every time. Each schedule runs 20 times, forced by events, with the same result; PyTorch's own gradients say
which thread's are right."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

import gradviz

REPEAT = 20
# the order in which the two threads run their three phases: forward, the `.data` write (or nothing), backward
SCHEDULES = {
    "one after the other": ["A0", "A1", "A2", "B0", "B1", "B2"],
    "interleaved": ["A0", "B0", "A1", "B1", "A2", "B2"],
    "B's whole step inside A's": ["A0", "B0", "B1", "B2", "A1", "A2"],
    "B first, A's backward first": ["B0", "A0", "A1", "B1", "A2", "B2"],
}
W = [0.5, 1.0, 1.5]


def _worker_line(code: str) -> int:
    return next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if line.strip() == code)


def _run(order: list[str], bad: str) -> tuple[gradviz.Trace, dict[str, list[float]]]:
    """Threads A and B each compute `tanh(2 w).sum()` and its backward, their phases in `order`; the thread named
    in `bad` zeroes the saved output through `.data` in between."""
    done = {phase: threading.Event() for phase in order}
    grads: dict[str, list[float]] = {}

    def turn(phase: str) -> None:
        at = order.index(phase)
        if at:
            assert done[order[at - 1]].wait(30)

    def worker(name: str) -> None:
        w = torch.tensor(W, requires_grad=True)
        turn(f"{name}0")
        h = (w * 2.0).tanh()
        done[f"{name}0"].set()
        turn(f"{name}1")
        if name in bad:
            h.data.zero_()
        done[f"{name}1"].set()
        turn(f"{name}2")
        h.sum().backward()
        grads[name] = w.grad.tolist()
        done[f"{name}2"].set()

    with gradviz.trace() as t:
        threads = [threading.Thread(target=worker, args=(name,)) for name in "AB"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return t, grads


def _intact() -> list[float]:
    """The gradient with the saved values intact: d/dw sum(tanh(2w)) = 2 (1 - tanh(2w)^2)."""
    w = torch.tensor(W)
    return (2 * (1 - torch.tanh(2 * w) ** 2)).tolist()


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_two_threads_each_with_a_correct_step_give_no_finding(schedule: str) -> None:
    for _ in range(REPEAT):
        t, grads = _run(SCHEDULES[schedule], bad="")
        assert grads == {"A": pytest.approx(_intact(), rel=1e-5), "B": pytest.approx(_intact(), rel=1e-5)}
        assert [f.kind.value for f in gradviz.diagnose(t)] == []
        assert t.internal_error_summary() is None
        # each thread's backward runs through its own two nodes (tanh, mul) and its own leaf, none of the other's
        backwards = t.events_of("backward")
        assert len(backwards) == 2
        reached = [set(e.data["reached_nodes"]) for e in backwards]
        assert not reached[0] & reached[1]
        assert [sorted(t.nodes[n].name for n in r) for r in reached] == [
            ["AccumulateGrad", "MulBackward0", "SumBackward0", "TanhBackward0"]
        ] * 2


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("bad", ["A", "B"])
def test_a_data_write_in_one_thread_is_found_every_time(schedule: str, bad: str) -> None:
    line = _worker_line("h.data.zero_()")
    for _ in range(REPEAT):
        t, grads = _run(SCHEDULES[schedule], bad=bad)
        good = "B" if bad == "A" else "A"
        # PyTorch: the bad thread's gradient comes from the zeroed saved output (2 (1 - 0) = 2), the other is right
        assert grads[bad] == [2.0, 2.0, 2.0] != pytest.approx(_intact(), rel=1e-5)
        assert grads[good] == pytest.approx(_intact(), rel=1e-5)
        findings = gradviz.diagnose(t)
        assert [(f.kind.value, f.line, f.count) for f in findings] == [("silently_corrupted_saved_tensor", line, 1)]
        # the backward it names is the bad thread's: the one through the tanh node that saved the zeroed output,
        # and only that one reaches it
        (node,) = findings[0].nodes
        assert t.nodes[node].name == "TanhBackward0"
        assert [e.seq for e in t.events_of("backward") if node in e.data["reached_nodes"]] == [
            findings[0].affected_backward
        ]


SCRIPT = """\
import sys
import threading
import torch

BAD = sys.argv[1]
TOGETHER = sys.argv[2] == "together"
barrier = threading.Barrier(2 if TOGETHER else 1)
grads = {}


def step(name):
    w = torch.tensor([0.5, 1.0, 1.5], requires_grad=True)
    h = (w * 2.0).tanh()
    barrier.wait()  # together: both graphs are built before either backward
    if name == BAD:
        h.data.zero_()
    barrier.wait()
    h.sum().backward()
    grads[name] = [round(g, 4) for g in w.grad.tolist()]


threads = [threading.Thread(target=step, args=(name,)) for name in "AB"]
for thread in threads:
    thread.start()
    if not TOGETHER:
        thread.join()
for thread in threads:
    thread.join()
print(sorted(grads.items()))
"""


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=240
    )


@pytest.mark.parametrize("when", ["one after the other", "together"])
def test_check_on_two_threads(tmp_path: Path, when: str) -> None:
    (tmp_path / "two.py").write_text(SCRIPT)
    mode = "together" if when == "together" else "sequential"
    right = [round(g, 4) for g in _intact()]

    correct = _cli(tmp_path, "-m", "gradviz", "check", "two.py", "--", "-", mode)
    assert correct.returncode == 0, correct.stdout + correct.stderr
    assert correct.stdout.splitlines() == [str([("A", right), ("B", right)]), "two.py: no problems found"]

    buggy = _cli(tmp_path, "-m", "gradviz", "check", "two.py", "--", "B", mode)
    assert buggy.returncode == 1, buggy.stdout + buggy.stderr
    assert buggy.stdout.splitlines()[0] == str([("A", right), ("B", [2.0, 2.0, 2.0])])
    assert "error  two.py:16  silently_corrupted_saved_tensor" in buggy.stdout
    assert "backward_through_freed_graph" not in buggy.stdout
    assert buggy.stdout.splitlines()[-1] == "two.py: 1 error, 0 warnings, 0 info"
    # what python prints
    assert _cli(tmp_path, "two.py", "B", mode).stdout.splitlines()[0] == buggy.stdout.splitlines()[0]


def test_a_graph_passed_to_another_thread_is_the_same_graph() -> None:
    """The worker's own nodes share numbers with the tracing thread's; the tracing thread's `h`, used by the worker,
    is still the node the tracing thread made: one backward through it, then a second one that raises as without
    gradviz, predicted as a backward through the graph the first freed."""
    for _ in range(REPEAT):
        errors: list[str] = []
        w = torch.tensor(W, requires_grad=True)
        with gradviz.trace() as t:
            h = (w * 2.0).tanh()

            def worker(h: torch.Tensor) -> None:
                v = torch.tensor(W, requires_grad=True)
                (v * 2.0).tanh().sum().backward()  # the worker's own nodes, numbered from 0 like the first ones here
                (h * 3.0).sum().backward()

            thread = threading.Thread(target=worker, args=(h,))
            thread.start()
            thread.join()
            try:
                h.sum().backward()  # the second backward through h
            except RuntimeError as exc:
                errors.append(str(exc))
        assert w.grad.tolist() == pytest.approx([3 * g for g in _intact()], rel=1e-5)
        assert len(errors) == 1 and "Trying to backward through the graph a second time" in errors[0]
        own, passed, again = t.events_of("backward")
        tanh = t.tensor("h").grad_fn
        assert tanh is not None and tanh in passed.data["reached_nodes"] and tanh in again.data["reached_nodes"]
        assert tanh not in own.data["reached_nodes"]
        assert passed.data["reached_leaves"] == again.data["reached_leaves"] == [t.tensor("w").id]
        assert [(f.kind.value, f.line) for f in gradviz.diagnose(t)] == [
            ("backward_through_freed_graph", _worker_line("h.sum().backward()  # the second backward through h"))
        ]
