"""What the sentinel costs after the step window: CPU time per step, traced (window closed) / untraced (issue 29).

    python benchmarks/bench_sentinel.py                  # the table (about a minute on 2 cores)
    python benchmarks/bench_sentinel.py --rounds 21 --steps 200

The workloads are the loop bodies of `workloads/mlp_train.py` (3-layer MLP, Adam) and `workloads/lstm_lm.py`
(2-layer LSTM language model, truncated BPTT, manual SGD through `p.data`, no optimizer). The goal is 1.10x on
Python 3.11 (the sentinel is a mode on torch's stack) and 1.05x on 3.12+ (sys.monitoring: tracer/monitor.py).
Each round runs, in turn:
`plain` (the steps untraced), `pass-through` (inside a TorchFunctionMode that only calls the function: the floor),
`sentinel` (inside `gradviz.trace(steps=W)`, after its W-step window closed: only the steps after the window are
timed) and `no sentinel` (the same with `sentinel=False`: the recorder is off the stack). A cell is the median over
rounds of CPU time (time.process_time) for `--steps` steps, divided by the plain median of the same run.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import gradviz

# after the window, a step at most 1.10x an untraced one; 1.05x where sys.monitoring takes the mode off the stack
GOAL = 1.05 if sys.version_info >= (3, 12) else 1.10


def mlp() -> Callable[[], None]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data, labels = torch.randn(512, 32), torch.randint(0, 10, (512,))
    state = {"step": 0}

    def step() -> None:
        start = (state["step"] * 32) % 512
        state["step"] += 1
        batch = slice(start, start + 32)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(data[batch]), labels[batch])
        loss.backward()
        opt.step()

    return step


def lstm() -> Callable[[], None]:
    torch.manual_seed(0)
    vocab, emsize, nhid, bptt, batch = 2000, 64, 64, 20, 16
    corpus = torch.randint(0, vocab, (batch, bptt * 50 + 1)).t().contiguous()

    class LM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Embedding(vocab, emsize)
            self.rnn = nn.LSTM(emsize, nhid, 2, dropout=0.2)
            self.decoder = nn.Linear(nhid, vocab)

        def forward(self, tokens: torch.Tensor, hidden: Any) -> Any:
            output, hidden = self.rnn(self.encoder(tokens), hidden)
            return self.decoder(output).view(-1, vocab), hidden

    model = LM()
    state: dict[str, Any] = {"i": 0, "hidden": (torch.zeros(2, batch, nhid), torch.zeros(2, batch, nhid)), "total": 0.0}

    def step() -> None:
        start = (state["i"] % 50) * bptt
        state["i"] += 1
        data, targets = corpus[start : start + bptt], corpus[start + 1 : start + 1 + bptt].reshape(-1)
        hidden = tuple(h.detach() for h in state["hidden"])
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = nn.functional.cross_entropy(output, targets)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-5.0)
        state["hidden"] = hidden
        state["total"] += loss.item()

    return step


WORKLOADS = {"mlp": ("MLP, Adam (mlp_train.py)", mlp), "lstm": ("LSTM LM, manual SGD (lstm_lm.py)", lstm)}


class PassThrough(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


def _timed(step: Callable[[], None], steps: int) -> float:
    start = time.process_time()
    for _ in range(steps):
        step()
    return time.process_time() - start


def _after_window(step: Callable[[], None], steps: int, window: int, sentinel: bool) -> float:
    with gradviz.trace(steps=window, sentinel=sentinel) as trace:
        for _ in range(window + 1):  # the window, and the call that closes it
            step()
        spent = _timed(step, steps)
    assert trace.window is not None and trace.window.closed
    assert not trace.window.rearmed, trace.window.describe_rearmed()  # the same code: nothing is traced again
    return spent


def measure(workload: str, rounds: int, steps: int, window: int) -> dict[str, list[float]]:
    step = WORKLOADS[workload][1]()
    modes: dict[str, Callable[[], float]] = {
        "plain": lambda: _timed(step, steps),
        "pass-through": lambda: _with(PassThrough(), step, steps),
        "sentinel": lambda: _after_window(step, steps, window, True),
        "no sentinel": lambda: _after_window(step, steps, window, False),
    }
    for run in modes.values():  # warm-up
        run()
    times: dict[str, list[float]] = {mode: [] for mode in modes}
    for _ in range(rounds):
        for mode, run in modes.items():
            times[mode].append(run())
    return times


def _with(mode: TorchFunctionMode, step: Callable[[], None], steps: int) -> float:
    with mode:
        return _timed(step, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--steps", type=int, default=100, help="steps timed after the window, per round")
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--only", choices=sorted(WORKLOADS))
    options = parser.parse_args()
    torch.set_num_threads(1)
    names = [options.only] if options.only else list(WORKLOADS)
    how = "sys.monitoring, the mode off the stack" if sys.version_info >= (3, 12) else "a TorchFunctionMode"
    print(f"Python {platform.python_version()}, torch {torch.__version__}: the sentinel is {how}")
    print(f"{'workload':<36}{'plain/step':>12}{'pass-through':>14}{'sentinel':>10}{'no sentinel':>13}  goal: sentinel <= {GOAL:.2f}x")
    failed = False
    for name in names:
        times = measure(name, options.rounds, options.steps, options.window)
        plain = statistics.median(times["plain"])
        ratios = {mode: statistics.median(values) / plain for mode, values in times.items()}
        verdict = "meets" if ratios["sentinel"] <= GOAL else "MISSES"
        failed |= verdict != "meets"
        print(
            f"{WORKLOADS[name][0]:<36}{plain / options.steps * 1e3:>10.2f}ms{ratios['pass-through']:>13.2f}x"
            f"{ratios['sentinel']:>9.2f}x{ratios['no sentinel']:>12.2f}x  {verdict}"
        )
    print(f"cells: median over {options.rounds} rounds of CPU time for {options.steps} steps, / the plain median")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
