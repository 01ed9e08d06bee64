"""What `gradviz check` costs end to end on real-shaped training runs: process time traced / untraced.

    python benchmarks/bench_steps.py              # both tables (several minutes on 2 cores)
    python benchmarks/bench_steps.py --only mlp   # (a) the step window on a 6,000-step MLP run
    python benchmarks/bench_steps.py --only lstm  # (b) full tracing of an LSTM language model, 50 and 600 batches
    python benchmarks/bench_steps.py --memory     # what one traced step adds to the trace (memory, JSON), in-process
    python benchmarks/bench_steps.py --first 100  # the LSTM's first 100 batches in-process: traced vs untraced batch

Each row runs the untraced script (`python script.py N`) and `gradviz check script.py ... -- N` as child
processes, interleaved, `--rounds` times; a cell is the median child CPU time (user + system: steadier than wall
time on a shared machine; wall time is shown too). One thread (OMP_NUM_THREADS=1) for both. The script's output
must be the same with and without gradviz, or the row fails.

(b)'s goal is about the cost of a batch, which the process ratios blur (start-up weighs far more at 50 batches than
at 600), so its table adds three measures of the cost per batch itself, each with its verdict: batches 51-600 of a
process (the 600-batch run less the 50-batch run), the whole run in-process at 50 and 600 batches (no start-up),
and batches 1-50 against 551-600 timed inside one in-process 600-batch run.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = HERE / "workloads"
GOAL_WINDOW = 1.3  # (a): --steps 10 on 6,000 steps at most 1.3x the untraced process
GOAL_FLAT = 0.15  # (b): the ratio at 600 batches within 15% of the ratio at 50


def _child(command: list[str]) -> tuple[float, float, str]:
    """CPU seconds (user + system) and wall seconds of one child process, and what it printed on stdout."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=HERE.parent)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, proc.stdout


def measure(script: str, argument: str, gradviz_args: list[str], rounds: int) -> dict[str, float]:
    path = str(WORKLOADS / script)
    plain_cmd = [sys.executable, path, argument]
    traced_cmd = [sys.executable, "-m", "gradviz", "check", path, "-q", *gradviz_args, "--", argument]
    plain_cpu, plain_wall, traced_cpu, traced_wall = [], [], [], []
    for _ in range(rounds):
        cpu, wall, plain_out = _child(plain_cmd)
        plain_cpu.append(cpu)
        plain_wall.append(wall)
        cpu, wall, traced_out = _child(traced_cmd)
        traced_cpu.append(cpu)
        traced_wall.append(wall)
        # `check` prints findings after the script's output; the script's own lines must be identical
        if traced_out.splitlines()[: len(plain_out.splitlines())] != plain_out.splitlines():
            raise SystemExit(f"{script} {argument}: the output differs under gradviz:\n{plain_out}\n---\n{traced_out}")
    plain, traced = statistics.median(plain_cpu), statistics.median(traced_cpu)
    plain_wall_time, traced_wall_time = statistics.median(plain_wall), statistics.median(traced_wall)
    return {
        "plain": plain,
        "traced": traced,
        "ratio": traced / plain,
        "plain_wall": plain_wall_time,
        "traced_wall": traced_wall_time,
        "wall_ratio": traced_wall_time / plain_wall_time,
    }


def memory_per_step(first: int = 100, second: int = 400) -> None:
    """Python heap (tracemalloc) and JSON bytes a traced step adds, from the difference of two run lengths, with
    the recorder's own state at the end of each (it must not grow: only the trace does)."""
    import contextlib
    import gc
    import io
    import tracemalloc

    import gradviz

    rows = {}
    for steps in (2, first, second):  # (the first run only warms up: imports and caches are not per step)
        gc.collect()
        tracemalloc.start()
        with contextlib.redirect_stdout(io.StringIO()):
            trace = gradviz.trace_script(WORKLOADS / "mlp_train.py", [str(steps)])
        gc.collect()
        heap = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        rows[steps] = (heap, len(trace.to_json().encode()), len(trace.nodes), len(trace.tensors), len(trace.events), len(trace.ops))
    (h1, j1, n1, t1, e1, o1), (h2, j2, n2, t2, e2, o2) = rows[first], rows[second]
    per = second - first
    print(f"MLP (3 Linear, Adam), per traced step, from {first} vs {second} steps:")
    print(f"  {(h2 - h1) / per / 1024:.1f} KiB of Python heap, {(j2 - j1) / per / 1024:.1f} KiB of JSON")
    print(f"  {(n2 - n1) / per:.0f} autograd nodes, {(t2 - t1) / per:.0f} tensors, {(o2 - o1) / per:.0f} calls, "
          f"{(e2 - e1) / per:.0f} events per step")
    records = (n2 - n1) + (t2 - t1) + (o2 - o1) + (e2 - e1)
    print(f"  about {(h2 - h1) / records:.0f} bytes of heap per record (node, tensor, call or event)")


