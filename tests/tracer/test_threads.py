"""Torch calls the program makes in other threads are recorded (issue 28 item 1): a thread started while tracing, a
Thread subclass with its own run(), a thread pool made before tracing began; the program runs as without gradviz."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import threading
from pathlib import Path

import torch

import gradviz
from gradviz import EventKind

BUG = """\
import threading
import torch

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.tanh()


def worker():
    c = out.data
    c.zero_()


t = threading.Thread(target=worker)
t.start()
t.join()
out.sum().backward()
print(a.grad.tolist())
"""
# the correct twin: the worker changes a copy
TWIN = BUG.replace("    c = out.data\n", "    c = out.detach().clone()\n")


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=240)


def test_a_data_write_in_a_worker_thread_is_found_at_the_worker_line(tmp_path: Path) -> None:
    (tmp_path / "bug.py").write_text(BUG)
    (tmp_path / "twin.py").write_text(TWIN)

    bug = _run("-m", "gradviz", "check", "bug.py", cwd=tmp_path)
    twin = _run("-m", "gradviz", "check", "twin.py", cwd=tmp_path)

    assert bug.returncode == 1, bug.stdout + bug.stderr
    assert "error  bug.py:10  silently_corrupted_saved_tensor" in bug.stdout
    assert "through `c`, which is `out.data`" in bug.stdout
    assert twin.returncode == 0, twin.stdout + twin.stderr
    assert twin.stdout.splitlines()[-1] == "twin.py: no problems found"
    # what the program prints is what it prints without gradviz: the silently wrong gradient, and the right one
    assert bug.stdout.splitlines()[0] == _run("bug.py", cwd=tmp_path).stdout.strip() == "[1.0, 1.0, 1.0]"
    plain_twin = _run("twin.py", cwd=tmp_path).stdout.strip()
    assert twin.stdout.splitlines()[0] == plain_twin
    assert plain_twin != "[1.0, 1.0, 1.0]"


def _data_write_in(start) -> gradviz.Trace:
    """Trace `out = a.tanh()`, `.data` of it zeroed by `start(worker)` (which returns once the worker ran), backward."""
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with gradviz.trace() as t:
        out = a.tanh()

        def worker() -> None:
            c = out.data
            c.zero_()

        start(worker)
        out.sum().backward()
    assert a.grad.tolist() == [1.0, 1.0, 1.0]  # the corrupted gradient, as without gradviz
    return t


def _kinds(trace: gradviz.Trace) -> list[str]:
    return [f.kind.value for f in gradviz.diagnose(trace)]


def test_a_thread_subclass_with_its_own_run_is_recorded() -> None:
    class Worker(threading.Thread):
        def __init__(self, job) -> None:
            super().__init__()
            self.job = job

        def run(self) -> None:
            self.job()

    def start(job) -> None:
        w = Worker(job)
        w.start()
        w.join()

    t = _data_write_in(start)
    writes = [e for e in t.events if e.kind is EventKind.INPLACE_WRITE]
    assert [e.op for e in writes] == ["Tensor.zero_"]
    assert _kinds(t) == ["silently_corrupted_saved_tensor"]
    assert t.internal_error_summary() is None


def test_a_thread_pool_made_before_tracing_runs_its_work_items_recorded() -> None:
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(lambda: None).result()  # its thread runs before tracing begins
        t = _data_write_in(lambda job: pool.submit(job).result())
        # the pool's thread outlives tracing: its later calls are its own
        assert torch.ones(2).add(1).tolist() == [2.0, 2.0]
        assert pool.submit(lambda: torch._C._len_torch_function_stack()).result() == 0
    assert _kinds(t) == ["silently_corrupted_saved_tensor"]
    data_get = [e for e in t.events if e.kind is EventKind.DATA_GET]
    assert len(data_get) == 1 and data_get[0].location is not None
    assert data_get[0].location.code.strip() == "c = out.data"


def test_threads_are_left_as_found_after_tracing() -> None:
    bootstrap = threading.Thread._bootstrap_inner
    work_item = concurrent.futures.thread._WorkItem.run
    stop = threading.Event()
    counts: list[int] = []

    def background() -> None:  # started while tracing, still running torch calls after it ended
        x = torch.zeros(3)
        while not stop.is_set():
            x.add_(1)
        counts.append(torch._C._len_torch_function_stack())

    with gradviz.trace() as t:
        runner = threading.Thread(target=background, daemon=True)
        runner.start()
        y = torch.ones(2) * 2
    events = len(t.events)
    tensors = len(t.tensors)
    for _ in range(200):
        torch.ones(1).add_(1)
    stop.set()
    runner.join()
    assert threading.Thread._bootstrap_inner is bootstrap
    assert concurrent.futures.thread._WorkItem.run is work_item
    # the thread's calls after tracing ended were not recorded into the finished trace
    assert len(t.events) == events and len(t.tensors) == tensors
    assert counts == [1]  # the recorder, still below the thread's frames until it ended (then gone with it)
    assert y.tolist() == [2.0, 2.0]


def test_threads_recording_at_once_give_each_tensor_one_id() -> None:
    barrier = threading.Barrier(3)
    results: dict[str, list[float]] = {}

    def work(name: str) -> None:
        barrier.wait()
        x = torch.ones(4)
        for _ in range(300):
            x = x * 1.0 + 1.0
        results[name] = x.tolist()

    with gradviz.trace() as t:
        threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(2)]
        for thread in threads:
            thread.start()
        work("main")
        for thread in threads:
            thread.join()
    assert results == {name: [301.0] * 4 for name in ("w0", "w1", "main")}
    assert t.internal_error_summary() is None
    # 3 threads x 300 steps x (mul, add), each call one op record with its own result tensor
    assert len(t.ops) == 3 * (300 * 2 + 1)  # and torch.ones per thread (tolist makes no tensor)
    outputs = [tid for op in t.ops for tid in op.outputs]
    assert len(outputs) == len(set(outputs))
    assert [e.seq for e in t.events] == sorted(e.seq for e in t.events)
