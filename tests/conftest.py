"""Shared fixtures: the gallery folder and `trace_of`, which traces a script written from source text."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from gradviz import Trace

ROOT = Path(__file__).resolve().parent.parent


def _hypothesis_profiles() -> None:
    """In CI (CI=true, as GitHub Actions, GitLab and most CI services set it) property tests are derandomized: the same
    examples on every run, so a counterexample found by chance never fails an unrelated change. Elsewhere each run
    searches new random programs (and the example database replays any failure found); HYPOTHESIS_PROFILE picks a
    profile by name."""
    import os

    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("dev", derandomize=False, deadline=None)  # explicit: hypothesis has its own CI guess
    default = "ci" if os.environ.get("CI", "").lower() in ("true", "1", "yes") else "dev"
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", default))


_hypothesis_profiles()


@pytest.fixture(scope="session")
def gallery() -> Path:
    """The folder of gallery example scripts (the seed document's examples among them)."""
    return ROOT / "gallery"


@pytest.fixture
def trace_of(tmp_path: Path) -> Callable[..., Trace]:
    """`trace_of(source, argv=(), name="script.py")`: write `source` (dedented) to a script and trace it.

    Each call writes a fresh file, so a test may trace several programs.
    """
    import gradviz

    count = 0

    def run(text: str, argv: tuple[str, ...] | list[str] = (), name: str | None = None) -> Trace:
        nonlocal count
        count += 1
        script = tmp_path / (name or f"script_{count}.py")
        script.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return gradviz.trace_script(script, argv)

    return run


def _line_of(text: str, needle: str) -> int:
    lines = textwrap.dedent(text).lstrip("\n").splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if needle in line]
    if len(hits) != 1:
        raise AssertionError(f"{needle!r} occurs on lines {hits}, expected exactly one")
    return hits[0]


@pytest.fixture(scope="session")
def line_of() -> Callable[[str, str], int]:
    """`line_of(text, needle)`: 1-based number of the only line of `text` (read as `trace_of` writes it) holding `needle`."""
    return _line_of
