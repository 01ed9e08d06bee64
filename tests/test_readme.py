"""Every command README.md tells a user to run is run here, so the README cannot rot."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SHELL_LINES = [
    line.split("#", 1)[0].strip()
    for block in re.findall(r"```sh\n(.*?)```", README, re.S)
    for line in block.splitlines()
    if line.strip()
]
GRADVIZ_LINES = [line for line in SHELL_LINES if line.startswith("gradviz ")]
# what each README command must do: exit status, and the file it writes (None: prints only)
EXPECTED = {
    "gradviz render gallery/plot_02_data_silent.py -o data.svg": (0, "data.svg"),
    "gradviz render gallery/plot_01_testdetach.py --view memory -o testdetach-memory.png": (0, "testdetach-memory.png"),
    "gradviz render gallery/plot_03_detach_raises.py --view report -o detach-report.html": (1, "detach-report.html"),
    "gradviz check gallery/plot_02_data_silent.py": (1, None),
    "gradviz check gallery/plot_01_testdetach.py --json": (0, None),
    "gradviz render gallery/plot_02_data_silent.py -o data.svg -o data-report.html -o data-trace.json": (0, "data-report.html"),
    "gradviz check gallery/plot_16_wgan_clip_between.py --verify": (1, None),
    "gradviz check gallery/plot_19_clean_training_loop.py --steps 2": (0, None),
    "gradviz check gallery/plot_19_clean_training_loop.py --steps 2 --no-sentinel": (0, None),
    "gradviz check gallery/plot_11_tbptt.py --stop-after 2": (0, None),
    "gradviz check gallery/plot_19_clean_training_loop.py --steps all": (0, None),
    "gradviz render gallery/plot_11_tbptt.py --steps 2 -o first-steps.svg": (0, "first-steps.svg"),
}
# what the step-window commands print about the window
WINDOW = {
    "gradviz check gallery/plot_19_clean_training_loop.py --steps 2": "no problems found (steps 1-2 of 5 traced)",
    "gradviz check gallery/plot_19_clean_training_loop.py --steps 2 --no-sentinel": "no problems found (steps 1-2 of 5 traced)",
    "gradviz check gallery/plot_11_tbptt.py --stop-after 2": "(steps 1-2 traced, then the program was stopped there",
    "gradviz check gallery/plot_19_clean_training_loop.py --steps all": "plot_19_clean_training_loop.py: no problems found\n",
    "gradviz render gallery/plot_11_tbptt.py --steps 2 -o first-steps.svg": "gradviz: steps 1-2 of 3 traced",
}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "gallery", tmp_path / "gallery", ignore=shutil.ignore_patterns("_build", "images"))
    return tmp_path


def test_readme_lists_exactly_the_checked_commands() -> None:
    assert set(GRADVIZ_LINES) == set(EXPECTED)
    assert [line for line in SHELL_LINES if line.startswith("./dev")] == [
        "./dev demo", "./dev test", "./dev compat", "./dev compat oldest tests/tracer tests/analysis",
    ]


@pytest.mark.dot
@pytest.mark.parametrize("command", sorted(EXPECTED))
def test_readme_command_runs(command: str, workdir: Path) -> None:
    code, output = EXPECTED[command]
    argv = [sys.executable, "-m", "gradviz", *shlex.split(command)[1:]]
    result = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=300)
    assert result.returncode == code, result.stderr
    assert "Traceback (most recent call last)" not in result.stderr or "plot_03" in command
    if output is not None:
        written = workdir / output
        assert written.stat().st_size > 1000
        head = written.read_bytes()[:64]
        assert head.startswith(b"\x89PNG") if output.endswith(".png") else b"<" in head
    for name in _outputs(command):
        _check_output(workdir / name)
    if "--json" in command:
        document = json.loads(result.stdout)
        assert {(f["kind"], f["line"]) for f in document["findings"]} == {("cut_edge", 29), ("dead_parameter", 29)}
    elif command in WINDOW:
        assert WINDOW[command] in result.stdout
    elif "--verify" in command:  # the measured error, as README shows it
        assert "`critic.0.weight`: max abs error 1.04, relative error 0.97, cosine 0.878998" in result.stdout
    elif command.startswith("gradviz check"):
        assert "silently_corrupted_saved_tensor" in result.stdout and ":24" in result.stdout


def test_readme_python_example_runs(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block = re.search(r"```python\n(.*?)```", README, re.S).group(1)  # type: ignore[union-attr]
    monkeypatch.chdir(workdir)
    namespace: dict[str, object] = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert [f.line for f in namespace["gradviz"].diagnose(namespace["t"])] == [8]  # type: ignore[attr-defined]
    assert (workdir / "memory.svg").read_text().startswith(("<?xml", "<svg"))
    assert namespace["same"].to_dict() == namespace["t"].to_dict()  # type: ignore[attr-defined]
    memory = _svg_texts(workdir / "memory.svg")
    assert any("v0 → v1" in t for t in memory), memory  # the write through c moved the version counter
    loss = _svg_texts(workdir / "loss.svg")  # gradviz.draw(loss): the graph of the Linear layer's loss
    assert {"SumBackward0", "AddmmBackward0", "TBackward0", "AccumulateGrad"} <= set(loss), loss
    assert "(1, 3)" in loss and "(1)" in loss  # the weight's and the bias's leaves, with their shapes
    assert "digraph" in namespace["dot"].source  # type: ignore[attr-defined]


def _outputs(command: str) -> list[str]:
    """Every file a README command names with -o."""
    words = shlex.split(command)
    return [words[i + 1] for i, word in enumerate(words) if word == "-o"]


def _svg_texts(path: Path) -> list[str]:
    import html

    text = path.read_text(encoding="utf-8")
    assert text.lstrip().startswith(("<?xml", "<svg")), text[:80]
    return [html.unescape(t).replace("\xa0", " ") for t in re.findall(r"<text[^>]*>([^<]*)</text>", text)]


def _check_output(path: Path) -> None:
    """Open what a README command wrote and check it shows what the README says it shows."""
    import gradviz

    name = path.name
    if name == "data.svg":
        texts = _svg_texts(path)
        assert "TanhBackward0" in texts and "version unchanged (v0)" in texts, texts
        assert any("c = out.data" in t and "line 24" in t for t in texts), texts
    elif name == "data-trace.json":
        trace = gradviz.Trace.load(path)
        assert trace.script is not None and trace.script.endswith("plot_02_data_silent.py")
        assert [(f.kind.value, f.line) for f in gradviz.diagnose(trace)] == [("silently_corrupted_saved_tensor", 24)]
    elif name.endswith(".html"):  # the explorer page: the trace document it draws is embedded in it
        from gradviz.explorer.page import read_document

        page = path.read_text(encoding="utf-8")
        kind = "poisoned_saved_tensor" if "detach" in name else "silently_corrupted_saved_tensor"
        assert page.lstrip().lower().startswith("<!doctype html")
        assert kind in str(read_document(page)), f"{name} does not carry the {kind} finding"
    elif name.endswith(".png"):
        import struct

        header = path.read_bytes()[:24]
        assert header.startswith(b"\x89PNG\r\n\x1a\n") and header[12:16] == b"IHDR"
        width, height = struct.unpack(">II", header[16:24])
        assert width > 200 and height > 100, (width, height)
    elif name == "first-steps.svg":
        texts = _svg_texts(path)
        assert any("steps 1-2 of 3 traced" in t for t in texts) or "TanhBackward0" in texts, texts
    else:
        raise AssertionError(f"the README writes {name}: say here what it must contain")


def _dev_line(needle: str) -> str:
    """The line of the `./dev` script that runs `needle`."""
    return next(line.strip().removesuffix(";;").strip() for line in (ROOT / "dev").read_text().splitlines() if needle in line)


def test_dev_commands_are_the_readme_commands() -> None:
    assert "/bin/gradviz\" render gallery/plot_02_data_silent.py -o data-example.svg" in _dev_line(" render ")
    assert "-m pytest" in _dev_line("-m pytest")
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("./dev ")]
    assert ci == ["./dev test", "./dev compat oldest tests/tracer tests/analysis"]
    assert all(line in SHELL_LINES for line in ci)  # CI runs what the README tells a maintainer to run
    unknown = subprocess.run([str(ROOT / "dev"), "nonsense"], capture_output=True, text=True)
    assert unknown.returncode == 2 and "usage: ./dev demo | ./dev test [pytest arguments] | ./dev compat" in unknown.stderr


@pytest.mark.dot
def test_dev_demo_draws_the_data_example(tmp_path: Path) -> None:
    """`./dev demo`'s drawing step, with the interpreter running these tests (the set-up is CI's `./dev test`)."""
    argv = [sys.executable, "-m", "gradviz", *shlex.split(_dev_line(" render "))[1:]]
    argv[-1] = str(tmp_path / "data-example.svg")
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    svg = (tmp_path / "data-example.svg").read_text()
    assert "bytes changed via c = out.data, line 24" in svg
