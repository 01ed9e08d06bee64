"""What a trace costs to keep, save and load: bytes per record in memory and on disk, save/load time, peak memory.

    python benchmarks/bench_trace_file.py                 # the table for 1,000 and 4,000 MLP training steps
    python benchmarks/bench_trace_file.py --steps 500     # other run lengths
    python benchmarks/bench_trace_file.py --profile load  # where loading spends its time (cProfile)

The workload is a small MLP training loop (2 linear layers, ReLU, MSE, SGD with momentum, zero_grad, a logged
`loss.item()`), traced in full. Memory in the trace is measured with tracemalloc: the bytes allocated while the
trace was built and still held once the program's tensors are gone, divided by the record counts. Save and load
are timed with `Trace.to_json(path)` and `Trace.load(path)`, each the median of `--rounds` runs; the load's peak
is tracemalloc's peak during one extra load (Python allocations, which is where a trace lives).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import torch
from torch import nn

import gradviz
from gradviz import Trace


def mlp_training(steps: int) -> None:
    """The traced program: `steps` SGD steps of a 2-layer MLP on random data."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    total = 0.0
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        total += loss.item()


def build(steps: int) -> tuple[Trace, int]:
    """Trace `steps` training steps; returns the trace and the bytes it holds (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    with gradviz.trace() as trace:
        mlp_training(steps)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return trace, held


def timed(action, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def load_peak(path: Path) -> int:
    gc.collect()
    tracemalloc.start()
    Trace.load(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def measure(steps: int, rounds: int, folder: Path) -> dict[str, float]:
    trace, held = build(steps)
    path = folder / f"mlp{steps}.json"
    save_s = timed(lambda: trace.to_json(path), rounds)
    size = path.stat().st_size
    load_s = timed(lambda: Trace.load(path), rounds)
    assert Trace.load(path).to_dict() == trace.to_dict()  # the round trip is lossless, or the numbers mean nothing
    records = len(trace.nodes) + len(trace.tensors) + len(trace.events) + len(trace.ops)
    return {
        "steps": steps,
        "nodes": len(trace.nodes),
        "tensors": len(trace.tensors),
        "events": len(trace.events),
        "ops": len(trace.ops),
        "mem_bytes": held,
        "mem_per_step": held / steps,
        "mem_per_record": held / records,
        "file_bytes": size,
        "file_per_step": size / steps,
        "file_per_record": size / records,
        "save_s": save_s,
        "load_s": load_s,
        "load_peak": load_peak(path),
    }


def table(rows: list[dict[str, float]]) -> str:
    head = (
        f"{'steps':>6} {'nodes':>7} {'tensors':>8} {'events':>7} {'ops':>7}  {'in memory':>10} {'per step':>9} "
        f"{'per record':>10}  {'on disk':>9} {'per step':>9} {'per record':>10}  {'save':>6} {'load':>6} {'load peak':>10}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['steps']:>6} {r['nodes']:>7} {r['tensors']:>8} {r['events']:>7} {r['ops']:>7}  "
            f"{_mb(r['mem_bytes']):>10} {r['mem_per_step']:>7.0f} B {r['mem_per_record']:>8.0f} B  "
            f"{_mb(r['file_bytes']):>9} {r['file_per_step']:>7.0f} B {r['file_per_record']:>8.0f} B  "
            f"{r['save_s']:>5.2f}s {r['load_s']:>5.2f}s {_mb(r['load_peak']):>10}"
        )
    return "\n".join(lines)


def per_kind(steps: int, folder: Path) -> str:
    """Bytes per node, per tensor, per event and per op on disk: each list's share of the file, over its length."""
    import json

    trace, _ = build(steps)
    document = trace.to_dict()
    lines = [f"on disk, per record ({steps} steps, compact JSON):"]
    for key in ("nodes", "tensors", "events", "ops"):
        items = document[key]
        size = len(json.dumps(items, ensure_ascii=False, separators=(",", ":")).encode())
        count = len(items) if not isinstance(items, dict) else len(next(iter(items.values()), []))
        lines.append(f"  {key:<8} {count:>7} records  {size / max(count, 1):>6.0f} B each")
    lines.extend(_memory_per_kind(trace))
    return "\n".join(lines)


def _memory_per_kind(trace: Trace) -> list[str]:
    """Deep size of each kind of record in memory, objects shared between records (interned strings) counted once."""
    seen: set[int] = set()

    def size(obj: object) -> int:
        if id(obj) in seen or obj is None or isinstance(obj, (bool, int)) and -5 <= obj <= 256:
            return 0
        seen.add(id(obj))
        total = sys.getsizeof(obj)
        if isinstance(obj, dict):
            total += sum(size(k) + size(v) for k, v in obj.items())
        elif isinstance(obj, (list, tuple, set)):
            total += sum(size(v) for v in obj)
        elif hasattr(obj, "__slots__"):
            total += sum(size(getattr(obj, s, None)) for s in obj.__slots__)  # type: ignore[attr-defined]
        return total

    lines = ["in memory, per record (deep size; strings shared with earlier records not counted again):"]
    for key, records in (("nodes", trace.nodes.values()), ("tensors", trace.tensors.values()),
                         ("events", trace.events), ("ops", trace.ops)):
        records = list(records)
        total = sum(size(r) for r in records)
        lines.append(f"  {key:<8} {len(records):>7} records  {total / max(len(records), 1):>6.0f} B each")
    return lines


def profile(what: str, steps: int, folder: Path) -> str:
    trace, _ = build(steps)
    path = folder / "profile.json"
    trace.to_json(path)
    profiler = cProfile.Profile()
    profiler.enable()
    if what == "load":
        Trace.load(path)
    else:
        trace.to_json(path)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, action="append", help="training steps to trace (default: 1000 and 4000)")
    parser.add_argument("--rounds", type=int, default=3, help="timed saves and loads per size (median; default 3)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--profile", choices=("load", "save"), help="print a cProfile of one load or save instead")
    options = parser.parse_args(argv)
    torch.set_num_threads(options.threads)
    steps = options.steps or [1000, 4000]
    build(2)  # first use imports and caches (torch's override table, gradviz's modules): not the trace's memory
    with tempfile.TemporaryDirectory() as folder:
        if options.profile:
            print(profile(options.profile, steps[-1], Path(folder)))
            return 0
        rows = [measure(n, options.rounds, Path(folder)) for n in steps]
        print(f"torch {torch.__version__}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
        print(table(rows))
        print()
        print(per_kind(steps[0], Path(folder)))
    return 0


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


if __name__ == "__main__":
    sys.exit(main())
