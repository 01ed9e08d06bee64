"""`[tool.gradviz]` in pyproject.toml: a project's defaults for `gradviz check`/`render` and the pytest plugin, found
from the script's folder upwards (the first pyproject.toml with that table)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..analysis.findings import Finding, FindingKind
from ..text import clean
from .errors import ConfigError

if TYPE_CHECKING:
    from .suppress import Suppressed

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["Config", "ConfigError", "accepted", "add_config_options", "find_config", "load_checked", "load_config"]

#: The keys of `[tool.gradviz]` and what each holds (the README's table says the same).
KEYS = {
    "steps": "the step window when --steps is not given: a whole number, or \"all\"",
    "strict": "true: warnings fail `gradviz check` and `pytest --gradviz` too",
    "allow": "finding kinds accepted everywhere, e.g. [\"cut_edge\"]",
    "output-dir": "where `gradviz render` writes when no -o is given (relative to pyproject.toml's folder)",
}


@dataclass(frozen=True)
class Config:
    """The settings of one `[tool.gradviz]` table (defaults: no table)."""

    path: Path | None = None  # the pyproject.toml it came from
    steps: int | str | None = None  # None: the command's own default; "all": the whole run
    strict: bool = False
    allow: frozenset[str] = frozenset()
    output_dir: Path | None = None

    @property
    def source(self) -> str:
        """How messages name it: `[tool.gradviz] in /repo/pyproject.toml`."""
        return f"[tool.gradviz] in {clean(str(self.path))}" if self.path else "[tool.gradviz]"


def find_config(start: Path) -> Path | None:
    """The first pyproject.toml with a `[tool.gradviz]` table in `start` (a folder, or a file's folder) or above."""
    start = Path(os.path.normpath(start.absolute()))
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        path = candidate / "pyproject.toml"
        if path.is_file() and "gradviz" in _read(path).get("tool", {}):
            return path
    return None


def load_config(start: Path) -> Config:
    """The configuration that applies to a script (or test file, or folder) at `start`; ConfigError when the table
    is wrong, an unreadable pyproject.toml included."""
    path = find_config(start)
    if path is None:
        return Config()
    table = _read(path)["tool"]["gradviz"]
    where = f"[tool.gradviz] in {clean(str(path))}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table, got {table!r}")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(KEYS)}")
    return Config(
        path=path,
        steps=_steps(table.get("steps"), where),
        strict=_bool(table.get("strict", False), where, "strict"),
        allow=allowed_kinds(table.get("allow", []), where=f"{where}: allow"),
        output_dir=_folder(table.get("output-dir"), path.parent, where),
    )


def allowed_kinds(kinds: Any, *, where: str) -> frozenset[str]:
    """Finding kinds from a list (or one string); ConfigError naming the valid kinds for anything else."""
    if isinstance(kinds, str):
        kinds = [kinds]
    if not isinstance(kinds, (list, tuple, set, frozenset)):
        raise ConfigError(f"{where}: expected a list of finding kinds, got {kinds!r}")
    valid = [kind.value for kind in FindingKind]
    for kind in kinds:
        if kind not in valid:
            raise ConfigError(f"{where}: unknown finding kind {kind!r}; the kinds are {', '.join(valid)}")
    return frozenset(kinds)


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            table: dict[str, Any] = tomllib.load(file)
            return table
    except OSError as exc:
        raise ConfigError(f"cannot read {clean(str(path))}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{clean(str(path))} is not valid TOML: {exc}") from None


def _steps(value: Any, where: str) -> int | str | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == "all":
        return "all"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: steps must be a whole number of at least 1, or \"all\"; got {value!r}")
    return value


def _bool(value: Any, where: str, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {key} must be true or false, got {value!r}")
    return value


def _folder(value: Any, base: Path, where: str) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: output-dir must be a folder name, got {value!r}")
    return (base / value).absolute()


# ---------------------------------------------------------------------------------------------- the command line
def add_config_options(parser: Any) -> None:
    """`--allow KIND` (repeatable) and `--show-suppressed`, for `gradviz check` and `gradviz render`."""
    parser.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="KIND",
        help="accept findings of this kind (repeatable; added to [tool.gradviz] allow): counted as suppressed, "
        "never failing. A line's `# gradviz: ignore[KIND]` comment accepts a finding there (or on the next line)",
    )
    parser.add_argument(
        "--show-suppressed", action="store_true", help="list the suppressed findings and what accepted each"
    )


def load_checked(start: Path, *, allow: Iterable[str], script: Path | None = None) -> Config:
    """The configuration for the program at `start`, with --allow's kinds checked and the `# gradviz: ignore[...]`
    comments of `script` (before it runs: a typo must not cost a training run). ConfigError on a bad table, kind or
    comment. (The front end merges its strict and steps into its options.)"""
    from .suppress import check_comments

    config = load_config(start)
    allowed_kinds(list(allow), where="--allow")
    if script is not None:
        check_comments(script)
    return config


def accepted(
    findings: list[Finding], *, allow: Iterable[str], config: Config, allowed_by: str = "--allow"
) -> tuple[list[Finding], list[Suppressed]]:
    """Findings split into those that stand and those accepted (inline comments, --allow or the marker's allow=
    as `allowed_by` says, the table's allow)."""
    from .suppress import split

    kept, by_option = split(findings, allow=list(allow), allowed_by=allowed_by)
    kept, by_table = split(kept, allow=config.allow, allowed_by=f"{config.source}: allow")
    # a comment found in the second pass is still a comment: the order of the passes only picks the reason
    return kept, sorted([*by_option, *by_table], key=lambda s: s.finding.sort_key())
