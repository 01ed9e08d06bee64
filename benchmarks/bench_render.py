"""End-to-end drawing time, gradviz vs torchviz + dot, on big autograd graphs; prints one table.

    python benchmarks/bench_render.py            # every case, 60 s limit per run
    python benchmarks/bench_render.py --timeout 20 --cases rnn50 chain2000

Every run is a fresh subprocess, killed after the limit ("timeout"); a crash is reported by its exception name
(torchviz: "RecursionError" on deep graphs). Times are wall-clock seconds from the start of the program's work to
the SVG written, without interpreter start-up and imports:

- gradviz trace: run the training script under gradviz.trace_script (forward, loss, backward, optimizer step),
  diagnose, render the graph view, write SVG.
- gradviz draw: run forward + loss, gradviz.draw(loss) (graph walk, no tracing), write SVG.
- torchviz: run forward + loss, torchviz.make_dot(loss, params), write SVG with dot.
- gradviz make_dot: the same, with gradviz.integrations.compat.make_dot (torchviz's picture, no simplification).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

RNN = """
import sys, torch, torch.nn as nn
torch.manual_seed(0)
steps = {steps}
cell = nn.RNNCell(32, 32)
optimizer = torch.optim.SGD(cell.parameters(), lr=0.01)
xs = torch.randn(steps, 4, 32)
h = torch.zeros(4, 32)
for t in range(steps):
    h = cell(xs[t], h)
loss = h.pow(2).mean()
model = cell
if TRAIN:
    loss.backward()
    optimizer.step()
"""

RESNET = """
import torch, torch.nn as nn
torch.manual_seed(0)

class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride=1):
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)

class ResNet50(nn.Module):
    # torchvision's ResNet-50 layout (3, 4, 6, 3 bottlenecks; 161 parameter tensors), narrower channels
    def __init__(self, classes=10, base=8):
        super().__init__()
        self.conv1 = nn.Conv2d(3, base, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(base)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], base
        for i, (blocks, width) in enumerate([(3, base), (4, base * 2), (6, base * 4), (3, base * 8)]):
            mods = []
            for b in range(blocks):
                mods.append(Bottleneck(cin, width, 2 if (b == 0 and i > 0) else 1))
                cin = width * 4
            layers.append(nn.Sequential(*mods))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))

model = ResNet50()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(2, 3, 32, 32), torch.tensor([1, 2])
loss = nn.functional.cross_entropy(model(x), y)
if TRAIN:
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

CHAIN = """
import torch
x = torch.ones(4, requires_grad=True)
y = x
for i in range({steps}):
    y = y * 1.0001
loss = y.sum()
model = torch.nn.Module()
if TRAIN:
    loss.backward()
"""

CASES = {
    "rnn50": ("RNNCell, 50 steps", RNN.format(steps=50)),
    "rnn1000": ("RNNCell, 1,000 steps", RNN.format(steps=1000)),
    "resnet50": ("ResNet-50 layout", RESNET),
    "chain2000": ("chain, 2,000 ops", CHAIN.format(steps=2000)),
    "chain20000": ("chain, 20,000 ops", CHAIN.format(steps=20000)),
}
TOOLS = ["gradviz trace", "gradviz draw", "torchviz", "gradviz make_dot"]


