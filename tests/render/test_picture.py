"""The picture model: each fact every view reads is derived once per (trace, findings), whatever the views drawn."""

from __future__ import annotations

import collections
import sys
from pathlib import Path
from typing import Any

import pytest

import gradviz
from gradviz.analysis import diagnosis, names
from gradviz.picture.picture import Picture

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def gan_trace(gallery: Path) -> gradviz.Trace:
    return gradviz.trace_script(gallery / "plot_16_wgan_clip_between.py")


def _count(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    calls: collections.Counter[str] = collections.Counter()
    picture = sys.modules["gradviz.picture.picture"]
    analysis = sys.modules["gradviz.analysis"]
    for module, name in ((picture, "split_steps"), (picture, "roll_steps"), (picture, "module_hierarchy"),
                         (picture, "annotate"), (picture, "lifetimes"), (analysis, "lifetimes")):
        real = getattr(module, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    real_init = names.Namer.__init__

    def init(self: names.Namer, trace: gradviz.Trace) -> None:
        calls["Namer"] += 1
        real_init(self, trace)

    monkeypatch.setattr(names.Namer, "__init__", init)
    return calls


def test_every_view_reads_one_picture(gan_trace: gradviz.Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count(monkeypatch)
    diagnosed = diagnosis(gan_trace)
    findings = diagnosed.findings
    picture = Picture(gan_trace, findings, life=diagnosed.lifetimes, namer=diagnosed.namer)
    for view in ("graph", "memory", "timeline", "report", "graph-memory"):
        diagram = gradviz.render(gan_trace, view, findings=findings, picture=picture)
        assert diagram.picture is picture
    # three steps of one shape: split once, rolled once, one module tree; one lifetimes and one Namer, diagnose's
    assert len(picture.steps) == 3
    assert calls == {"split_steps": 1, "roll_steps": 1, "module_hierarchy": 1, "annotate": 1, "lifetimes": 1, "Namer": 1}
    assert picture.namer is diagnosed.namer and picture.lifetimes is diagnosed.lifetimes


def test_the_diagnosis_holds_lifetimes_and_names_and_the_findings_list_nothing_else(gan_trace: gradviz.Trace) -> None:
    """Nothing is hung on the findings list: `diagnose()` is a plain list, `diagnosis()` names what it computed."""
    diagnosed = diagnosis(gan_trace)
    assert diagnosed.findings == gradviz.diagnose(gan_trace) and diagnosed.findings
    assert diagnosed.namer.trace is gan_trace and diagnosed.lifetimes.intervals
    assert not hasattr(diagnosed.findings, "lifetimes") and not hasattr(diagnosed.findings, "namer")


def test_render_without_findings_diagnoses_once_and_reuses_its_lifetimes(
    gan_trace: gradviz.Trace, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count(monkeypatch)
    diagram = gradviz.render(gan_trace, "report")
    assert "<!DOCTYPE html>" in diagram.html()
    assert calls["lifetimes"] == 1  # computed by diagnose(), read by the page's chart and lifetimes
    assert diagram.picture is not None and diagram.picture.findings == diagram.findings


def test_a_picture_of_other_findings_is_not_reused(gan_trace: gradviz.Trace) -> None:
    stale = Picture(gan_trace, [])
    diagram = gradviz.render(gan_trace, "graph", findings=gradviz.diagnose(gan_trace), picture=stale, max_nodes=200)
    assert diagram.picture is not stale and diagram.picture.findings  # drawn from the findings given
