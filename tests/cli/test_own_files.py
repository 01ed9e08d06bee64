"""gradviz never destroys the program's own files (issue 28 item 6): an output that is the script, the module's file or
the trace read (by name, through a symbolic link, a hard link) is refused before anything runs; a script that deletes
its own file is still quoted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import write

SCRIPT = """\
import torch
print("the script ran")
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.tanh()
c = out.data
c.zero_()
out.sum().backward()
"""


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_an_output_linked_to_the_script_is_refused_before_it_runs(python_m_gradviz, tmp_path: Path, link: str) -> None:
    script = write(tmp_path, "train.py", SCRIPT)
    if link == "symlink":
        os.symlink("train.py", tmp_path / "graph.svg")
    else:
        os.link(script, tmp_path / "graph.svg")

    result = python_m_gradviz("render", "train.py", "-o", "ok.svg", "-o", "graph.svg")

    assert result.returncode == 2, result.stdout + result.stderr
    assert script.read_text() == SCRIPT
    assert "the script ran" not in result.stdout  # refused before running anything
    assert not (tmp_path / "ok.svg").exists()
    assert result.stderr.strip() == (
        f"gradviz: refusing to write {str(tmp_path / 'graph.svg')!r}: it is the script, 'train.py' (through a link); "
        "choose another -o"
    )


def test_the_trace_read_cannot_be_the_output(python_m_gradviz, tmp_path: Path) -> None:
    write(tmp_path, "train.py", SCRIPT)
    assert python_m_gradviz("render", "train.py", "-o", "run.json").returncode == 0
    saved = (tmp_path / "run.json").read_text()
    os.symlink("run.json", tmp_path / "again.json")

    result = python_m_gradviz("render", "run.json", "-o", "again.json")

    assert result.returncode == 2
    assert "it is the trace file read, 'run.json' (through a link)" in result.stderr
    assert (tmp_path / "run.json").read_text() == saved


def test_an_output_that_is_the_module_file_is_refused(python_m_gradviz, tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    write(tmp_path / "pkg", "__init__.py", "")
    module = write(tmp_path / "pkg", "train.py", SCRIPT)
    os.symlink(module, tmp_path / "out.svg")

    result = python_m_gradviz("render", "-m", "pkg.train", "-o", "out.svg")

    assert result.returncode == 2
    assert f"it is the file of -m pkg.train, {str(module)!r} (through a link)" in result.stderr
    assert module.read_text() == SCRIPT


def test_a_script_that_deletes_its_own_file_is_still_quoted(python_m_gradviz, tmp_path: Path) -> None:
    script = write(tmp_path, "gone.py", "import os\nos.remove(__file__)\n" + SCRIPT)

    result = python_m_gradviz("check", "gone.py")

    assert not script.exists()
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    at = lines.index("error  gone.py:8  silently_corrupted_saved_tensor")
    assert lines[at + 1] == "      8 | c.zero_()"
