"""Saved traces, several outputs from one run, and `-m module` (issue 11 items 3 and 4)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gradviz

from .conftest import svg_texts, write

DATA_BUG = """\
import torch
with open("runs.log", "a") as log:  # one line per time the program ran
    log.write("ran\\n")
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.tanh()
c = out.data
c.zero_()
out.sum().backward()
"""


def test_render_writes_every_output_from_one_run(python_m_gradviz, tmp_path):
    write(tmp_path, "train.py", DATA_BUG)
    result = python_m_gradviz("render", "train.py", "-o", "a.svg", "-o", "b.html", "-o", "c.dot", "-o", "t.json")

    assert result.returncode == 0, result.stderr
    assert (tmp_path / "runs.log").read_text() == "ran\n"  # one run for the four files
    wrote = [line for line in result.stdout.splitlines() if line.startswith("gradviz: wrote")]
    assert wrote == ["gradviz: wrote a.svg", "gradviz: wrote b.html", "gradviz: wrote c.dot", "gradviz: wrote t.json"]
    assert "TanhBackward0" in svg_texts(tmp_path / "a.svg")
    assert (tmp_path / "b.html").read_text().lstrip().lower().startswith("<!doctype html")
    assert (tmp_path / "c.dot").read_text().startswith("digraph")
    assert json.loads((tmp_path / "t.json").read_text())  # complete JSON


def test_a_saved_trace_is_drawn_and_checked_without_running_anything(python_m_gradviz, tmp_path, monkeypatch):
    script = write(tmp_path, "train.py", DATA_BUG)
    monkeypatch.chdir(tmp_path)
    gradviz.trace_script(script).to_json(tmp_path / "run.json")
    script.unlink()  # nothing left to run
    (tmp_path / "runs.log").unlink()

    drawn = python_m_gradviz("render", "run.json", "--view", "memory", "-o", "memory.svg", "-o", "graph.dot")
    checked = python_m_gradviz("check", "run.json")
    as_json = python_m_gradviz("check", "run.json", "--json")

    assert drawn.returncode == 0, drawn.stderr
    assert "version counter" in " ".join(svg_texts(tmp_path / "memory.svg"))
    assert (tmp_path / "graph.dot").read_text().startswith("digraph")
    assert not (tmp_path / "runs.log").exists()
    assert checked.returncode == 1
    assert "error  train.py:7  silently_corrupted_saved_tensor" in checked.stdout
    assert checked.stdout.rstrip().endswith("run.json: 1 error, 0 warnings, 0 info")
    document = json.loads(as_json.stdout)
    assert [(f["kind"], f["line"]) for f in document["findings"]] == [("silently_corrupted_saved_tensor", 7)]
    # the default output name comes from the trace file's name
    default = python_m_gradviz("render", "run.json", "-q")
    assert default.returncode == 0 and (tmp_path / "run.gradviz.svg").is_file()


def test_bad_trace_files_get_one_line_and_exit_2(python_m_gradviz, tmp_path):
    write(tmp_path, "other.json", '{"format": "something-else"}')
    write(tmp_path, "broken.json", '{"format": ')
    for args in (["check", "other.json"], ["render", "broken.json"], ["check", "missing.json"],
                 ["render", "other.json", "--", "--epochs", "1"]):
        result = python_m_gradviz(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert result.stderr.startswith("gradviz: ") and "Traceback" not in result.stderr
    assert "other.json" in python_m_gradviz("check", "other.json").stderr
    assert "missing.json" in python_m_gradviz("check", "missing.json").stderr


MODULE = """\
import sys
import torch
from .helpers import SCALE
print("argv", sys.argv)
print("main", __name__, __spec__.name, __package__, __file__)
print("path0", sys.path[0])
a = torch.ones(3, requires_grad=True)
out = (a * SCALE).tanh()
c = out.data
c.zero_()
out.sum().backward()
"""


def _package(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    write(tmp_path / "pkg", "__init__.py", "")
    write(tmp_path / "pkg", "helpers.py", "SCALE = 2.0\n")
    write(tmp_path / "pkg", "train.py", MODULE)


def test_dash_m_runs_a_module_exactly_as_python_m(python_m_gradviz, tmp_path):
    _package(tmp_path)
    python = subprocess.run([sys.executable, "-m", "pkg.train", "--epochs", "1"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert python.returncode == 0, python.stderr

    result = python_m_gradviz("check", "-m", "pkg.train", "--", "--epochs", "1")

    assert result.returncode == 1, result.stderr
    program_lines = result.stdout.splitlines()[:3]
    assert program_lines == python.stdout.splitlines()  # argv[0], __main__, __spec__, __package__, sys.path[0]
    assert program_lines[0] == f"argv ['{tmp_path / 'pkg' / 'train.py'}', '--epochs', '1']"
    assert "error  pkg/train.py:10  silently_corrupted_saved_tensor" in result.stdout
    assert result.stdout.rstrip().endswith("-m pkg.train: 1 error, 0 warnings, 0 info")

    drawn = python_m_gradviz("render", "-m", "pkg.train", "-q")
    assert drawn.returncode == 0, drawn.stderr
    assert "TanhBackward0" in svg_texts(tmp_path / "train.gradviz.svg")


def test_dash_m_of_a_missing_module_is_one_line_and_exit_2(python_m_gradviz, tmp_path):
    _package(tmp_path)
    for args in (["check", "-m", "no_such_module.train"], ["render", "-m", "not a name"],
                 ["check", "-m", "pkg.train", "train.py"], ["render", "-m", "pkg.nothing"], ["check", "-m", "pkg"]):
        result = python_m_gradviz(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "pkg.nothing" in python_m_gradviz("check", "-m", "pkg.nothing").stderr
    assert python_m_gradviz("check", "-m", "no_such_module.train").stderr == (
        "gradviz: -m no_such_module.train: Error while finding module specification for 'no_such_module.train' "
        "(ModuleNotFoundError: No module named 'no_such_module')\n"
    )
    # Python's own words for a package without __main__.py
    assert python_m_gradviz("check", "-m", "pkg").stderr == (
        "gradviz: -m pkg: No module named pkg.__main__; 'pkg' is a package and cannot be directly executed\n"
    )


def test_dash_m_when_the_package_init_raises_behaves_like_python(python_m_gradviz, tmp_path):
    (tmp_path / "bad").mkdir()
    write(tmp_path / "bad", "__init__.py", "import torch\nscale = torch.ones(2)\nraise ValueError('boom in init')\n")
    write(tmp_path / "bad", "mod.py", "print('never runs')\n")
    python = subprocess.run([sys.executable, "-m", "bad.mod"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert python.returncode == 1

    for command in ("check", "render"):
        result = python_m_gradviz(command, "-m", "bad.mod")
        assert result.returncode == 1, result.stderr  # the program's error, not "a bug in gradviz" (3)
        assert "bug in gradviz" not in result.stderr and "never runs" not in result.stdout
        assert f'File "{tmp_path / "bad" / "__init__.py"}", line 3, in <module>' in result.stderr
        assert result.stderr.rstrip().endswith("ValueError: boom in init")
