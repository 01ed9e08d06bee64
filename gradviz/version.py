"""gradviz's version, in a module of its own so that every floor may read it without importing the package's facade
(pyproject.toml's `version` says the same; tests/packaging checks that the installed wheel agrees)."""

__version__ = "0.1.0"
