"""Shared fixtures (the gallery folder; `trace_of`, which traces a script written from source text) and the rule for
missing dependencies: a test marked `dot`, `browser`, `kernel` or `transformers` skips without what it needs, and
under CI=true fails instead, as does any `pytest.importorskip`."""

from __future__ import annotations

import importlib.util
import os
import shutil
import textwrap
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

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


# ---------------------------------------------------------------------------------------------- missing dependencies
#: CI=true (GitHub Actions, GitLab and most CI services set it): a test that needs something not installed fails
#: instead of skipping, so a CI machine missing `dot`, Chromium or a Jupyter kernel cannot pass by skipping the
#: tests that matter. Elsewhere it is a skip, with the reason.
IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")
#: How a skip for a missing dependency begins (pytest.importorskip's own "could not import ..." counts too).
MISSING = "missing dependency: "


def _modules(*names: str) -> str | None:
    absent = [name for name in names if importlib.util.find_spec(name) is None]
    return f"the Python package(s) {', '.join(absent)} (pip install -e '.[test]')" if absent else None


def _browser() -> str | None:
    if not os.path.exists("/usr/bin/chromedriver") or shutil.which("chromium") is None:
        return "Debian's chromium and chromium-driver (./dev installs them)"
    return _modules("selenium")


#: marker -> what its tests need: None when it is there, else what is missing
NEEDS: dict[str, Callable[[], str | None]] = {
    "dot": lambda: None if shutil.which("dot") else "Graphviz's dot program (./dev installs graphviz)",
    "browser": _browser,
    "kernel": lambda: _modules("ipykernel", "nbclient", "nbformat", "IPython"),
    "transformers": lambda: _modules("transformers"),
}


def missing_dependency(what: str) -> NoReturn:
    """Skip the running test for want of `what`; under CI=true fail it instead."""
    if IN_CI:
        pytest.fail(f"CI=true and {what} is missing: install it (./dev test installs every test dependency)",
                    pytrace=False)
    pytest.skip(MISSING + what)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers():
        need = NEEDS.get(marker.name)
        absent = need() if need is not None else None
        if absent:
            missing_dependency(absent)


def _for_want_of(report: pytest.CollectReport | pytest.TestReport) -> str | None:
    """The reason of a skip for a missing dependency (ours, or pytest.importorskip's), else None."""
    if not report.skipped or hasattr(report, "wasxfail") or not isinstance(report.longrepr, tuple):
        return None
    reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    return reason if reason.startswith((MISSING, "could not import")) else None


def _fail_in_ci(report: pytest.CollectReport | pytest.TestReport) -> None:
    reason = _for_want_of(report) if IN_CI else None
    if reason is not None:
        report.outcome = "failed"
        report.longrepr = f"CI=true: a missing dependency fails, it does not skip: {reason}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    _fail_in_ci(report)  # a skip from inside a test or fixture: pytest.importorskip, a module's missing program
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, Any]:
    report = yield
    _fail_in_ci(report)  # a module-level pytest.importorskip
    return report


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
