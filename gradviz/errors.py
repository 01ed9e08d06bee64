"""Errors that a user's configuration raises: ConfigError (for config.py and suppress.py, which both check it)."""

from __future__ import annotations

__all__ = ["ConfigError"]


class ConfigError(ValueError):
    """A `[tool.gradviz]` table, `--allow` value or `# gradviz: ignore[...]` comment that means nothing (its file
    and key, or line, named)."""
