"""The timeline view: events in program order with versions before -> after, finding rows highlighted."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable

import pytest

import gradviz
from gradviz.analysis.findings import Finding, FindingKind
from gradviz.model import (
    Event,
    EventKind,
    Location,
    StorageRecord,
    TensorRecord,
    Trace,
    VersionChange,
    VersionCounterRecord,
)
from gradviz.render import render
from gradviz.render.timeline import SEVERITY_FILL, timeline_digraph, timeline_rows

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def line_of(trace: Trace, needle: str) -> int:
    assert trace.script is not None
    hits = [i for i, text in enumerate(trace.sources[trace.script].splitlines(), 1) if text.startswith(needle)]
    assert len(hits) == 1, hits
    return hits[0]


def label_of(source: str, name: str) -> str:
    """The label=<...> of node `name` (its tooltip, a quoted DOT string, left out)."""
    lines = [line for line in source.splitlines() if re.match(rf"\s*{name} \[", line)]
    assert len(lines) == 1
    return lines[0].split(" tooltip=")[0]


def test_data_example_rows(data_trace: Trace) -> None:
    rows = timeline_rows(data_trace, gradviz.diagnose(data_trace))
    assert [r["kind"] for r in rows] == ["data_get", "inplace_write", "backward"]
    alias, write, backward = rows
    assert alias["line"] == line_of(data_trace, "c = out.data") and alias["alias"] == "c = out.data"
    assert alias["severity"] is None

    assert write["line"] == line_of(data_trace, "c.zero_()") == 24
    assert write["code"].startswith("c.zero_()")
    assert write["alias"] == "via c = out.data"
    assert [(v["label"], v["before"], v["after"], v["noticed"]) for v in write["versions"]] == [
        ("c", 0, 1, True), ("out", 0, 0, False)]
    assert write["versions_text"] == "c: v0 → v1, out: v0 → v0 (not noticed)"
    assert write["findings"] == ["silently_corrupted_saved_tensor"] and write["severity"] == "error"

    assert backward["alias"] == "out.sum().backward()"
    assert backward["outcome"] == "ok" and backward["error"] is None
    assert backward["severity"] is None  # it did not cause the finding ...
    assert backward["affected_by"] == ["silently_corrupted_saved_tensor"]  # ... it suffered from it


def test_detach_example_rows(detach_trace: Trace) -> None:
    rows = timeline_rows(detach_trace, gradviz.diagnose(detach_trace))
    write = next(r for r in rows if r["kind"] == "inplace_write")
    assert write["versions_text"] == "c: v0 → v1, out: v0 → v1"
    assert write["findings"] == ["poisoned_saved_tensor"]
    backward = next(r for r in rows if r["kind"] == "backward")
    assert backward["outcome"] == "error"
    assert backward["error"].startswith("RuntimeError: one of the variables needed for gradient computation")
    assert re.search(r"is at version 1; expected version 0", backward["error"])
    assert "\n" not in backward["error"]
    assert rows[-1]["kind"] == "exception" and rows[-1]["outcome"] == "error"


def test_finding_rows_are_highlighted_in_the_diagram(data_trace: Trace) -> None:
    source = timeline_digraph(data_trace, gradviz.diagnose(data_trace)).source
    row = label_of(source, "row_1")
    assert f'BGCOLOR="{SEVERITY_FILL["error"]}"' in row
    assert ">24<" in row and "c.zero_()" in row and "tanh" not in row  # comment stripped
    assert "c: v0 → v1<BR/>out: v0 → v0 (not noticed)" in row
    assert "silently corrupted saved tensor" in row
    other = next(line for line in source.splitlines() if re.match(r"\s*row_0 \[", line))
    assert SEVERITY_FILL["error"] not in other
    assert ("header", "row_0") in set(re.findall(r"^\s*(\w+) -> (\w+)", source, re.M))
    assert ("row_1", "row_2") in set(re.findall(r"^\s*(\w+) -> (\w+)", source, re.M))


def test_severity_colours_follow_the_finding(data_trace: Trace) -> None:
    write = next(e for e in data_trace.events if e.kind is EventKind.INPLACE_WRITE)
    warning = Finding(FindingKind.UPDATE_WITHOUT_GRADIENT, write.location.file, write.location.line, "m", "f",
                      events=[write.seq])
    source = timeline_digraph(data_trace, [warning]).source
    row = next(line for line in source.splitlines() if re.match(r"\s*row_1 \[", line))
    assert f'BGCOLOR="{SEVERITY_FILL["warning"]}"' in row


def test_loops_fold_into_one_row_per_body_line(trace_of: Callable[..., Trace]) -> None:
    trace = trace_of(
        """
        import torch
        x = torch.zeros(3)
        for i in range(50):
            y = x.detach()
            x.add_(1)
        """
    )
    rows = timeline_rows(trace, [])
    assert [(r["kind"], r["line"], r["count"]) for r in rows] == [("detach", 4, 50), ("inplace_write", 5, 50)]
    assert len(rows[1]["seqs"]) == 50
    assert rows[1]["versions_text"].startswith("x: v0 → v1 … v49 → v50")
    source = timeline_digraph(trace, []).source
    assert "2 × 50" in source


def test_a_step_that_raised_shows_as_an_error_row(trace_of: Callable[..., Trace]) -> None:
    trace = trace_of(
        """
        import torch
        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        try:
            optimizer.step(lambda: 1 / 0)
        except ZeroDivisionError:
            pass
        model(torch.ones(1, 2)).sum().backward()
        optimizer.step()
        """
    )
    steps = [r for r in timeline_rows(trace, []) if r["kind"] == "optimizer_step"]
    assert [(r["line"], r["outcome"], r["error"]) for r in steps] == [
        (5, "error", "raised inside step()"),
        (9, None, None),
    ]
    assert "raised inside step()" in timeline_digraph(trace, []).source


def long_trace(n: int) -> Trace:
    """n writes to one tensor, each on its own line (nothing to fold)."""
    trace = Trace(script="long.py")
    trace.storages["s0"] = StorageRecord("s0", "cpu", 4, 1, "float32")
    trace.version_counters["v0"] = VersionCounterRecord("v0", ["t0"])
    trace.tensors["t0"] = TensorRecord("t0", [1], "float32", "cpu", False, True, None, "s0", (0, 4), "v0", 0, "op", 0,
                                       names=["w"])
    for i in range(n):
        trace.events.append(Event(i + 1, EventKind.INPLACE_WRITE, Location("long.py", i + 1, f"w.add_({i})"),
                                  tensor="t0", versions=[VersionChange("t0", i, i + 1)]))
    return trace


def test_long_timelines_are_bounded_keeping_finding_rows() -> None:
    trace = long_trace(1000)
    finding = Finding(FindingKind.POISONED_SAVED_TENSOR, "long.py", 700, "m", "f", tensors=["t0"], events=[700])
    rows = timeline_rows(trace, [finding], max_rows=50)
    assert len(rows) <= 53
    assert any(r["line"] == 700 and r["severity"] == "error" for r in rows)
    omitted = [r for r in rows if r["kind"] == "omitted"]
    assert sum(r["count"] for r in omitted) + sum(1 for r in rows if r["kind"] != "omitted") == 1000
    assert omitted[0]["code"].endswith("more events not shown")
    assert [r["index"] for r in rows] == list(range(len(rows)))


def test_hostile_code_is_escaped() -> None:
    trace = long_trace(1)
    trace.tensors["t0"].names = ['<w>&"{x}|']
    trace.events[0].location = Location("long.py", 1, 'q["<i>"].add_(1)\\n')
    source = timeline_digraph(trace, []).source
    label = label_of(source, "row_0")
    assert "&lt;w&gt;&amp;&quot;{x}|: v0 → v1" in label
    # backslashes doubled even in HTML-like labels: Graphviz reads `\n`, `\N`, `\G`... there too
    assert "q[&quot;&lt;i&gt;&quot;].add_(1)\\\\n" in label
    assert "<i>" not in label and "<w>" not in label
    # the tooltip is a quoted DOT string: quotes escaped, backslashes quadrupled (Graphviz expands tooltips twice)
    assert 'tooltip="long.py:1 | q[\\"<i>\\"].add_(1)\\\\\\\\n' in source


@pytest.mark.dot
@needs_dot
def test_timeline_lays_out(detach_trace: Trace) -> None:
    svg = render(detach_trace, "timeline").svg()
    assert "<svg" in svg and "row_1" in svg and "c: v0 → v1" in svg


@pytest.mark.dot
@needs_dot
def test_hostile_code_lays_out() -> None:
    trace = long_trace(1)
    trace.tensors["t0"].names = ['<w>&"{x}|']
    trace.events[0].location = Location("long.py", 1, 'q["<i>"].add_(1)\\n')
    svg = timeline_digraph(trace, []).pipe(format="svg").decode("utf-8")
    assert "q[&quot;&lt;i&gt;&quot;].add_(1)\\n" in svg or 'q["&lt;i&gt;"].add_(1)\\n' in svg
    assert "<i>" not in svg and "<w>" not in svg


# ---------------------------------------------------------------------- a table that reads like one
def test_model_construction_writes_are_one_row(gallery) -> None:  # type: ignore[no-untyped-def]
    trace = gradviz.trace_script(gallery / "plot_01_testdetach.py")
    rows = timeline_rows(trace, gradviz.diagnose(trace))
    setup = [r for r in rows if r["alias"] == "model set up"]
    assert len(setup) == 1 and rows[0] is setup[0]
    assert setup[0]["versions_text"] == "2 parameters initialised in place (2 writes at lines 24-25)"
    assert not [r for r in rows if r["kind"] == "inplace_write" and r is not setup[0]]  # nn.Linear's writes folded


def test_the_error_that_ended_the_program_is_said_once(detach_trace: Trace) -> None:
    rows = timeline_rows(detach_trace, gradviz.diagnose(detach_trace))
    errors = [r["error"] for r in rows if r["error"] and "modified by an inplace operation" in r["error"]]
    assert len(errors) == 1
    assert rows[-1]["kind"] == "exception" and rows[-1]["error"] == "the error of the backward above ended the program"


def test_every_row_has_the_header_s_column_widths_and_text_that_fits(detach_trace: Trace) -> None:
    from gradviz.render.timeline import _COLUMNS

    source = timeline_digraph(detach_trace, gradviz.diagnose(detach_trace)).source
    tables = re.findall(r"^\s*(header|row_\d+) \[label=<(<TABLE.*?</TABLE>)>", source, re.M)
    assert len(tables) > 3
    for name, table in tables:
        assert 'BORDER="2"' in table.split(">", 1)[0], name  # one border width: no row shifted by it
        widths = [int(w) for w in re.findall(r'<TD WIDTH="(\d+)"', table)]
        assert widths == [w for _, w, *_ in _COLUMNS], name
        if name == "header":
            continue
        for cell, (_, width, chars, _lines) in zip(re.findall(r"<TD [^>]*>(.*?)</TD>", table), _COLUMNS):
            size = 9 if 'POINT-SIZE="9"' in cell else 10
            for line in re.sub(r"<FONT[^>]*>|</FONT>", "", cell).split("<BR/>"):
                text = re.sub(r"<[^>]+>", "", line).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
                assert len(text) <= chars and len(text) * 0.602 * size + 8 <= width, (name, text)
