"""`./dev`, the newcomer's command: it installs only what is missing, so with everything there it never calls apt-get."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(0o755)


def test_dev_runs_no_apt_get_when_everything_is_installed(tmp_path: Path) -> None:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    calls = tmp_path / "calls.log"
    for tool in ("apt-get", "sudo"):
        _stub(stubs, tool, f'echo "{tool} $*" >> {calls}')
    for tool in ("dot", "chromium", "chromedriver"):
        _stub(stubs, tool, "exit 0")
    # the font first, then far more than a pipe holds: `grep -q` would stop reading and fc-list would die of SIGPIPE
    _stub(stubs, "fc-list", 'echo "/usr/share/fonts/DejaVuSansMono.ttf: DejaVu Sans Mono:style=Book"\n'
                            'i=0; while [ $i -lt 20000 ]; do echo "/usr/share/fonts/other$i.ttf: Other Font $i"; '
                            'i=$((i+1)); done')
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    _stub(venv / "bin", "python", f'echo "python ran: $*" >> {calls}')
    (venv / ".installed").touch()
    os.utime(venv / ".installed", (4102444800, 4102444800))  # newer than pyproject.toml: nothing to install
    python = shutil.which("python3") or shutil.which("python")
    assert python is not None
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "VENV": str(venv), "PYTHON": python}

    done = subprocess.run([str(ROOT / "dev"), "test", "-k", "nothing"], env=env, capture_output=True, text=True,
                          timeout=120)

    assert done.returncode == 0, done.stderr
    assert calls.read_text().splitlines() == [
        "python ran: -m ruff check gradviz tests benchmarks gallery",  # the linter, then the type checker, first
        "python ran: -m mypy",
        "python ran: -m pytest -n auto -k nothing",  # one worker per core
    ]


def test_dev_installs_only_the_missing_font(tmp_path: Path) -> None:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    calls = tmp_path / "calls.log"
    _stub(stubs, "apt-get", f'echo "apt-get $*" >> {calls}')
    for tool in ("dot", "chromium", "chromedriver"):
        _stub(stubs, tool, "exit 0")
    _stub(stubs, "fc-list", 'echo "/usr/share/fonts/Other.ttf: Other Font"')
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    _stub(venv / "bin", "python", "exit 0")
    (venv / ".installed").touch()
    os.utime(venv / ".installed", (4102444800, 4102444800))
    python = shutil.which("python3") or shutil.which("python")
    assert python is not None
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "VENV": str(venv), "PYTHON": python}

    done = subprocess.run([str(ROOT / "dev"), "test"], env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr
    assert calls.read_text().splitlines() == ["apt-get update", "apt-get install -y fonts-dejavu-core"]
