"""The rule for missing dependencies (tests/conftest.py): a skip outside CI, a failure under CI=true, for the marked
tests (`dot`, `browser`, `kernel`, `transformers`) and for `pytest.importorskip`; other skips stay skips."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TESTS = '''
import pytest


@pytest.mark.dot
def test_needs_dot():
    pass


@pytest.mark.transformers
def test_needs_a_package(monkeypatch):
    pass


def test_imports_what_is_not_there():
    pytest.importorskip("gradviz_no_such_module")


def test_skipped_for_another_reason():
    pytest.skip("not on this platform")


def test_runs():
    pass
'''
MODULE_LEVEL = '''
import pytest

pytest.importorskip("gradviz_no_such_module")


def test_never_collected():
    pass
'''
# `transformers` hidden: a folder first on sys.path whose `transformers` cannot be found
HIDE = "import importlib.util, sys\n_real = importlib.util.find_spec\n" \
       "importlib.util.find_spec = lambda name, *a: None if name == 'transformers' else _real(name, *a)\n"


def _outcomes(tmp_path: Path, ci: str | None) -> tuple[dict[str, str], str]:
    conftest = (ROOT / "tests" / "conftest.py").read_text(encoding="utf-8")
    future = "from __future__ import annotations\n"
    (tmp_path / "conftest.py").write_text(conftest.replace(future, future + HIDE, 1), encoding="utf-8")
    (tmp_path / "test_needs.py").write_text(TESTS, encoding="utf-8")
    (tmp_path / "test_module_level.py").write_text(MODULE_LEVEL, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CI", "HYPOTHESIS_PROFILE"))}
    env["PATH"] = str(tmp_path / "empty")  # no `dot` to be found (python is started by its full path)
    if ci is not None:
        env["CI"] = ci
    report = tmp_path / f"report-{ci}.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:gradviz", "-q", "-rs", "-n", "0",
         "--continue-on-collection-errors", "--rootdir", str(tmp_path), f"--junitxml={report}", "test_needs.py", "test_module_level.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    outcomes = {}
    for case in ET.parse(report).iter("testcase"):
        name = case.get("name") or case.get("classname", "")
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[name] = kinds[0] if kinds else "passed"
    return outcomes, done.stdout


@pytest.mark.parametrize("ci", [None, "false"])
def test_outside_ci_a_missing_dependency_skips(tmp_path: Path, ci: str | None) -> None:
    outcomes, stdout = _outcomes(tmp_path, ci)
    assert outcomes == {
        "test_needs_dot": "skipped", "test_needs_a_package": "skipped", "test_imports_what_is_not_there": "skipped",
        "test_skipped_for_another_reason": "skipped", "test_runs": "passed", "test_module_level": "skipped",
    }, stdout
    assert "missing dependency: Graphviz's dot program" in stdout
    assert "missing dependency: the Python package(s) transformers" in stdout


@pytest.mark.parametrize("ci", ["true", "1"])
def test_under_ci_a_missing_dependency_fails(tmp_path: Path, ci: str) -> None:
    outcomes, stdout = _outcomes(tmp_path, ci)
    assert outcomes == {
        # failed in setup (junit calls that an error), in the test's body, or at collection (a module-level import)
        "test_needs_dot": "error", "test_needs_a_package": "error", "test_imports_what_is_not_there": "failure",
        "test_skipped_for_another_reason": "skipped", "test_runs": "passed", "test_module_level": "error",
    }, stdout
    assert "CI=true and Graphviz's dot program (./dev installs graphviz) is missing" in stdout
    assert "CI=true: a missing dependency fails, it does not skip: could not import 'gradviz_no_such_module'" in stdout


def test_dev_installs_every_dependency_the_rule_requires() -> None:
    """Under CI=true a missing dependency fails, so `./dev test` on a fresh Debian machine must install each one: the
    Python packages the marked tests and every `pytest.importorskip` need are in the test extra, the programs are in
    ./dev's system_deps."""
    import re

    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]["test"]
    installed = {re.split(r"[<>=\[ ;]", requirement, maxsplit=1)[0].lower() for requirement in extra}
    conftest = (ROOT / "tests" / "conftest.py").read_text(encoding="utf-8")
    needed = {name for call in re.findall(r"_modules\(([^)]*)\)", conftest) for name in re.findall(r'"([\w.]+)"', call)}
    for path in (ROOT / "tests").rglob("*.py"):
        if path.name != "test_missing_dependencies.py":
            needed |= set(re.findall(r'importorskip\("([\w.]+)"\)', path.read_text(encoding="utf-8")))
    distributions = {"IPython": "ipython", "torch": "torch"}  # import name -> distribution, where they differ
    top_level = {distributions.get(name.split(".")[0], name.split(".")[0]).lower() for name in needed}
    assert {"selenium", "ipykernel", "nbclient", "nbformat", "nbconvert", "transformers", "torchviz"} <= top_level
    assert top_level - {"torch"} <= installed, top_level - installed  # torch: ./dev installs it first, pinned
    dev = (ROOT / "dev").read_text(encoding="utf-8")
    for program, package in (("dot", "graphviz"), ("chromium", "chromium"), ("chromedriver", "chromium-driver")):
        assert f'command -v {program} >/dev/null || missing+=({package})' in dev
