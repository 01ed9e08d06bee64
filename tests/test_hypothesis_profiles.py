"""The property tests' profiles (tests/conftest.py): derandomized in CI, a new random search elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings, strategies as st

ROOT = Path(__file__).resolve().parent.parent


def _examples(profile: str) -> list[int]:
    seen: list[int] = []

    @settings(settings.get_profile(profile), max_examples=25)
    @given(st.integers(min_value=0, max_value=10**9))
    def record(value: int) -> None:
        seen.append(value)

    record()
    return seen


def test_the_ci_profile_draws_the_same_examples_on_every_run() -> None:
    assert settings.get_profile("ci").derandomize is True
    assert settings.get_profile("ci").database is None
    first, second = _examples("ci"), _examples("ci")
    assert first == second and len(set(first)) > 10


def test_outside_ci_each_run_searches_new_examples() -> None:
    assert settings.get_profile("dev").derandomize is False
    assert _examples("dev") != _examples("dev")


def test_the_profile_follows_the_ci_variable() -> None:
    probe = "from hypothesis import settings; import tests.conftest; print(settings.default.derandomize)"
    for ci, expected in (("true", "True"), ("", "False")):
        env = {k: v for k, v in os.environ.items() if k not in ("HYPOTHESIS_PROFILE", "CI")}
        if ci:
            env["CI"] = ci
        done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == expected
