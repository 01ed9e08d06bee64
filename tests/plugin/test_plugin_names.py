"""Names in the pytest plugin's messages: a model a fixture hands the test is named by the test's argument."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

TEST_FILE = textwrap.dedent(
    """
    import pytest
    import torch


    @pytest.fixture
    def net():
        return torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))


    def test_layers_called_one_by_one(net):
        hidden = net[0](torch.ones(1, 2)).detach()
        net[1](hidden).sum().backward()
    """
)


def test_a_fixtures_model_called_by_its_layers_is_named_by_the_argument(tmp_path) -> None:
    """`net[0](x)` with `net` from a fixture: the finding names `net.0`'s parameters, not a bare `weight, bias`."""
    (tmp_path / "test_fixture_model.py").write_text(TEST_FILE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "FORCE_COLOR", "NO_COLOR"))}
    env["COLUMNS"] = "200"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--junitxml=junit.xml", "--gradviz-strict"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # strict: the dead-parameter warning fails the test
    line = TEST_FILE.splitlines().index("    hidden = net[0](torch.ones(1, 2)).detach()") + 1
    failure = next(ET.parse(tmp_path / "junit.xml").getroot().iter("failure"))
    message = (failure.get("message") or "") + "\n" + (failure.text or "")
    assert f"warning  test_fixture_model.py:{line}  dead_parameter  (net.0: weight, bias)" in message
    assert "(weight, bias)" not in message
