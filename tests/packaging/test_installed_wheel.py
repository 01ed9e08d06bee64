"""The wheel `python -m build` makes works installed in a fresh virtual environment: its name is our own
(torch-gradviz), and the command, the pytest plugin, the `%%gradviz` magic, the Sphinx scraper hook and the
package data all come from it, not from the source tree."""

from __future__ import annotations

import json
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from plugin.wheel_env import DISTRIBUTION, ROOT, build, clean_env, fresh_venv, source_copy

pytestmark = pytest.mark.slow

BUG = """\
import torch

a = torch.tensor([1, 2, 3.], requires_grad=True)
out = a.tanh()
c = out.data
c.zero_()
out.sum().backward()
print(a.grad)
"""

TEST_BUG = """\
import torch


def test_silent_corruption():
    a = torch.tensor([1, 2, 3.], requires_grad=True)
    out = a.tanh()
    out.data.zero_()
    out.sum().backward()
"""

MAGIC = """\
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "gradviz")
with capture_output() as captured:
    shell.run_cell("%%gradviz\\nimport torch\\nw = torch.ones(3, requires_grad=True)\\nloss = (w * 2).tanh().sum()\\nloss.backward()\\n")
kinds = sorted({kind for output in captured.outputs for kind in output.data})
svg = next(output.data["image/svg+xml"] for output in captured.outputs if "image/svg+xml" in output.data)
print(kinds)
print("TanhBackward0" in svg)
"""

