"""Which torch releases gradviz supports, and the one-line refusal outside them (no torch import: `import gradviz`
stays light).

The floor is measured (README, "Supported versions"): before torch 2.8 the tracer cannot tell whether a
saved_tensors_hooks pack hook is active, so reading a saved tensor could run the program's unpack hook (a
checkpoint would recompute); from 2.8 every finding kind is found. pyproject.toml's `torch>=` says the same.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys

MINIMUM_TORCH = (2, 8)
REQUIREMENT = f"torch>={MINIMUM_TORCH[0]}.{MINIMUM_TORCH[1]}"
_RELEASE = re.compile(r"(\d+)\.(\d+)")
_VERSION_LINE = re.compile(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", re.MULTILINE)


class UnsupportedTorch(ImportError):
    """The installed torch is older than gradviz can read correctly."""


def refusal(version: str | None) -> str | None:
    """The one-line message for torch `version` ("2.4.1+cu121"), or None when gradviz supports it (or it is not
    a release number gradviz can read, such as a missing torch: importing it will say so)."""
    match = _RELEASE.match(version or "")
    if match is None or (int(match.group(1)), int(match.group(2))) >= MINIMUM_TORCH:
        return None
    return f"gradviz needs {REQUIREMENT}; this is torch {version} (upgrade: pip install '{REQUIREMENT}')"


def installed_torch() -> str | None:
    """The torch version this process will use: the imported module's, else the installed distribution's."""
    module = sys.modules.get("torch")
    version = getattr(module, "__version__", None)
    if isinstance(version, str):
        return version
    # torch/version.py read as text: importing torch takes seconds, and the package metadata is not always found
    # under the name "torch" (a local build's dist-info folder is named torch-2.13.0+cpu)
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        try:
            with open(os.path.join(folder, "version.py"), encoding="utf-8") as file:
                found = _VERSION_LINE.search(file.read())
        except OSError:
            continue
        if found:
            return found.group(1)
    return None


def check(version: str | None) -> None:
    """Raise UnsupportedTorch (an ImportError) with the one-line message when `version` is too old."""
    message = refusal(version)
    if message is not None:
        raise UnsupportedTorch(message)


def check_installed() -> None:
    """At `import gradviz`: refuse an unsupported torch. Run as the `gradviz` command (or `python -m gradviz`),
    the message is printed alone and the process exits with status 2, without a traceback."""
    message = refusal(installed_torch())
    if message is None:
        return
    if _as_command():
        print(message, file=sys.stderr)
        raise SystemExit(2)
    raise UnsupportedTorch(message)


def _as_command() -> bool:
    """Whether this process is the gradviz command line (the console script, or `python -m gradviz`)."""
    program = sys.argv[0] if sys.argv else ""
    name = os.path.basename(program)
    if name in ("gradviz", "gradviz.exe", "gradviz-script.py") or program == "-m":
        return True
    return program.endswith(os.path.join("gradviz", "__main__.py"))
