"""The explorer's document is described once, in gradviz/explorer/document.schema.json (shipped beside document.py):
the document of every gallery page, read back from the page itself, is valid against it; and the schema rejects
what the page could not draw."""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import gradviz
from gradviz.explorer import explorer_html, read_document
from gradviz.model import Trace

GALLERY = Path(__file__).resolve().parents[2] / "gallery"


def _validator() -> Any:
    try:
        import jsonschema
    except ImportError:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            raise
        pytest.skip("jsonschema is not installed (pip install -e '.[test]')")
    schema = json.loads(resources.files("gradviz.explorer").joinpath("document.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(document: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator().iter_errors(document)]


@pytest.mark.parametrize("script", sorted(p.name for p in GALLERY.glob("plot_*.py")))
def test_every_gallery_page_holds_a_valid_document(script: str) -> None:
    trace = gradviz.trace_script(GALLERY / script)
    document = read_document(explorer_html(trace, gradviz.diagnose(trace)))
    assert document["nodes"] or document["events"]  # something to draw
    assert _errors(document) == []


def test_the_test_pages_hold_valid_documents(data_trace: Trace, training_trace: Trace) -> None:
    for trace in (data_trace, training_trace, Trace()):
        assert _errors(read_document(explorer_html(trace, gradviz.diagnose(trace)))) == []


def test_the_schema_rejects_what_the_page_cannot_draw(data_trace: Trace) -> None:
    document = read_document(explorer_html(data_trace, gradviz.diagnose(data_trace)))
    broken = json.loads(json.dumps(document))
    broken["nodes"][0]["kind"] = "green"  # a kind the page has no colour for
    del broken["findings"][0]["nodes"]
    broken["version"] = 2
    broken["edges"].append([0])
    errors = _errors(broken)
    assert any(e.startswith("nodes/0/kind:") for e in errors)
    assert any(e.startswith("findings/0:") and "'nodes' is a required property" in e for e in errors)
    assert any(e.startswith("version:") for e in errors)
    assert any(e.startswith(f"edges/{len(document['edges'])}:") for e in errors)


def test_the_schema_names_the_marks_of_the_picture_s_one_vocabulary() -> None:
    """The node kinds and saved-tensor marks the schema allows are the palette's (picture/palette.py's `Mark`): a
    mark the annotations can give (`corrupted_unread`, when --verify measured identical gradients) is one the
    schema takes, and the schema names none the picture does not have."""
    from gradviz.picture.palette import MARK_OF_KIND, NODE_MARKS, SAVED_MARKS, Mark

    schema = json.loads(resources.files("gradviz.explorer").joinpath("document.schema.json").read_text(encoding="utf-8"))
    defs = schema["$defs"]
    assert set(defs["mark"]["enum"]) == {m.value for m in SAVED_MARKS}
    assert set(defs["node"]["properties"]["kind"]["enum"]) == {"op"} | {m.value for m in NODE_MARKS}
    assert Mark.CORRUPTED_UNREAD.value in defs["mark"]["enum"]
    assert {MARK_OF_KIND[k] for k in MARK_OF_KIND} <= set(Mark)
