"""Threads gradviz cannot record are said, never a silent "no problems found" (issue 36 item 7): a thread started
before `gradviz.trace()` that runs torch calls inside the block is named in the trace and in every output (text,
JSON, SARIF, GitHub, the page and the graph); a thread started with `_thread.start_new_thread` while tracing is
recorded like a `threading.Thread`."""

from __future__ import annotations

import _thread
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import torch

import gradviz

EARLY = "thread 'early' (started before tracing)"
SUMMARY = f"1 thread ran unrecorded (torch calls there are not in the trace): {EARLY}"


def _early_thread_trace() -> tuple[gradviz.Trace, list[float]]:
    """A thread started before tracing zeroes a saved output through `.data` while the block runs: PyTorch's
    gradient there is silently wrong, and gradviz cannot see it."""
    go, ready, finish = threading.Event(), threading.Event(), threading.Event()
    grads: list[float] = []

    def early() -> None:
        go.wait(30)
        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.tanh()
        out.data.zero_()
        out.sum().backward()
        grads.extend(a.grad.tolist())
        ready.set()
        finish.wait(30)

    thread = threading.Thread(target=early, name="early")
    thread.start()
    try:
        with gradviz.trace() as t:
            go.set()
            assert ready.wait(30)
            x = torch.ones(2, requires_grad=True)
            (x * 2).sum().backward()
    finally:
        finish.set()
        thread.join()
    return t, grads


def test_a_thread_started_before_tracing_is_named_as_unrecorded(tmp_path: Path) -> None:
    t, grads = _early_thread_trace()
    assert grads == [1.0, 1.0, 1.0]  # PyTorch: the zeroed saved output (1 - 0), not 1 - tanh(a)^2
    assert gradviz.diagnose(t) == []  # nothing gradviz saw is wrong
    assert t.unrecorded_threads == [EARLY]
    assert t.unrecorded_threads_summary() == SUMMARY
    # the tracing thread's own calls are recorded as ever
    assert [e.op for e in t.events_of("backward")] == ["Tensor.backward"]
    # a saved trace keeps it, and every output of `check` and `render` says it
    t.to_json(tmp_path / "early.json")
    assert gradviz.Trace.load(tmp_path / "early.json").unrecorded_threads == [EARLY]

    def gradviz_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "gradviz", *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=240)

    text = gradviz_cli("check", "early.json")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == [f"early.json: 0 errors, 0 warnings, 0 info; {SUMMARY}"]
    document = json.loads(gradviz_cli("check", "early.json", "--json").stdout)
    assert document["findings"] == [] and document["unrecorded_threads"] == [EARLY]
    sarif = json.loads(gradviz_cli("check", "early.json", "--format", "sarif").stdout)
    (invocation,) = sarif["runs"][0]["invocations"]
    assert invocation["toolExecutionNotifications"] == [
        {"level": "warning", "message": {"text": f"the script: {SUMMARY}"}}
    ]
    github = gradviz_cli("check", "early.json", "--format", "github").stdout
    assert github.splitlines() == [f"::warning::gradviz: the script: {SUMMARY}"]
    render = gradviz_cli("render", "early.json", "-o", "early.html", "-o", "early.dot")
    assert render.returncode == 0, render.stderr
    assert f"gradviz: {SUMMARY}" in render.stdout.splitlines()
    assert SUMMARY.replace("'", "&#x27;") in (tmp_path / "early.html").read_text() or SUMMARY in (
        tmp_path / "early.html"
    ).read_text()
    assert "1 thread ran unrecorded" in (tmp_path / "early.dot").read_text()


def test_threads_that_ran_nothing_or_were_recorded_are_not_named() -> None:
    idle = threading.Event()
    waiting = threading.Thread(target=idle.wait, name="idle")  # started before, blocked the whole time
    waiting.start()
    try:
        with gradviz.trace() as t:
            worker = threading.Thread(target=lambda: torch.ones(3).mul(2), name="recorded")
            worker.start()
            worker.join()
            (torch.ones(2, requires_grad=True) * 3).sum().backward()
    finally:
        idle.set()
        waiting.join()
    assert t.unrecorded_threads == []
    assert [op.name for op in t.ops][:2] == ["ones", "Tensor.mul"]


