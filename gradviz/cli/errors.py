"""Errors the user can fix, each reported as one line: ConfigError (for config.py and suppress.py, which both check
it), UsageError (the command line's)."""

from __future__ import annotations

__all__ = ["ConfigError", "UsageError"]


class ConfigError(ValueError):
    """A `[tool.gradviz]` table, `--allow` value or `# gradviz: ignore[...]` comment that means nothing (its file
    and key, or line, named)."""


class UsageError(Exception):
    """Something the user can fix (missing script, bad output path...): one line on stderr, exit 2."""
