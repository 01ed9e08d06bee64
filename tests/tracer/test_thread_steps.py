"""Each thread's optimizer steps are its own (issue 36 item 2): two threads that each train a model of their own, one
after the other or interleaved, get the same step numbers, the same rolled steps, the same `--step K` graph and the
same `--steps N` window whatever the schedule, 20 runs each; which parameters get gradients is PyTorch's own."""

from __future__ import annotations

import re
import threading

import pytest
import torch

import gradviz
from gradviz.explorer import explorer_document
from gradviz.picture.annotate import annotate
from gradviz.picture.steps import roll_steps, split_steps
from gradviz.render import render

REPEAT = 20
STEPS = 3
# the order the two threads' steps run in: (thread, step)
SCHEDULES = {
    "one after the other": [("A", i) for i in range(STEPS)] + [("B", i) for i in range(STEPS)],
    "interleaved": [(name, i) for i in range(STEPS) for name in "AB"],
    "B first": [(name, i) for i in range(STEPS) for name in "BA"],
}


def _train(order: list[tuple[str, int]], grads: dict[str, list[bool]]) -> None:
    """Threads A and B each train their own two-layer model with SGD, one step at a time in `order`."""
    turns = {phase: threading.Event() for phase in order}
    turns[order[0]].set()

    def worker(name: str, seed: int) -> None:
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(16, 4), torch.randn(16, 1)
        for step in range(STEPS):
            assert turns[(name, step)].wait(30)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            at = order.index((name, step))
            if at + 1 < len(order):
                turns[order[at + 1]].set()
        grads[name] = [p.grad is not None and bool(p.grad.abs().sum() > 0) for p in model.parameters()]

    threads = [threading.Thread(target=worker, args=(name, seed), name=name) for seed, name in enumerate("AB")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _traced(order: list[tuple[str, int]], steps: int | None = None) -> tuple[gradviz.Trace, dict[str, list[bool]]]:
    grads: dict[str, list[bool]] = {}
    with gradviz.trace(steps=steps) as t:
        _train(order, grads)
    return t, grads


def _untraced(order: list[tuple[str, int]]) -> dict[str, list[bool]]:
    grads: dict[str, list[bool]] = {}
    _train(order, grads)
    return grads


def _picture(t: gradviz.Trace) -> tuple[object, ...]:
    """What the views tell of the steps, free of the recorder's node ids: each step's number, thread and ops; each
    rolled step's numbers and title notes; the window."""
    steps = split_steps(t)
    rolls, _ = roll_steps(t, steps, annotate(t, gradviz.diagnose(t)))
    ops = tuple((s.number, s.thread, tuple(sorted(t.nodes[n].name for n in s.nodes))) for s in steps)
    return (
        tuple(sorted(ops)),
        tuple((tuple(r.numbers), tuple(r.notes)) for r in rolls),
        t.window.describe() if t.window is not None else None,
    )


def _ids_out(dot: str) -> str:
    """DOT text with the recorder's node ids (n12, n12_out...) replaced by their order of appearance."""
    names: dict[str, str] = {}
    return re.sub(r"\bn\d+", lambda m: names.setdefault(m.group(0), f"n{len(names)}"), dot)


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_two_threads_training_get_their_own_steps_whatever_the_schedule(schedule: str) -> None:
    order = SCHEDULES[schedule]
    expected = _untraced(order)
    assert expected == {"A": [True] * 4, "B": [True] * 4}  # PyTorch: every parameter of both models gets a gradient
    for _ in range(REPEAT):
        t, grads = _traced(order)
        assert grads == expected
        assert [f.kind.value for f in gradviz.diagnose(t)] == []
        steps = split_steps(t)
        # thread A's three steps are steps 1-3, B's are 4-6, in every schedule
        assert sorted((s.number, s.thread) for s in steps) == [(1, "A"), (2, "A"), (3, "A"), (4, "B"), (5, "B"), (6, "B")]
        rolls, _ = roll_steps(t, steps, annotate(t, gradviz.diagnose(t)))
        assert [(r.numbers, r.notes[:1]) for r in rolls] == [([1, 2, 3], ["in thread 'A'"]), ([4, 5, 6], ["in thread 'B'"])]
        # B's steps are not told apart from A's by their modules: each thread trains its own model by design
        assert [r.difference for r in rolls] == [None, None]
        # each thread's steps use its own model's parameters
        params = {s.thread: {t.tensors[t.nodes[n].variable].parameter for n in t.nodes
                             if t.nodes[n].variable and any(n in t.nodes[m].next for m in s.nodes)} for s in steps}
        assert params == {"A": {"model#A.0.weight", "model#A.0.bias", "model#A.2.weight", "model#A.2.bias"},
                          "B": {"model#B.0.weight", "model#B.0.bias", "model#B.2.weight", "model#B.2.bias"}}


def test_the_views_of_two_training_threads_do_not_depend_on_the_schedule() -> None:
    pictures: set[tuple[object, ...]] = set()
    step_graphs: set[str] = set()
    for schedule in SCHEDULES.values():
        for _ in range(REPEAT // 2):
            t, _ = _traced(schedule)
            pictures.add(_picture(t))
            step_graphs.add(_ids_out(render(t, view="graph", step=5).source))
    assert len(pictures) == 1
    assert len(step_graphs) == 1
    assert "model#B.0" in next(iter(step_graphs)) and "model#A.0" not in next(iter(step_graphs))  # step 5: B's


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_the_step_window_counts_each_threads_steps(schedule: str) -> None:
    order = SCHEDULES[schedule]
    for _ in range(REPEAT):
        t, grads = _traced(order, steps=2)
        assert grads == {"A": [True] * 4, "B": [True] * 4}
        assert t.window is not None and t.window.describe() == "steps 1-2 of 3 traced"
        assert sorted((s.number, s.thread) for s in split_steps(t)) == [(1, "A"), (2, "A"), (3, "B"), (4, "B")]


def _same_named(order: list[tuple[int, int]], buggy: tuple[int, ...] = (1,)) -> tuple[gradviz.Trace, list[list[bool]]]:
    """Two threads both named `worker` (0 started first, then 1), each training a model of its own in `order`; those
    in `buggy` (the second) write `h.data` between tanh and the backward that reads it, in their step 1 (of 0-2)."""
    turns = {phase: threading.Event() for phase in order}
    turns[order[0]].set()
    grads: list[list[bool]] = [[], []]

    def worker(index: int) -> None:
        torch.manual_seed(index)
        model = torch.nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(STEPS):
            assert turns[(index, step)].wait(30)
            optimizer.zero_grad()
            h = torch.tanh(model(torch.randn(2, 3)))
            if index in buggy and step == 1:
                h.data.mul_(2.0)  # tanh's saved output changed behind autograd's back: its gradient silently wrong
            h.sum().backward()
            optimizer.step()
            at = order.index((index, step))
            if at + 1 < len(order):
                turns[order[at + 1]].set()
        grads[index] = [bool(p.grad.abs().sum() > 0) for p in model.parameters()]

    with gradviz.trace() as t:
        threads = [threading.Thread(target=worker, args=(i,), name="worker") for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return t, grads


@pytest.mark.parametrize("schedule", ["one after the other", "interleaved", "second first"])
def test_threads_of_one_name_are_told_apart_in_the_order_they_were_started(schedule: str) -> None:
    order = {
        "one after the other": [(i, s) for i in range(2) for s in range(STEPS)],
        "interleaved": [(i, s) for s in range(STEPS) for i in range(2)],
        "second first": [(i, s) for s in range(STEPS) for i in (1, 0)],
    }[schedule]
    for _ in range(REPEAT):
        t, grads = _same_named(order)
        assert grads == [[True, True], [True, True]]
        steps = split_steps(t)
        # the first started is `worker`, the second `worker#2`, whichever ran first: each with steps of its own
        assert sorted((s.number, s.thread) for s in steps) == [
            (1, "worker"), (2, "worker"), (3, "worker"), (4, "worker#2"), (5, "worker#2"), (6, "worker#2")
        ]
        findings = gradviz.diagnose(t)
        assert [f.kind.value for f in findings] == ["silently_corrupted_saved_tensor"]
        # the finding names the thread whose backward used the changed values (the same line runs in both)
        assert findings[0].thread == "worker#2" and findings[0].to_dict()["thread"] == "worker#2"
        rolls, _ = roll_steps(t, steps, annotate(t, findings))
        assert [(r.numbers, r.notes[:1]) for r in rolls] == [
            ([1, 2, 3], ["in thread 'worker'"]), ([4, 5, 6], ["in thread 'worker#2'"])
        ]
        assert {t.tensors[tid].parameter for tid in t.tensors if t.tensors[tid].parameter} == {
            "model#worker.weight", "model#worker.bias", "model#worker#2.weight", "model#worker#2.bias"
        }
        # the write is drawn in the second thread's step 2 (step 5 of the run), not in the first thread's
        (dot,) = [render(t, view="graph", step=5).source]
        assert "h.data" in dot and "model#worker#2" in dot and "model#worker." not in dot
        # the page's step boxes name their thread, as the picture's do
        document = explorer_document(t, findings)
        assert sorted(g["label"] for g in document["groups"] if g["kind"] == "step") == [
            "↻ step ×3 (steps 1-3) in thread 'worker'", "↻ step ×3 (steps 4-6) in thread 'worker#2'"
        ]


def test_threads_started_with_thread_module_are_numbered_in_the_order_they_were_started() -> None:
    """`_thread.start_new_thread` threads have no name: `_thread 1` is the first the program started, even where the
    second one runs first."""
    import _thread

    for _ in range(REPEAT // 2):
        second_done, done = threading.Event(), [threading.Event(), threading.Event()]

        def worker(index: int, second_done: threading.Event = second_done, done: list[threading.Event] = done) -> None:
            if index == 0:
                assert second_done.wait(30)  # the first started trains last
            w = torch.randn(3, requires_grad=True)
            (w * (index + 1)).sum().backward()
            if index == 1:
                second_done.set()
            done[index].set()

        with gradviz.trace() as t:
            for index in range(2):
                _thread.start_new_thread(worker, (index,))
            assert all(event.wait(30) for event in done)
        by_thread = {s.thread: [t.nodes[n].name for n in s.nodes] for s in split_steps(t)}
        assert sorted(by_thread) == ["_thread 1", "_thread 2"]
        # the second started ran first: its backward is the earlier event, and it is still `_thread 2`
        backwards = [e for e in t.events if e.kind == "backward"]
        assert [e.data.get("thread") for e in backwards] == ["_thread 2", "_thread 1"]


def test_a_threads_steps_after_the_tracing_threads_window_are_counted_as_unwatched() -> None:
    """Thread B trains beside the tracing thread; where the tracing thread's window closes first, recording stops
    for B too: B's later steps (its step 21 writes `h.data`) ran neither traced nor watched, whatever the schedule,
    and the window says how many: with the steps of B traced, all 30 of its steps."""

    def work(steps: list[int]) -> None:
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(30):
            optimizer.zero_grad()
            h = torch.tanh(model(torch.randn(2, 3)))
            if i == 20 and threading.current_thread().name == "B":
                h.data.mul_(2.0)
            h.sum().backward()
            optimizer.step()
            steps.append(i)

    for _ in range(REPEAT // 2):
        done: list[int] = []
        with gradviz.trace(steps=5) as t:
            thread = threading.Thread(target=work, args=(done,), name="B")
            thread.start()
            work([])
            thread.join()
        assert len(done) == 30  # PyTorch: B made its 30 steps
        # B's optimizer steps recorded, and those after recording stopped (a step whose backward was recorded and
        # whose update came after is one of the latter)
        traced_b = sum(1 for e in t.events if e.kind == "optimizer_step" and e.data.get("thread") == "B")
        assert t.window is not None and set(t.window.unwatched) == {"B"}
        assert traced_b + t.window.unwatched["B"] == 30
        assert "in thread 'B', the " in t.window.coverage() and "ran unwatched" in t.window.coverage()


def test_one_mistake_made_in_two_threads_is_a_finding_for_each() -> None:
    """The same line writes `h.data` in both threads: one finding per thread, each naming it (not one finding
    counted twice under the name of whichever thread came first)."""
    for _ in range(REPEAT // 2):
        t, grads = _same_named([(i, s) for s in range(STEPS) for i in range(2)], buggy=(0, 1))
        assert grads == [[True, True], [True, True]]
        findings = gradviz.diagnose(t)
        assert [(f.kind.value, f.thread, f.count) for f in findings] == [
            ("silently_corrupted_saved_tensor", "worker", 1), ("silently_corrupted_saved_tensor", "worker#2", 1)
        ]
