"""README's "Use in CI" section does what it says: its pytest example passes, its workflow's commands work."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SECTION = README.split("## Use in CI", 1)[1].split("\n## ", 1)[0]


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "FORCE_COLOR", "NO_COLOR"))}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_the_pytest_example_passes_under_gradviz(tmp_path):
    example = re.search(r"```python\n(.*?)```", SECTION, re.S).group(1)  # type: ignore[union-attr]
    assert "@pytest.mark.gradviz(strict=True, allow=[\"cut_edge\"])" in example and "gradviz_trace" in example
    (tmp_path / "test_example.py").write_text(example, encoding="utf-8")

    for flags in ([], ["--gradviz"]):
        result = _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *flags], tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "1 passed" in result.stdout


def test_the_pytest_commands_are_the_plugins_options():
    commands = re.search(r"```sh\n(.*?)```", SECTION, re.S).group(1)  # type: ignore[union-attr]
    options = {word for line in commands.splitlines() for word in line.split("#")[0].split() if word.startswith("--")}
    assert options == {"--gradviz", "--gradviz-strict", "--gradviz-report"}


@pytest.mark.slow
def test_the_workflows_check_writes_a_sarif_log_the_upload_step_reads(tmp_path):
    workflow = re.search(r"```yaml\n(.*?)```", SECTION, re.S).group(1)  # type: ignore[union-attr]
    runs = re.findall(r"^\s+- run: (.*)$", workflow, re.M)
    (check,) = [run for run in runs if run.startswith("gradviz check")]
    command, target = check.split(" > ")
    assert re.search(rf"sarif_file: {re.escape(target)}$", workflow, re.M)
    assert "uses: github/codeql-action/upload-sarif@" in workflow and "security-events: write" in workflow
    assert "pytest --gradviz" in runs

    shutil.copy(ROOT / "gallery" / "plot_02_data_silent.py", tmp_path / "train.py")
    result = _run([sys.executable, "-m", "gradviz", *shlex.split(command)[1:]], tmp_path)
    assert result.returncode == 1  # an error finding: the step fails, the upload (if: !cancelled()) still runs
    (found,) = json.loads(result.stdout)["runs"][0]["results"]
    assert found["ruleId"] == "silently_corrupted_saved_tensor"
    assert found["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "train.py"
    assert "if: ${{ !cancelled() }}" in workflow