# sphinx-gallery's call, as it makes it after running an example's block: the scraper saves the block's diagram
SCRAPER = """\
import itertools, pathlib, sys
import torch
import gradviz

scraper = gradviz._get_sg_image_scraper()
with gradviz.trace() as recorded:
    w = torch.ones(3, requires_grad=True)
    (w * 2).tanh().sum().backward()
diagram = gradviz.render(recorded)
out = pathlib.Path(sys.argv[1])
images = (str(out / f"sphx_glr_plot_example_{i:03}.png") for i in itertools.count(1))
block_vars = {"example_globals": {"diagram": diagram, "n": 3}, "image_path_iterator": images,
              "src_file": str(out / "plot_example.py")}
rst = scraper(("code", "w = 1", 1), block_vars, {"src_dir": str(out)})
print(scraper.__module__)
print(repr(rst))
print(scraper(("code", "x = 2", 2), block_vars, {"src_dir": str(out)}) == "")  # nothing new: no image twice
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("wheel")
    sdist, wheel = build(source_copy(base / "src"), base / "dist")
    python = fresh_venv(base / "venv")
    result = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--disable-pip-version-check", str(wheel)],
        capture_output=True, text=True, timeout=300, env=clean_env(),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    work = base / "work"
    work.mkdir()
    return {"sdist": sdist, "wheel": wheel, "python": python, "bin": python.parent, "work": work}


def _run(installed: dict[str, Path], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=installed["work"], capture_output=True, text=True, timeout=300, env=clean_env())


def test_the_sdist_and_wheel_are_named_torch_gradviz_and_carry_the_package_data_and_entry_points(installed):
    assert installed["wheel"].name == "torch_gradviz-0.1.0-py3-none-any.whl"
    assert installed["sdist"].name == "torch_gradviz-0.1.0.tar.gz"
    with zipfile.ZipFile(installed["wheel"]) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read("torch_gradviz-0.1.0.dist-info/METADATA").decode()
        entry_points = wheel.read("torch_gradviz-0.1.0.dist-info/entry_points.txt").decode()
    assert {
        "gradviz/py.typed", "gradviz/explorer/assets/panels/helpers.js", "gradviz/explorer/assets/panels/start.js",
        "gradviz/explorer/assets/explorer.css", "gradviz/explorer/document.schema.json",
        "gradviz/explorer/assets/vendor/dagre.min.js", "gradviz/explorer/assets/vendor/LICENSE-dagre.txt", "gradviz/cli/command.py",
    } <= names
    assert not any(name.startswith("tests/") for name in names)
    assert f"\nName: {DISTRIBUTION}\n" in metadata
    assert "[console_scripts]\ngradviz = gradviz.cli.command:main" in entry_points
    assert "[pytest11]\ngradviz = gradviz.integrations.pytest_plugin" in entry_points
    with tarfile.open(installed["sdist"]) as sdist:
        members = {Path(name).relative_to("torch_gradviz-0.1.0").as_posix() for name in sdist.getnames() if "/" in name}
    assert {"pyproject.toml", "README.md", "gradviz/explorer/assets/vendor/dagre.min.js", "gradviz/__init__.py"} <= members


def test_gradviz_is_imported_from_the_fresh_environment(installed):
    result = _run(installed, str(installed["python"]), "-c",
                  "import gradviz, importlib.metadata as m; print(gradviz.__file__); print(m.version('torch-gradviz'))")

    assert result.returncode == 0, result.stderr
    where, version = result.stdout.split()
    assert Path(where).is_relative_to(installed["bin"].parent) and not Path(where).is_relative_to(ROOT)
    assert version == "0.1.0"


def test_render_and_check_sarif_from_the_console_script(installed):
    (installed["work"] / "bug.py").write_text(BUG, encoding="utf-8")
    gradviz = str(installed["bin"] / "gradviz")

    render = _run(installed, gradviz, "render", "bug.py", "-o", "bug.svg", "-o", "bug.html")
    check = _run(installed, gradviz, "check", "bug.py", "--format", "sarif")

    assert render.returncode == 0, render.stderr
    assert "TanhBackward0" in (installed["work"] / "bug.svg").read_text(encoding="utf-8")
    page = (installed["work"] / "bug.html").read_text(encoding="utf-8")
    graph_js = (ROOT / "gradviz" / "explorer" / "assets" / "panels" / "graph.js").read_text(encoding="utf-8").strip().splitlines()
    assert graph_js[len(graph_js) // 2].strip() in page  # the package data reached the page
    assert check.returncode == 1, check.stderr
    (result,) = json.loads(check.stdout)["runs"][0]["results"]
    assert (result["ruleId"], result["locations"][0]["physicalLocation"]["region"]["startLine"]) == (
        "silently_corrupted_saved_tensor", 6
    )


def test_pytest_gradviz_loads_the_installed_plugin(installed):
    (installed["work"] / "test_bug.py").write_text(TEST_BUG, encoding="utf-8")

    plain = _run(installed, str(installed["python"]), "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_bug.py")
    traced = _run(installed, str(installed["python"]), "-m", "pytest", "-p", "no:cacheprovider", "-q", "--gradviz",
                  "test_bug.py")

    assert plain.returncode == 0, plain.stdout  # the plugin does nothing until asked
    assert traced.returncode == 1, traced.stdout + traced.stderr
    assert "FAILED test_bug.py::test_silent_corruption" in traced.stdout
    assert "gradviz: silently_corrupted_saved_tensor at test_bug.py:7" in traced.stdout  # the plugin's failure text


def test_the_magic_and_the_sphinx_scraper_hook_from_the_wheel(installed):
    magic = _run(installed, str(installed["python"]), "-c", MAGIC)
    scraper = _run(installed, str(installed["python"]), "-c", SCRAPER, str(installed["work"]))

    assert magic.returncode == 0, magic.stderr
    kinds, drawn = magic.stdout.split("\n")[:2]
    assert "image/svg+xml" in kinds and drawn == "True"
    assert scraper.returncode == 0, scraper.stderr
    module, rst, again = scraper.stdout.splitlines()[-3:]
    assert module == "gradviz.integrations.sphinx"
    image = installed["work"] / "sphx_glr_plot_example_001.svg"  # the block's diagram, saved as SVG
    assert image.read_text(encoding="utf-8").lstrip().startswith(("<?xml", "<svg")) and "TanhBackward0" in image.read_text()
    assert ".. image-sg:: /sphx_glr_plot_example_001.svg" in rst  # the rST sphinx-gallery puts under the block
    assert again == "True"
