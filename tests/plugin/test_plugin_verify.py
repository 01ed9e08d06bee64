"""`pytest --gradviz-verify` and `@pytest.mark.gradviz(verify=True)`: a silent write the backward does not read is
measured identical and does not fail the test; one that changes gradients fails it with the measured error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test starts pytest (and torch) in a subprocess

TESTS = textwrap.dedent(
    '''
    import pytest
    import torch


    def test_masked_write():
        x = torch.tensor([-1.0, 2.0, -3.0, 4.0], requires_grad=True)
        h = x.relu()
        h.data[0] = -5.0  # where relu gave 0: the backward's mask is unchanged
        (h * 3).sum().backward()


    def test_wrong_gradient():
        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.tanh()
        out.data.zero_()
        out.sum().backward()


    @pytest.mark.gradviz(verify=True)
    def test_marked_masked_write():
        x = torch.tensor([-1.0, 2.0, -3.0, 4.0], requires_grad=True)
        h = x.relu()
        h.data[2] = -7.0
        (h * 3).sum().backward()


    @pytest.mark.gradviz
    def test_marked_without_verify():
        x = torch.tensor([-1.0, 2.0, -3.0, 4.0], requires_grad=True)
        h = x.relu()
        h.data[2] = -7.0
        (h * 3).sum().backward()
    '''
).lstrip("\n")


def run_pytest(folder: Path, *args: str) -> tuple[dict[str, str], dict[str, str]]:
    (folder / "test_writes.py").write_text(TESTS, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "FORCE_COLOR", "NO_COLOR"))}
    subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--junitxml=junit.xml", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    outcomes, messages = {}, {}
    for case in ET.parse(folder / "junit.xml").getroot().iter("testcase"):
        name = case.get("name", "")
        failure = next((child for child in case if child.tag in ("failure", "error")), None)
        outcomes[name] = "passed" if failure is None else "failed"
        if failure is not None:
            messages[name] = (failure.get("message") or "") + "\n" + (failure.text or "")
    return outcomes, messages


def test_verify_flag_passes_identical_writes_and_fails_wrong_gradients(tmp_path: Path) -> None:
    outcomes, messages = run_pytest(tmp_path, "--gradviz-verify")
    assert outcomes == {
        "test_masked_write": "passed",  # measured identical: info
        "test_wrong_gradient": "failed",
        "test_marked_masked_write": "passed",
        "test_marked_without_verify": "passed",  # --gradviz-verify measures the marked tests too
    }
    assert "Measured with --verify" in messages["test_wrong_gradient"]
    assert "`a`: max abs error 0.99, relative error 2.36" in messages["test_wrong_gradient"]


def test_marker_verify_without_the_flag(tmp_path: Path) -> None:
    outcomes, messages = run_pytest(tmp_path)
    assert outcomes == {
        "test_masked_write": "passed",  # not traced
        "test_wrong_gradient": "passed",  # not traced
        "test_marked_masked_write": "passed",  # verify=True: measured identical
        "test_marked_without_verify": "failed",  # the same write, unmeasured: an error
    }
    assert "silently_corrupted_saved_tensor" in messages["test_marked_without_verify"]
