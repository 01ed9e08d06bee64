"""A program's wrapper of `Tensor.backward` runs once per call under gradviz, wherever the wrapper keeps the original
(issue 36 item 6): in a default argument, a dict, an object's attribute, a wrapper it wraps. The objects alive when
tracing begins are frozen for the collector, where `gc.get_referrers` does not look: gradviz found the original only
in a closure or the module's globals, and ran the program's wrapper a second time (`[1, 1, 1, 1]` for `[1, 1]`).
Each program runs under Python and under `gradviz check` and `gradviz render` in a subprocess, and in-process inside
`gradviz.trace()`; the output must be Python's."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GRADVIZ = [sys.executable, "-m", "gradviz"]
TAIL = """
w = torch.ones(3, requires_grad=True)
loss = (w * 2).tanh().sum()
loss.backward(retain_graph=True)
loss.backward()
(w * 3).sum().backward()
print(calls, [round(g, 4) for g in w.grad.tolist()])
"""
HOLDERS = {
    "default argument": """
        def counted(self, *a, _orig=torch.Tensor.backward, **k):
            calls.append(1)
            return _orig(self, *a, **k)
        torch.Tensor.backward = counted
    """,
    "dict": """
        ORIGINALS = {"backward": torch.Tensor.backward}
        def counted(self, *a, **k):
            calls.append(1)
            return ORIGINALS["backward"](self, *a, **k)
        torch.Tensor.backward = counted
    """,
    "object attribute, installed in main": """
        class Counter:
            def __init__(self):
                self.original = torch.Tensor.backward
            def install(self):
                counter = self
                def counted(tensor, *a, **k):
                    calls.append(1)
                    return counter.original(tensor, *a, **k)
                torch.Tensor.backward = counted
        def main():
            Counter().install()
        main()
    """,
    "a wrapper of a functools.wraps wrapper": """
        def wrap(original):
            @functools.wraps(original)
            def counted(*a, **k):
                calls.append(1)
                return original(*a, **k)
            return counted
        def plain(original):
            def counted(self, *a, **k):
                return original(self, *a, **k)
            return counted
        torch.Tensor.backward = plain(wrap(torch.Tensor.backward))
    """,
    "Tensor.backward and autograd.backward, each through a lambda": """
        held = [torch.Tensor.backward, torch.autograd.backward]
        torch.Tensor.backward = lambda self, *a, **k: (calls.append(1), held[0](self, *a, **k))[1]
        torch.autograd.backward = lambda *a, **k: (calls.append(2), held[1](*a, **k))[1]
    """,
}


def _program(tmp: Path, holder: str, *, in_process: bool = False) -> Path:
    body = textwrap.dedent(HOLDERS[holder]) + TAIL
    if in_process:
        body = "import gradviz\nwith gradviz.trace():\n" + textwrap.indent(body, "    ")
    script = tmp / "wrapped.py"
    script.write_text("import functools\nimport torch\ncalls = []\n" + body)
    return script


def _stdout(command: list[str], cwd: Path) -> str:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[0]


@pytest.mark.parametrize("holder", list(HOLDERS))
def test_a_wrapper_of_backward_runs_once_per_call_under_gradviz(holder: str, tmp_path: Path) -> None:
    script = _program(tmp_path, holder)
    python = _stdout([sys.executable, str(script)], tmp_path)
    assert python.startswith("[1, ")  # (what the program counts under Python: one per call)
    assert _stdout([*GRADVIZ, "check", "-q", str(script)], tmp_path) == python
    assert _stdout([*GRADVIZ, "render", "-q", str(script), "-o", str(tmp_path / "g.dot")], tmp_path) == python
    inside = _program(tmp_path, holder, in_process=True)
    assert _stdout([sys.executable, str(inside)], tmp_path) == python
