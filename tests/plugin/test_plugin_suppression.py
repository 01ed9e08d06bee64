"""`pytest --gradviz` accepts findings as `gradviz check` does: `# gradviz: ignore[...]` comments, `[tool.gradviz]`
(allow, strict) found from each test file's folder upwards; accepted findings are counted at the end."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ACCEPTING = textwrap.dedent(
    """
    import torch


    def test_commented():
        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.tanh()
        out.data.zero_()  # gradviz: ignore[silently_corrupted_saved_tensor]
        out.sum().backward()


    def test_commented_above():
        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.tanh()
        # gradviz: ignore
        out.data.zero_()
        out.sum().backward()


    def test_uncommented():
        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.tanh()
        out.data.zero_()
        out.sum().backward()


    def test_dead_parameter_allowed_by_the_table():
        layer1, layer2 = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
        layer2(layer1(torch.ones(1, 2)).detach()).sum().backward()
    """
)

STRICT = textwrap.dedent(
    """
    import torch


    def test_dead_parameter_fails_when_strict():
        layer1, layer2 = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
        layer2(layer1(torch.ones(1, 2)).detach()).sum().backward()
    """
)


def test_comments_and_the_table_decide_under_pytest_gradviz(tmp_path: Path) -> None:
    (tmp_path / "accepting").mkdir()
    (tmp_path / "accepting" / "pyproject.toml").write_text('[tool.gradviz]\nallow = ["dead_parameter"]\nstrict = true\n')
    (tmp_path / "accepting" / "test_accepting.py").write_text(ACCEPTING)
    (tmp_path / "strict").mkdir()
    (tmp_path / "strict" / "pyproject.toml").write_text("[tool.gradviz]\nstrict = true\n")
    (tmp_path / "strict" / "test_strict.py").write_text(STRICT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "FORCE_COLOR", "NO_COLOR"))}

    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "--gradviz", "--rootdir", str(tmp_path),
         "accepting", "strict"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )

    outcomes = {
        line.split(" ")[0]: line.split(" ")[1]
        for line in result.stdout.splitlines()
        if line.startswith(("accepting/", "strict/")) and " " in line
    }
    assert outcomes == {
        "accepting/test_accepting.py::test_commented": "PASSED",
        "accepting/test_accepting.py::test_commented_above": "PASSED",
        "accepting/test_accepting.py::test_uncommented": "FAILED",
        "accepting/test_accepting.py::test_dead_parameter_allowed_by_the_table": "PASSED",
        "strict/test_strict.py::test_dead_parameter_fails_when_strict": "FAILED",
    }, result.stdout
    # two comments, and the one finding for the dead layer1.weight and layer1.bias the table allows
    summary = [line for line in result.stdout.splitlines() if line.startswith("gradviz: ") and "suppressed" in line]
    assert summary == ["gradviz: 3 suppressed (allow=, [tool.gradviz] allow, # gradviz: ignore comments)"], result.stdout
    assert "gradviz: dead_parameter at strict/test_strict.py:7" in result.stdout.splitlines()  # one cause, one finding
    assert "(strict: warnings fail too)" in result.stdout



QUOTED = textwrap.dedent(
    """
    import torch


    def test_quoted_in_a_string():
        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.tanh()
        out.data.zero_(); note = "# gradviz: ignore[silently_corrupted_saved_tensor]"
        out.sum().backward()
    """
)
MISSPELT = QUOTED.replace("test_quoted_in_a_string", "test_misspelt_kind").replace(
    '; note = "# gradviz: ignore[silently_corrupted_saved_tensor]"', "  # gradviz: ignore[silently_corrupted_saved_tensors]")


def test_a_quoted_or_misspelt_ignore_comment_accepts_nothing_under_pytest_gradviz(tmp_path: Path) -> None:
    (tmp_path / "test_quoted.py").write_text(QUOTED)
    (tmp_path / "test_misspelt.py").write_text(MISSPELT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "FORCE_COLOR", "NO_COLOR"))}

    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "--gradviz", "--rootdir", str(tmp_path),
         "test_quoted.py", "test_misspelt.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )

    lines = result.stdout.splitlines()
    assert "test_quoted.py::test_quoted_in_a_string FAILED" in result.stdout, result.stdout
    assert "test_misspelt.py::test_misspelt_kind FAILED" in result.stdout, result.stdout
    # the words in a string are no comment: the finding fails the test
    assert "gradviz: silently_corrupted_saved_tensor at test_quoted.py:8" in lines, result.stdout
    # a misspelt kind fails the test with the valid kinds, rather than accepting nothing in silence
    assert ("gradviz: test_misspelt.py:8: `gradviz: ignore[silently_corrupted_saved_tensors]`: unknown finding kind "
            "'silently_corrupted_saved_tensors'; the kinds are cut_edge, dead_parameter, ") in result.stdout
    assert "a bug in gradviz" not in result.stdout