def _run(tool: str, script: Path, out: Path) -> dict[str, float | int]:
    """Do one measured run in this (child) process; return timings."""
    source = script.read_text()
    import torch  # noqa: F401  imports are start-up, not work: keep them out of the timings
    import torch.nn  # noqa: F401
    import torchviz  # noqa: F401

    import gradviz.analysis  # noqa: F401
    import gradviz.integrations.compat  # noqa: F401
    import gradviz.render.graph  # noqa: F401
    import gradviz.tracer  # noqa: F401
    import gradviz.tracer.walk  # noqa: F401

    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)  # the first optimizer imports torch._dynamo: seconds

    start = time.perf_counter()
    if tool == "gradviz trace":
        import gradviz
        from gradviz.analysis import diagnose
        from gradviz.render import render

        traced = script.with_name("traced_" + script.name)
        traced.write_text("TRAIN = True\n" + source)
        trace = gradviz.trace_script(traced)
        traced_at = time.perf_counter()
        diagram = render(trace, findings=diagnose(trace))
        dot_at = time.perf_counter()
        diagram.save(out)
        return {"total": time.perf_counter() - start, "trace": traced_at - start,
                "dot_text": dot_at - traced_at, "layout": time.perf_counter() - dot_at, "nodes": len(trace.nodes)}
    namespace: dict = {"TRAIN": False}
    exec(compile(source, str(script), "exec"), namespace)
    built_at = time.perf_counter()
    loss, params = namespace["loss"], dict(namespace["model"].named_parameters())
    if tool == "gradviz draw":
        from gradviz import draw

        diagram = draw(loss, params=params)
        dot_at = time.perf_counter()
        diagram.save(out)
    else:
        if tool == "torchviz":
            from torchviz import make_dot
        else:
            from gradviz.integrations.compat import make_dot
        digraph = make_dot(loss, params=params)
        dot_at = time.perf_counter()
        out.write_bytes(digraph.pipe(format="svg"))
    return {"total": time.perf_counter() - start, "build": built_at - start,
            "dot_text": dot_at - built_at, "layout": time.perf_counter() - dot_at}


def _child(tool: str, script: str, out: str) -> None:
    sys.setrecursionlimit(1000)  # the default, whatever the parent set
    try:
        result: dict = _run(tool, Path(script), Path(out))
    except BaseException as exc:  # noqa: BLE001 - report the crash by name, e.g. torchviz's RecursionError
        result = {"error": type(exc).__name__}
    print("RESULT " + json.dumps(result))


def _measure(cmd: list[str], timeout: float) -> dict:
    """Run one child in its own process group, so that a timeout also stops the `dot` it started."""
    # one intra-op thread for every tool: on a small, shared machine OpenMP spin-waiting makes timings erratic
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, env=env
    )
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return {"error": f"timeout >{timeout:g}s"}
    line = next((ln for ln in stdout.splitlines() if ln.startswith("RESULT ")), None)
    return json.loads(line[7:]) if line else {"error": f"exit {proc.returncode}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per run before it is killed")
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--tools", nargs="*", default=TOOLS, choices=TOOLS)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="gradviz-bench-") as tmp:
        for case in args.cases:
            title, source = CASES[case]
            script = Path(tmp) / f"{case}.py"
            script.write_text(textwrap.dedent(source))
            cells = []
            for tool in args.tools:
                out = Path(tmp) / f"{case}-{tool.replace(' ', '_')}.svg"
                cmd = [sys.executable, __file__, "--child", tool, str(script), str(out)]
                result = _measure(cmd, args.timeout)
                if "error" in result:
                    cells.append(result["error"])
                else:
                    size = out.stat().st_size // 1024 if out.exists() else 0
                    cells.append(f"{result['total']:.2f}s ({size} KiB)")
                print(f"  {case:<11} {tool:<17} {cells[-1]}  {json.dumps(result)}", file=sys.stderr, flush=True)
            rows.append((title, cells))
    width = max(len(t) for t, _ in rows)
    colw = [max(len(tool), *(len(c[i]) for _, c in rows)) for i, tool in enumerate(args.tools)]
    print("| " + "case".ljust(width) + " | " + " | ".join(t.ljust(w) for t, w in zip(args.tools, colw)) + " |")
    print("|" + "-" * (width + 2) + "|" + "|".join("-" * (w + 2) for w in colw) + "|")
    for title, cells in rows:
        print("| " + title.ljust(width) + " | " + " | ".join(c.ljust(w) for c, w in zip(cells, colw)) + " |")


if __name__ == "__main__":
    main()