_MARKS = "_bench_steps_marks"  # the module name the timed copy of the LSTM script imports its clock from


def _timed_lstm_script(directory: str) -> str:
    """A copy of lstm_lm.py that notes the process CPU time at the start of every batch and after the last one, in
    a list that `sys.modules[_MARKS]` holds (the untraced and the traced run see the same copy)."""
    text = (WORKLOADS / "lstm_lm.py").read_text()
    anchors = ("import sys\n", "for i in range(batches):\n", 'print(f"final loss')
    if any(anchor not in text for anchor in anchors):
        raise SystemExit(f"lstm_lm.py changed: the timing marks need the lines {anchors}")
    text = text.replace(anchors[0], f"import sys\nimport {_MARKS} as _marks\n", 1)
    text = text.replace(anchors[1], anchors[1] + "    _marks.times.append(_marks.clock())\n", 1)
    text = text.replace(anchors[2], "_marks.times.append(_marks.clock())\n" + anchors[2], 1)
    path = os.path.join(directory, "lstm_lm.py")
    Path(path).write_text(text)
    return path


def in_process(batch_counts: tuple[int, ...], rounds: int, slice_size: int = 50) -> dict[int, dict[str, float]]:
    """Per-batch cost without start-up: the LSTM script's run in this process, untraced (runpy) and traced and
    diagnosed (trace_script + diagnose), CPU time, interleaved; medians.

    Each run also times its batches: `first`/`last` are the CPU seconds of the first and the last `slice_size`
    batches, untraced and traced (the recording only: diagnosis runs once, after the last batch)."""
    import contextlib
    import io
    import runpy
    import tempfile
    import types

    import torch

    import gradviz
    from gradviz.analysis import diagnose

    torch.set_num_threads(1)
    marks = types.SimpleNamespace(times=[], clock=time.process_time)
    sys.modules[_MARKS] = marks  # type: ignore[assignment]
    samples: dict[int, dict[str, list[float]]] = {n: {} for n in batch_counts}
    with tempfile.TemporaryDirectory() as directory:
        path = _timed_lstm_script(directory)
        for _ in range(rounds):
            for batches in batch_counts:
                for traced in (False, True):
                    marks.times = []
                    saved = sys.argv
                    start = time.process_time()
                    with contextlib.redirect_stdout(io.StringIO()):
                        if traced:
                            diagnose(gradviz.trace_script(path, [str(batches)]))
                        else:
                            sys.argv = [path, str(batches)]
                            try:
                                runpy.run_path(path, run_name="__main__")
                            finally:
                                sys.argv = saved
                    total = time.process_time() - start
                    times = marks.times
                    kind = "traced" if traced else "plain"
                    cell = samples[batches]
                    cell.setdefault(kind, []).append(total)
                    cell.setdefault(f"{kind}_first", []).append(times[slice_size] - times[0])
                    cell.setdefault(f"{kind}_last", []).append(times[-1] - times[-1 - slice_size])
                    for index in range(batches // slice_size):
                        start_mark = times[index * slice_size]
                        cell.setdefault(f"{kind}_slice{index}", []).append(times[(index + 1) * slice_size] - start_mark)
    results = {}
    for batches, cell in samples.items():
        result = {name: statistics.median(values) for name, values in cell.items()}
        result["ratio"] = result["traced"] / result["plain"]
        result["wall_ratio"] = float("nan")
        results[batches] = result
    return results


def first_batches(batches: int, rounds: int) -> int:
    """The LSTM's first `batches` batches in this process, untraced against traced, interleaved, CPU time: the
    batches alone (the script's own marks: no start-up, no diagnose) and the whole run with diagnose."""
    result = in_process((batches,), rounds, slice_size=batches)[batches]
    print(f"{'LSTM LM, first ' + str(batches) + ' batches, in-process':<52}{'plain CPU':>10}{'traced CPU':>11}{'ratio':>8}")
    for label, plain, traced in (
        ("the batches, recording only", result["plain_first"], result["traced_first"]),
        ("the whole run, trace + diagnose", result["plain"], result["traced"]),
    ):
        print(f"{'    ' + label:<52}{plain:>9.2f}s{traced:>10.2f}s{traced / plain:>7.2f}x")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["mlp", "lstm"])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each command (default 3); medians are shown")
    parser.add_argument("--memory", action="store_true", help="only the memory a traced step adds (in-process)")
    parser.add_argument("--first", type=int, metavar="N",
                        help="only the LSTM's first N batches in-process (the default window's 100 steps): what a "
                        "traced batch costs against an untraced one, recording only and with diagnose")
    options = parser.parse_args()
    if options.memory:
        memory_per_step()
        return 0
    if options.first:
        return first_batches(options.first, options.rounds)
    header = f"{'workload':<52}{'plain CPU':>10}{'check CPU':>11}{'ratio':>8}{'wall ratio':>12}"
    print(header)
    print("-" * len(header))
    ok = True

    def row(name: str, result: dict[str, float]) -> None:
        wall = "-" if math.isnan(result["wall_ratio"]) else f"{result['wall_ratio']:.2f}x"
        print(f"{name:<52}{result['plain']:>9.2f}s{result['traced']:>10.2f}s{result['ratio']:>7.2f}x{wall:>12}")

    if options.only in (None, "mlp"):
        result = measure("mlp_train.py", "6000", ["--steps", "10"], options.rounds)
        row("(a) MLP, 6,000 steps, check --steps 10", result)
        verdict = "meets" if result["ratio"] <= GOAL_WINDOW else "MISSES"
        print(f"    goal: at most {GOAL_WINDOW}x the untraced process: {verdict}")
        ok &= result["ratio"] <= GOAL_WINDOW
    if options.only in (None, "lstm"):
        # (b)'s goal is that the cost of a batch does not grow with the run. The process ratios answer it only
        # roughly: start-up (importing torch, about 3.5 s) weighs far more at 50 batches than at 600, so they differ
        # even when every batch costs the same. The rows after them measure the cost per batch itself.
        def verdict(drift: float) -> str:
            return "meets" if abs(drift) <= GOAL_FLAT else "MISSES"

        results = {}
        for batches in ("50", "600"):
            results[batches] = measure("lstm_lm.py", batches, ["--steps", "all"], options.rounds)
            row(f"(b) LSTM LM, truncated BPTT, {batches} batches, check --steps all", results[batches])
        drift = results["600"]["ratio"] / results["50"]["ratio"] - 1
        print(f"    goal as written, process ratios at 600 vs 50: {drift:+.0%}, {verdict(drift)}")
        ok &= abs(drift) <= GOAL_FLAT
        inner = in_process((50, 600), options.rounds)
        # batches 51-600 of a process: the 600-batch run less the 50-batch run, start-up and exit cancelling out
        marginal = {
            "plain": results["600"]["plain"] - results["50"]["plain"],
            "traced": results["600"]["traced"] - results["50"]["traced"],
            "wall_ratio": (results["600"]["traced_wall"] - results["50"]["traced_wall"])
            / (results["600"]["plain_wall"] - results["50"]["plain_wall"]),
        }
        marginal["ratio"] = marginal["traced"] / marginal["plain"]
        row("    batches 51-600 (600-batch run - 50-batch run)", marginal)
        drift = marginal["ratio"] / inner[50]["ratio"] - 1
        print(f"    per batch, process: batches 51-600 vs the in-process 50-batch run below: {drift:+.0%}, {verdict(drift)}")
        for batches, result in inner.items():
            row(f"(b') the same in-process, {batches} batches, trace+diagnose", result)
        drift = inner[600]["ratio"] / inner[50]["ratio"] - 1
        print(f"    per batch, in-process, without start-up: ratio at 600 vs 50: {drift:+.0%}, {verdict(drift)}")
        long_run = inner[600]
        for name in ("first", "last"):
            label = "batches 1-50" if name == "first" else "batches 551-600"
            timed = {
                "plain": long_run[f"plain_{name}"],
                "traced": long_run[f"traced_{name}"],
                "ratio": long_run[f"traced_{name}"] / long_run[f"plain_{name}"],
                "wall_ratio": float("nan"),
            }
            long_run[f"ratio_{name}"] = timed["ratio"]
            row(f"(b'') {label} of the 600-batch run, recording only", timed)
        drift = long_run["ratio_last"] / long_run["ratio_first"] - 1
        print(f"    per batch, within one run: batches 551-600 vs 1-50: {drift:+.0%}, {verdict(drift)}")
        # the same from all twelve slices of 50 batches, less at the mercy of a burst of load in one of them: a
        # straight line through the twelve ratios, read at the first slice and at the last
        ratios = [long_run[f"traced_slice{k}"] / long_run[f"plain_slice{k}"] for k in range(12)]
        slope, intercept = statistics.linear_regression(range(12), ratios)
        drift = (intercept + 11 * slope) / intercept - 1
        print(f"    the same, a line through the ratios of all 12 slices of 50 batches "
              f"({min(ratios):.2f}x-{max(ratios):.2f}x): {drift:+.0%}, {verdict(drift)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
