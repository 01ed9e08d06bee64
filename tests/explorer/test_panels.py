"""The page's script as panels: every file of assets/panels/ is inlined, in order, each under 400 lines; the pure
helpers pass their `node --test` unit tests (a missing node is a skip on a laptop, a failure under CI=true)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import gradviz.explorer
from gradviz.explorer.page import PANELS, page_script

HERE = Path(__file__).resolve().parent
PANEL_DIR = Path(gradviz.explorer.__file__).resolve().parent / "assets" / "panels"


def test_every_panel_file_is_inlined_once_in_order_and_is_under_400_lines() -> None:
    files = sorted(p.name for p in PANEL_DIR.glob("*.js"))
    assert sorted(PANELS) == files and len(set(PANELS)) == len(PANELS)
    assert PANELS[0] == "helpers.js" and PANELS[-1] == "start.js"  # helpers first, start (which runs it all) last
    lengths = {name: len((PANEL_DIR / name).read_text(encoding="utf-8").splitlines()) for name in PANELS}
    assert max(lengths.values()) < 400, lengths
    script = page_script()
    positions = [script.index((PANEL_DIR / name).read_text(encoding="utf-8").splitlines()[0]) for name in PANELS]
    assert positions == sorted(positions)
    assert script.startswith('(function () {\n"use strict";\n') and script.endswith("})();\n")  # one scope, no globals


def test_the_page_script_parses(tmp_path: Path) -> None:
    node = _node()
    (tmp_path / "page.js").write_text(page_script(), encoding="utf-8")
    done = subprocess.run([node, "--check", str(tmp_path / "page.js")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_pure_helpers_pass_node_test() -> None:
    node = _node()
    done = subprocess.run([node, "--test", str(HERE / "test_helpers.js")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# fail 0" in done.stdout and "# pass 10" in done.stdout, done.stdout  # every test ran, none failed


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail("node is not installed: CI must run the page's JavaScript unit tests")
        pytest.skip("node is not installed (the page's JavaScript unit tests need it)")
    return node


def test_the_page_spells_an_unknown_version_as_the_text_does() -> None:
    """One spelling of "unknown" in every medium: the page's versionText(null) is analysis' UNKNOWN_VERSION."""
    from gradviz.analysis.findings import UNKNOWN_VERSION, version_text

    node = _node()
    helpers = HERE.parents[1] / "gradviz" / "explorer" / "assets" / "panels" / "helpers.js"
    program = f"const h = require({str(helpers)!r}); console.log(JSON.stringify([h.versionText(null), h.versionText(3)]));"
    done = subprocess.run([node, "-e", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [UNKNOWN_VERSION, version_text(3)] == ["v?", "v3"]
