"""The third-party JavaScript the page inlines is the one package-lock.json pins, with its licences, shipped as
package data (so installing gradviz and opening a page never needs node or the network)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import gradviz.explorer

if sys.version_info >= (3, 11):
    import tomllib
else:  # (Python 3.10: the package tomllib was made from, a test dependency there)
    import tomli as tomllib

PACKAGE = Path(gradviz.explorer.__file__).resolve().parent
ROOT = PACKAGE.parent.parent


def test_the_committed_bundle_is_the_locked_version() -> None:
    lock = json.loads((PACKAGE / "package-lock.json").read_text())["packages"]
    wanted = json.loads((PACKAGE / "package.json").read_text())["dependencies"]
    assert lock[""]["dependencies"] == wanted
    versions = json.loads((PACKAGE / "assets" / "vendor" / "versions.json").read_text())
    for name, built in versions.items():
        locked = lock[f"node_modules/{name}"]
        assert built == {"version": locked["version"], "integrity": locked["integrity"], "license": locked["license"]}
    bundle = (PACKAGE / "assets" / "vendor" / "dagre.min.js").read_text()
    # the bundle states its own version: the one the lock file pins
    assert re.findall(r'"(\d+\.\d+\.\d+)"', bundle) == [lock["node_modules/@dagrejs/dagre"]["version"]]
    assert "sourceMappingURL" not in bundle and "http" not in bundle.replace("http://www.w3.org", "")


def test_licences_ship_beside_the_bundle() -> None:
    for name in ("LICENSE-dagre.txt", "LICENSE-graphlib.txt"):
        text = (PACKAGE / "assets" / "vendor" / name).read_text()
        assert "Permission is hereby granted, free of charge" in text  # MIT


def test_assets_are_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["gradviz"]
    shipped = {str(p.relative_to(ROOT / "gradviz")) for p in (PACKAGE / "assets").rglob("*") if p.is_file()}
    matched = {s for s in shipped if any(Path(s).match(p) for p in patterns)}
    assert matched == shipped and "explorer/assets/vendor/dagre.min.js" in shipped
