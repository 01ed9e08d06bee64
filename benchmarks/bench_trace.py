"""What tracing costs: wall-time ratio traced/untraced on many tiny ops (RNNCell) and on a small conv training step.

    python benchmarks/bench_trace.py                 # the table (about a minute on 2 cores)
    python benchmarks/bench_trace.py --profile rnn   # where gradviz's time goes, by function (cProfile)
    python benchmarks/bench_trace.py --breakdown     # what each part of the recorder costs (switch-one-off runs)

Every mode runs the same workload in the same process. Rounds interleave the modes (plain, gradviz, ...), so a
noisy neighbour slows all columns alike; each cell is the median over rounds, divided by the plain median.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import gradviz
from gradviz.tracer.recorder import Recorder

GOALS = {"rnn": 1.5, "conv": 1.1}


# ---------------------------------------------------------------------------------------------- workloads
def rnn_workload(steps: int = 300, batch: int = 8) -> Callable[[], None]:
    """(a) RNNCell(32, 32), `steps` steps forward, then backward: thousands of tiny ops."""
    torch.manual_seed(0)
    cell = nn.RNNCell(32, 32)
    xs = torch.randn(steps, batch, 32)

    def forward() -> torch.Tensor:
        h = torch.zeros(batch, 32)
        for x in xs:
            h = cell(x, h)
        return h.pow(2).mean()

    def run() -> None:
        forward().backward()
        cell.zero_grad()

    run.forward = forward  # type: ignore[attr-defined]
    return run


def conv_workload(batch: int = 16) -> Callable[[], None]:
    """(b) One training step of a small CNN (2 conv layers + linear) on batch x 3 x 32 x 32, SGD with momentum."""
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 8 * 8, 10),
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    images, labels = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))

    def forward() -> torch.Tensor:
        return F.cross_entropy(net(images), labels)

    def run() -> None:
        opt.zero_grad()
        forward().backward()
        opt.step()

    run.forward = forward  # type: ignore[attr-defined]
    return run


WORKLOADS = {
    "rnn": ("(a) RNNCell(32,32) x300 fwd+bwd", rnn_workload),
    "conv": ("(b) conv net train step 16x3x32x32", conv_workload),
}


# ---------------------------------------------------------------------------------------------- modes
class PassThroughFunctionMode(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


class PassThroughDispatchMode(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _gradviz() -> Iterator[None]:
    with gradviz.trace():
        yield


MODES: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "plain": contextlib.nullcontext,
    "gradviz": _gradviz,
    "TorchFunctionMode": PassThroughFunctionMode,
    "detect_anomaly": lambda: torch.autograd.detect_anomaly(check_nan=False),
    "TorchDispatchMode": PassThroughDispatchMode,
}


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def time_once(run: Callable[[], None], mode: str, clock: Callable[[], float] = time.perf_counter) -> float:
    start = clock()
    with MODES[mode]():
        run()
    return clock() - start


def measure(workload: str, modes: list[str], rounds: int, warmup: int, clock: str = "wall") -> dict[str, list[float]]:
    run = WORKLOADS[workload][1]()
    for _ in range(warmup):
        for mode in modes:
            time_once(run, mode, CLOCKS[clock])
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(rounds):
        for mode in modes:
            times[mode].append(time_once(run, mode, CLOCKS[clock]))
    return times


# ---------------------------------------------------------------------------------------------- report
def table(results: dict[str, dict[str, list[float]]], modes: list[str]) -> str:
    width = max(len(WORKLOADS[w][0]) for w in results) + 2
    header = f"{'workload':<{width}}{'plain':>10}" + "".join(f"{m:>19}" for m in modes if m != "plain")
    header += f"{'goal':>8}  verdict"
    lines = [header, "-" * len(header)]
    for workload, times in results.items():
        plain = statistics.median(times["plain"])
        row = f"{WORKLOADS[workload][0]:<{width}}{plain * 1e3:>8.1f}ms"
        for mode in modes:
            if mode == "plain":
                continue
            ratio = statistics.median(times[mode]) / plain
            q1, _, q3 = statistics.quantiles(times[mode], n=4)
            row += f"{ratio:>12.2f}x ±{(q3 - q1) / plain / 2:>4.2f}"
        ratio = statistics.median(times["gradviz"]) / plain
        goal = GOALS[workload]
        row += f"{'<=' + format(goal, '.1f') + 'x':>8}  {'meets' if ratio <= goal else 'MISSES'}"
        lines.append(row)
    lines.append("cells: median time / plain median; ± is half the interquartile range over rounds, as a ratio")
    return "\n".join(lines)


# Each breakdown variant switches one part of the recorder off (by patching a private method for the run), so
# "full minus variant" is what that part costs. Diagnostic only: the traces these variants make are incomplete.
# Every variant goes through the recorder's own start() and stop(), so nothing of it outlives its run: a variant that
# left its mode on torch's stack (as one did until issue 22) slows every later run, plain ones included.
_ORIGINAL_START = Recorder.start  # taken before any variant patches it


def _start_without_hooks(recorder: Any, **options: Any) -> None:
    _ORIGINAL_START(recorder, **options)
    for handle in recorder._handles:  # the optimizer pre-hook (no module hooks since issue 22); the step counter stays
        handle.remove()
    recorder._handles = []


def _paused_start(recorder: Any, **options: Any) -> None:
    _ORIGINAL_START(recorder, **options)
    recorder._paused += 1


def _pass_backward(recorder: Any, func: Any, args: Any, kwargs: Any) -> Any:
    return func(*args, **kwargs)


BREAKDOWN: dict[str, dict[str, Any]] = {
    "full": {},
    "saved tensors not read (_saved)": {"_saved": lambda self, *args, **kwargs: []},
    "no graph registration (_node)": {"_node": lambda self, *args, **kwargs: None, "_on_backward": _pass_backward},
    "module paths not read (_running_module)": {"_running_module": lambda self, frame=None: (None, None)},
    "no optimizer hooks": {"start": _start_without_hooks},
    "no per-call bookkeeping (_after_call)": {"_after_call": lambda self, *args: None, "_on_backward": _pass_backward},
    "mode and hooks only, nothing recorded": {"start": _paused_start},
}


def breakdown(workload: str, rounds: int, warmup: int, clock: str = "cpu") -> str:
    """Time of each variant over plain, every column interleaved in each round on the same workload object and the
    same clock as the table, so its plain figure is the table's; the pass-through mode is the floor's reference."""
    import gc

    run = WORKLOADS[workload][1]()
    originals = {name: getattr(Recorder, name) for patch in BREAKDOWN.values() for name in patch}
    tick = CLOCKS[clock]

    def once(variant: str | None, gc_off: bool = False, mode: str = "gradviz") -> float:
        for name, replacement in BREAKDOWN.get(variant or "", {}).items():
            setattr(Recorder, name, replacement)
        was_enabled = gc.isenabled()
        if gc_off:
            gc.disable()
        try:
            return time_once(run, mode if variant else "plain", tick)
        finally:
            if was_enabled:
                gc.enable()
            for name, original in originals.items():
                setattr(Recorder, name, original)
            if torch._C._len_torch_function_stack():  # a variant must leave nothing behind
                raise RuntimeError(f"breakdown variant {variant!r} left a mode on torch's stack")

    columns: dict[str, Callable[[], float]] = {"plain": lambda: once(None)}
    columns["pass-through TorchFunctionMode"] = lambda: once("full", mode="TorchFunctionMode")
    columns.update({v: (lambda v=v: once(v)) for v in BREAKDOWN})
    columns["full, gc disabled"] = lambda: once("full", gc_off=True)
    times: dict[str, list[float]] = {c: [] for c in columns}
    with warnings_off():
        for i in range(warmup + rounds):
            for column, call in columns.items():
                elapsed = call()
                if i >= warmup:
                    times[column].append(elapsed)
    plain = statistics.median(times["plain"])
    full = statistics.median(times["full"])
    lines = [f"{WORKLOADS[workload][0]}: plain {plain * 1e3:.1f} ms {clock}, traced {full / plain:.2f}x ({rounds} rounds)"]
    lines.append(f"  {'variant':<40}{'ratio':>8}{'±':>6}{'ms over plain':>15}{'saved vs full':>15}")
    for column in columns:
        if column == "plain":
            continue
        t = statistics.median(times[column])
        q1, _, q3 = statistics.quantiles(times[column], n=4)
        lines.append(
            f"  {column:<40}{t / plain:>7.2f}x{(q3 - q1) / plain / 2:>6.2f}{(t - plain) * 1e3:>15.1f}{(full - t) * 1e3:>15.1f}"
        )
    nodes, per_node = graph_read_floor(run.forward, rounds)  # type: ignore[attr-defined]
    lines.append(
        f"  floor: reading the {nodes} autograd nodes once from Python (next_functions, sequence number, every saved"
        f" tensor and its version; no records kept) takes {per_node * 1e6:.2f} us/node = {nodes * per_node * 1e3:.1f} ms"
        f" = {nodes * per_node / plain:.2f}x of plain (CPU clock)"
    )
    return "\n".join(lines)


def graph_read_floor(forward: Callable[[], torch.Tensor], rounds: int) -> tuple[int, float]:
    """The least any tracer that records every node and saved tensor from Python pays: one tight walk, no bookkeeping.

    Returns the node count and the median CPU seconds per node. The walk is done once per round on a fresh graph.
    """
    accumulate = 2**64 - 1
    saved_attrs: dict[type, tuple[str, ...]] = {}

    def walk(root: Any) -> int:
        seen: set[Any] = set()
        stack = [root]
        count = 0
        while stack:
            node = stack.pop()
            count += 1
            attrs = saved_attrs.get(type(node))
            if attrs is None:
                attrs = saved_attrs[type(node)] = tuple(a for a in dir(node) if a.startswith("_raw_saved_"))
            for attr in attrs:
                raw = getattr(node, attr)
                for handle in raw if isinstance(raw, (list, tuple)) else (raw,):
                    tensor = handle.data
                    if tensor is not None:
                        tensor._version  # noqa: B018 - the read is what is measured
            for nxt, _ in node.next_functions:
                if nxt is None:
                    continue
                key = nxt._sequence_nr()
                if key == accumulate:
                    key = ("leaf", id(nxt.variable))
                if key not in seen:
                    seen.add(key)
                    stack.append(nxt)
        return count

    times, count = [], 0
    for _ in range(max(rounds, 3)):
        loss = forward()
        start = time.process_time()
        count = walk(loss.grad_fn)
        times.append(time.process_time() - start)
        del loss
    return count, statistics.median(times) / count


def profile(workload: str, limit: int) -> str:
    """cProfile of the traced workload, cut down to gradviz's own functions (and what they call)."""
    run = WORKLOADS[workload][1]()
    for _ in range(2):
        time_once(run, "gradviz")
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        time_once(run, "gradviz")
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats("gradviz", limit)
    stats.sort_stats("cumulative").print_stats("gradviz", limit)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds per mode (default 15)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds per mode first (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1: least noise)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall (perf_counter, default) or cpu (process_time: steadier on a busy machine);"
                        " --breakdown uses the same clock as the table")
    parser.add_argument("--only", choices=sorted(WORKLOADS), action="append", help="run only this workload")
    parser.add_argument("--dispatch", action="store_true", help="add a pass-through TorchDispatchMode column")
    parser.add_argument("--profile", choices=sorted(WORKLOADS), help="print a cProfile of the traced workload instead")
    parser.add_argument("--limit", type=int, default=25, help="rows of the profile to print")
    parser.add_argument("--breakdown", action="store_true", help="print the cost of each part of the recorder instead")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    if args.profile:
        print(profile(args.profile, args.limit))
        return 0
    if args.breakdown:
        for workload in args.only or list(WORKLOADS):
            print(breakdown(workload, args.rounds, args.warmup, args.clock))
        return 0
    modes = ["plain", "gradviz", "TorchFunctionMode", "detect_anomaly"] + (["TorchDispatchMode"] if args.dispatch else [])
    print(
        f"torch {torch.__version__}, python {sys.version.split()[0]}, {args.threads} thread(s), "
        f"{os.cpu_count()} cpus, {args.clock} clock, {args.rounds} rounds after {args.warmup} warm-up rounds"
    )
    results = {}
    for workload in args.only or list(WORKLOADS):
        with warnings_off():
            results[workload] = measure(workload, modes, args.rounds, args.warmup, args.clock)
    print(table(results, modes))
    return 0


@contextlib.contextmanager
def warnings_off() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # detect_anomaly warns on every entry
        yield


if __name__ == "__main__":
    raise SystemExit(main())
