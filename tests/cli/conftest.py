"""Fixtures for the command-line tests: run the real `gradviz` command (or `python -m gradviz`) in a subprocess."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GALLERY = ROOT / "gallery"


def _console_script() -> str:
    beside = Path(sys.executable).parent / "gradviz"
    found = str(beside) if beside.exists() else shutil.which("gradviz")
    if found is None:
        pytest.skip("missing dependency: the gradviz console script (pip install -e .)")  # failed under CI=true
    return found


#: Both ways to start gradviz; every subprocess test runs with each.
FORMS = ["gradviz", "python -m gradviz"]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    cwd: Path


def _runner(form: str, tmp_path: Path) -> Callable[..., Result]:
    prefix = [_console_script()] if form == "gradviz" else [sys.executable, "-m", "gradviz"]

    def run(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: int = 240) -> Result:
        full_env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "GRADVIZ_DEBUG")}
        full_env.update(env or {})
        where = cwd or tmp_path
        proc = subprocess.run(
            [*prefix, *map(str, args)], cwd=where, env=full_env, capture_output=True, text=True, timeout=timeout
        )
        return Result(proc.returncode, proc.stdout, proc.stderr, where)

    run.form = form  # type: ignore[attr-defined]
    return run


@pytest.fixture(params=FORMS)
def gradviz_cli(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Result]:
    """`gradviz_cli(*args, env=None, cwd=None)`: run the command in `tmp_path`, once as `gradviz` and once as
    `python -m gradviz`."""
    return _runner(request.param, tmp_path)


@pytest.fixture
def python_m_gradviz(tmp_path: Path) -> Callable[..., Result]:
    """Like `gradviz_cli`, as `python -m gradviz` only: for behaviour that does not depend on how it starts."""
    return _runner("python -m gradviz", tmp_path)


def svg_texts(path: Path) -> list[str]:
    """The text elements of an SVG written by dot, unescaped, in document order."""
    return [html.unescape(t).replace("\xa0", " ") for t in re.findall(r"<text[^>]*>([^<]*)</text>", path.read_text())]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path