RAW = """\
import _thread
import sys
import threading
import time
import torch

ready = _thread.allocate_lock()
ready.acquire()
finish = _thread.allocate_lock()
finish.acquire()
grads = []


def worker():
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = a.tanh()
    out.data.zero_()
    out.sum().backward()
    grads.append(a.grad.tolist())
    ready.release()
    finish.acquire()


if sys.argv[1] == "_thread":
    _thread.start_new_thread(worker, ())
else:  # threading's own reference to the function, taken before gradviz began: a thread gradviz cannot enter
    start = getattr(threading, "_start_new_thread", None)
    start(worker, ()) if start is not None else threading._start_joinable_thread(worker)
ready.acquire()
x = torch.ones(2, requires_grad=True)
(x * 2).sum().backward()
finish.release()
while _thread._count():  # (the worker ended: torch 2.8 aborts at exit when a thread is still tearing down)
    time.sleep(0.01)
print(grads)
"""


def test_start_new_thread_is_recorded_and_a_thread_gradviz_cannot_enter_is_said(tmp_path: Path) -> None:
    (tmp_path / "raw.py").write_text(RAW)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=240)

    assert run("raw.py", "_thread").stdout == "[[1.0, 1.0, 1.0]]\n"  # PyTorch: the silently wrong gradient
    recorded = run("-m", "gradviz", "check", "raw.py", "--", "_thread")
    assert recorded.returncode == 1, recorded.stdout + recorded.stderr
    lines = recorded.stdout.splitlines()
    assert lines[0] == "[[1.0, 1.0, 1.0]]"
    # (the finding names the thread whose backward used the changed values)
    assert "error  raw.py:17  silently_corrupted_saved_tensor  in thread '_thread 1'" in lines
    assert lines[-1] == "raw.py: 1 error, 0 warnings, 0 info"

    unseen = run("-m", "gradviz", "check", "raw.py", "--", "threading")
    assert unseen.returncode == 0, unseen.stdout + unseen.stderr
    assert unseen.stdout.splitlines() == [
        "[[1.0, 1.0, 1.0]]",
        "raw.py: 0 errors, 0 warnings, 0 info; 1 thread ran unrecorded (torch calls there are not in the trace): "
        "a thread started outside `threading`",
    ]


def test_start_new_thread_is_given_back_and_refuses_what_the_builtin_refuses() -> None:
    original, alias = _thread.start_new_thread, getattr(_thread, "start_new", None)
    errors = []
    with gradviz.trace():
        assert _thread.start_new_thread is not original
        for bad in ((42, ()), (print, [1]), (print,)):
            try:
                _thread.start_new_thread(*bad)
            except TypeError as exc:
                errors.append(str(exc))
    assert _thread.start_new_thread is original and getattr(_thread, "start_new", None) is alias
    plain = []
    for bad in ((42, ()), (print, [1]), (print,)):
        try:
            original(*bad)
        except TypeError as exc:
            plain.append(str(exc))
    assert errors == plain and len(plain) == 3


RAISES = """\
import _thread
import time
import torch

done = _thread.allocate_lock()
done.acquire()


def worker():
    try:
        torch.ones(2).add(1)
        raise ValueError("boom")
    finally:
        done.release()


_thread.start_new_thread(worker, ())
done.acquire()
time.sleep(0.2)
print("main goes on")
"""


def test_an_error_in_a_start_new_thread_thread_is_reported_as_under_python(tmp_path: Path) -> None:
    (tmp_path / "raises.py").write_text(RAISES)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=240)

    plain = run("raises.py")
    traced = run("-m", "gradviz", "check", "raises.py")
    assert plain.stdout == "main goes on\n"
    assert traced.stdout.splitlines() == ["main goes on", "raises.py: no problems found"]

    def report(stderr: str) -> list[str]:  # (the function's address differs from run to run)
        return [line.split(" at 0x")[0] for line in stderr.splitlines() if not line.startswith("gradviz:")]

    # Python's own report: "...started by: <function worker at 0x...>" up to 3.12, "...started by <function ...>:" on 3.13
    first, second = report(plain.stderr)[:2]
    assert re.fullmatch(r"Exception ignored in thread started by:? <function worker", first), first
    assert second == "Traceback (most recent call last):"
    assert report(traced.stderr) == report(plain.stderr)
