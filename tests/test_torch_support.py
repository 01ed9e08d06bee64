"""Outside the supported torch range gradviz stops with one line naming the version it needs: the command with
exit status 2 and no traceback, `import gradviz` with an ImportError subclass. An old torch is stood in for by a
package named torch on PYTHONPATH that only carries a version (gradviz reads torch/version.py as text)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gradviz.torch_support import MINIMUM_TORCH, REQUIREMENT, refusal

if sys.version_info >= (3, 11):
    import tomllib
else:  # (a dependency of gradviz before 3.11)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
MESSAGE = "gradviz needs torch>=2.8; this is torch 2.4.1+cu121 (upgrade: pip install 'torch>=2.8')"


@pytest.fixture
def old_torch(tmp_path: Path) -> dict[str, str]:
    package = tmp_path / "shadow" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from .version import __version__\n")
    (package / "version.py").write_text("__version__ = '2.4.1+cu121'\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(package.parent), str(ROOT)])
    env.pop("GRADVIZ_DEBUG", None)
    return env


@pytest.mark.parametrize(
    "version, refused",
    [("2.4.1+cu121", True), ("2.7.1", True), ("1.13.1", True), ("2.8.0", False), ("2.8.0+cu128", False),
     ("2.13.0+cpu", False), ("2.14.1", False), ("3.0.0a0+git1234", False), (None, False), ("unknown", False)],
)
def test_refusal_names_the_needed_version_below_2_8(version: str | None, refused: bool) -> None:
    message = refusal(version)
    if refused:
        assert message == f"gradviz needs torch>=2.8; this is torch {version} (upgrade: pip install 'torch>=2.8')"
    else:
        assert message is None


def test_pyproject_and_readme_state_the_same_floor() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    torch_requirements = [d for d in project["dependencies"] if d.startswith("torch")]
    assert torch_requirements == [REQUIREMENT] == [f"torch>={MINIMUM_TORCH[0]}.{MINIMUM_TORCH[1]}"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"`{MESSAGE}`" in readme and "torch 2.8 or newer" in readme  # the README quotes the refusal


def test_command_on_old_torch_prints_one_line_and_exits_2(old_torch: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text("print('ran')\n")
    result = subprocess.run(
        [sys.executable, "-m", "gradviz", "check", str(script)], env=old_torch, capture_output=True, text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stdout == ""  # the program did not run
    assert result.stderr == MESSAGE + "\n"


def test_console_script_on_old_torch_prints_one_line(old_torch: dict[str, str], tmp_path: Path) -> None:
    command = Path(sys.executable).with_name("gradviz")
    if not command.exists():
        pytest.skip("the gradviz console script is not installed next to this Python")
    result = subprocess.run(
        [str(command), "render", str(tmp_path / "prog.py")], env=old_torch, capture_output=True, text=True, timeout=120
    )
    assert (result.returncode, result.stdout, result.stderr) == (2, "", MESSAGE + "\n")


def test_import_on_old_torch_raises_an_import_error(old_torch: dict[str, str]) -> None:
    probe = (
        "try:\n    import gradviz\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc.__class__.__mro__[1].__name__, exc, sep='|')\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], env=old_torch, capture_output=True, text=True, timeout=120)
    assert result.stdout == f"UnsupportedTorch|ImportError|{MESSAGE}\n"
    assert result.stderr == ""
