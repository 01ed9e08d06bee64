"""Programs that end unusually end under gradviz as under Python, and what was traced is never lost: os._exit(),
exceptions whose __str__ raises, an emptied sys.path, a closed stdout, a custom sys.excepthook, odd encodings
(issue 10 items 4, 6, 7, 8)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gradviz

from .conftest import svg_texts, write

DATA_BUG = """\
import os, sys
import torch
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.tanh()
c = out.data
c.zero_()
out.sum().backward()
"""


def _python(script: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The same script under plain Python, to compare with."""
    return subprocess.run([sys.executable, script.name], cwd=script.parent, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_os_exit_still_writes_every_output_and_prints_the_findings(python_m_gradviz, tmp_path):
    write(tmp_path, "train.py", DATA_BUG + "print('before exit', flush=True)\nos._exit(4)\nprint('never')\n")

    drawn = python_m_gradviz("render", "train.py", "-o", "g.svg", "-o", "t.json")
    checked = python_m_gradviz("check", "train.py")
    as_json = python_m_gradviz("check", "train.py", "--json")

    assert drawn.returncode == 4, drawn.stderr  # the script's own code
    assert drawn.stdout.splitlines()[:3] == ["before exit", "gradviz: wrote g.svg", "gradviz: wrote t.json"]
    assert "never" not in drawn.stdout
    assert "TanhBackward0" in svg_texts(tmp_path / "g.svg")
    assert json.loads((tmp_path / "t.json").read_text())
    assert "silently_corrupted_saved_tensor" in drawn.stdout
    assert checked.returncode == 1  # an error finding
    assert "error  train.py:6  silently_corrupted_saved_tensor" in checked.stdout
    assert checked.stdout.rstrip().endswith("train.py: 1 error, 0 warnings, 0 info; the script exited with status 4")
    document = json.loads(as_json.stdout)
    assert document["exception"] == {"type": "os._exit", "message": "4", "line": 9}
    assert [f["kind"] for f in document["findings"]] == ["silently_corrupted_saved_tensor"]


def test_os_exit_of_a_clean_script_keeps_its_code_under_check(python_m_gradviz, tmp_path):
    write(tmp_path, "clean.py", "import os, torch\nx = torch.ones(2, requires_grad=True)\n(x * 2).sum().backward()\nos._exit(3)\n")
    result = python_m_gradviz("check", "clean.py")
    assert result.returncode == 3, result.stderr
    assert result.stdout.rstrip().endswith("clean.py: 0 errors, 0 warnings, 0 info; the script exited with status 3")


BAD_STR = """\
import torch
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.tanh()
out.detach().zero_()
class Unprintable(Exception):
    def __str__(self):
        raise ValueError("no str")
    def __repr__(self):
        raise ValueError("no repr")
raise Unprintable()
"""


def test_an_exception_whose_str_raises_is_shown_as_python_shows_it(python_m_gradviz, tmp_path):
    script = write(tmp_path, "bad.py", BAD_STR)
    python = _python(script)
    result = python_m_gradviz("render", "bad.py", "-o", "bad.svg")

    assert python.returncode == 1 and python.stderr.endswith("Unprintable: <exception str() failed>\n")
    assert result.returncode == 1, result.stderr
    assert result.stderr.endswith("Unprintable: <exception str() failed>\n")
    assert "internal error" not in result.stderr
    assert "poisoned_saved_tensor" in result.stdout and "TanhBackward0" in svg_texts(tmp_path / "bad.svg")


def test_trace_block_reraises_the_users_exception_whose_str_raises() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise ValueError("no str")

    with pytest.raises(Unprintable):
        with gradviz.trace() as t:
            raise Unprintable()
    assert (t.exception.type, t.exception.message) == ("Unprintable", "<exception str() failed>")


@pytest.mark.slow
@pytest.mark.parametrize(
    "ending",
    [
        "sys.path[:] = []\n",
        "print('bye')\nsys.stdout.close()\n",
        "print('bye', flush=True)\nos.close(1)\n",
        "def hook(kind, value, tb):\n    print('my hook:', kind.__name__, value, file=sys.stderr)\n"
        "sys.excepthook = hook\nraise KeyError('k')\n",
    ],
    ids=["empty-sys-path", "stdout-closed", "fd-1-closed", "excepthook"],
)
def test_unusual_endings_exit_as_python_does(python_m_gradviz, tmp_path, ending):
    script = write(tmp_path, "train.py", DATA_BUG + ending)
    python = _python(script)
    result = python_m_gradviz("render", "train.py", "-o", "g.svg")

    assert result.returncode == python.returncode, result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    assert "TanhBackward0" in svg_texts(tmp_path / "g.svg")
    assert result.stdout.startswith(python.stdout)
    if "excepthook" in ending:
        assert python.stderr == "my hook: KeyError 'k'\n"
        assert result.stderr == python.stderr  # the program's hook, not our traceback
    if "close" in ending:
        assert "gradviz: wrote" not in result.stdout  # nothing more is printed on a closed stdout


def test_ascii_terminal_and_a_non_ascii_script_name_degrade_to_escapes(python_m_gradviz, tmp_path):
    write(tmp_path, "café.py", DATA_BUG + "raise ValueError('bad \\udcff value')\n")
    env = {"PYTHONIOENCODING": "ascii"}

    checked = python_m_gradviz("check", "café.py", env=env)
    as_json = python_m_gradviz("check", "café.py", "--json", env=env)

    assert checked.returncode == 1, checked.stderr
    assert "error  caf\\xe9.py:6  silently_corrupted_saved_tensor" in checked.stdout
    assert checked.stderr.endswith("ValueError: bad \\udcff value\n")
    assert "internal error" not in checked.stderr
    document = json.loads(as_json.stdout)
    assert document["script"] == "café.py"
    assert document["exception"] == {"type": "ValueError", "message": "bad \\udcff value", "line": 8}


@pytest.mark.skipif(sys.platform != "linux", reason="file names are bytes only on Linux")
def test_a_non_utf8_file_name_still_gives_complete_files(python_m_gradviz, tmp_path):
    name = os.fsdecode(b"caf\xe9.py")
    (tmp_path / name).write_text(DATA_BUG, encoding="utf-8")
    result = python_m_gradviz("render", name, "-o", "g.svg", "-o", "g.dot", "-o", "g.json", "-o", "g.html")

    assert result.returncode == 0, result.stderr
    assert "TanhBackward0" in svg_texts(tmp_path / "g.svg")
    assert (tmp_path / "g.dot").read_text().rstrip().endswith("}")
    assert (tmp_path / "g.html").read_text().rstrip().endswith("</html>")
    document = json.loads((tmp_path / "g.json").read_text())
    assert document["script"] == str(tmp_path / name)  # the JSON escape loads back as the same name
    assert gradviz.Trace.load(tmp_path / "g.json").script == str(tmp_path / name)
