"""gradviz as a user gets it: the sdist and wheel `python -m build` makes, installed into a fresh virtual environment.

No network: the build runs without isolation (setuptools is a test dependency), and the fresh environment sees
the test environment's third-party packages (torch, graphviz, rich, pytest, IPython...) through a `.pth` file
pointing at a folder of links to them, gradviz itself left out. Installing torch's wheel into every fresh
environment instead costs about 20 s more on a 2-core machine (measured), and its dependencies need an index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "torch-gradviz"

# what of the test environment a fresh one must not see: gradviz itself (installed editable from the tree), and
# pip, so the fresh environment's own pip does the installing
_OURS = ("gradviz", "torch_gradviz", "__editable__", "_gradviz", "pip", "pip-")


def source_copy(folder: Path) -> Path:
    """The project's files as a release starts from them: what git tracks (and new files not ignored), else the tree
    less build products. Building never writes into the working tree."""
    folder.mkdir(parents=True, exist_ok=True)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=False,
    )
    if listed.returncode == 0 and listed.stdout:
        for name in filter(None, listed.stdout.decode("utf-8", "surrogateescape").split("\0")):
            source = ROOT / name
            if source.is_file():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, folder / name)
        return folder
    ignore = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", "_build")
    shutil.copytree(ROOT, folder, ignore=ignore, dirs_exist_ok=True)
    return folder


def build(source: Path, out: Path) -> tuple[Path, Path]:
    """(sdist, wheel) from `python -m build` (the wheel is built from the sdist, as PyPI users would get it)."""
    result = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True, text=True, timeout=600, env=clean_env(),
    )
    if result.returncode != 0:
        raise AssertionError(f"python -m build failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel


def fresh_venv(folder: Path) -> Path:
    """A new virtual environment (with pip, without system site-packages) that sees the test environment's
    third-party packages but no gradviz; returns its python."""
    venv.EnvBuilder(with_pip=True, system_site_packages=False, symlinks=os.name != "nt").create(folder)
    python = folder / ("Scripts" if os.name == "nt" else "bin") / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    # the environment's own setuptools is older than torch asks for: the test environment's stands in for it
    for entry in Path(site).iterdir():
        if entry.name.startswith(("setuptools", "pkg_resources", "_distutils_hack", "distutils-precedence")):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    shared = folder / "shared-site"
    shared.mkdir()
    for library in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for entry in Path(library).iterdir():
            if entry.name.startswith(_OURS) or entry.suffix == ".pth" or (shared / entry.name).exists():
                continue
            (shared / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    Path(site, "_test_environment.pth").write_text(str(shared) + "\n", encoding="utf-8")
    if os.name != "nt":  # the console script pip writes when it installs pytest (here pip finds it installed)
        script = python.parent / "pytest"
        script.write_text(f'#!/bin/sh\nexec "{python}" -m pytest "$@"\n', encoding="utf-8")
        script.chmod(0o755)
    return python


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH pointing at the tree, no pytest or colour settings."""
    env = {
        k: v for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "GRADVIZ_DEBUG") and not k.startswith(("PYTEST_", "FORCE_COLOR", "NO_COLOR"))
    }
    env.update(extra)
    return env
