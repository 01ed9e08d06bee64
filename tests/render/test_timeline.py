"""The timeline view: events in program order with versions before -> after, finding rows highlighted."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from pathlib import Path

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
from gradviz.picture.timeline_rows import timeline_rows
from gradviz.render import render
from gradviz.render.timeline import SEVERITY_COLOURS, SEVERITY_FILL, timeline_digraph

ROOT = Path(__file__).resolve().parents[2]


def line_of(trace: Trace, needle: str) -> int:
    assert trace.script is not None
    hits = [i for i, text in enumerate(trace.sources[trace.script].splitlines(), 1) if text.startswith(needle)]
    assert len(hits) == 1, hits
    return hits[0]


def table_rows(source: str) -> list[str]:
    """The `<TR>` rows of the timeline's one table, header first."""
    labels = re.findall(r"^\s*timeline \[label=<(<TABLE.*</TABLE>)>\]$", source, re.M)
    assert len(labels) == 1, source[:500]  # one node: the whole timeline is one table
    return re.findall(r"<TR>(.*?)</TR>", labels[0])


def row_of(source: str, index: int) -> str:
    """Row `index` (0-based, as `timeline_rows` numbers them) of the table."""
    return table_rows(source)[index + 1]


def test_data_example_rows(data_trace: Trace) -> None:
    rows = timeline_rows(data_trace, gradviz.diagnose(data_trace))
    assert [r.kind for r in rows] == ["data_get", "inplace_write", "backward"]
    alias, write, backward = rows
    assert alias.line == line_of(data_trace, "c = out.data") and alias.alias == "c = out.data"
    assert alias.severity is None

    assert write.line == line_of(data_trace, "c.zero_()") == 24
    assert write.code.startswith("c.zero_()")
    assert write.alias == "via c = out.data"
    assert [(v.label, v.before, v.after, v.noticed) for v in write.versions] == [
        ("c", 0, 1, True), ("out", 0, 0, False)]
    assert write.versions_text == "c: v0 → v1, out: v0 → v0 (not noticed)"
    assert write.findings == ["silently_corrupted_saved_tensor"] and write.severity == "error"

    assert backward.alias == "out.sum().backward()"
    assert backward.outcome == "ok" and backward.error is None
    assert backward.severity is None  # it did not cause the finding ...
    assert backward.affected_by == ["silently_corrupted_saved_tensor"]  # ... it suffered from it


def test_detach_example_rows(detach_trace: Trace) -> None:
    rows = timeline_rows(detach_trace, gradviz.diagnose(detach_trace))
    write = next(r for r in rows if r.kind == "inplace_write")
    assert write.versions_text == "c: v0 → v1, out: v0 → v1"
    assert write.findings == ["poisoned_saved_tensor"]
    backward = next(r for r in rows if r.kind == "backward")
    assert backward.outcome == "error"
    assert backward.error.startswith("RuntimeError: one of the variables needed for gradient computation")
    assert re.search(r"is at version 1; expected version 0", backward.error)
    assert "\n" not in backward.error
    assert rows[-1].kind == "exception" and rows[-1].outcome == "error"


def test_finding_rows_are_highlighted_in_the_diagram(data_trace: Trace) -> None:
    source = timeline_digraph(data_trace, gradviz.diagnose(data_trace)).source
    row = row_of(source, 1)
    assert f'BGCOLOR="{SEVERITY_FILL["error"]}"' in row and f'COLOR="{SEVERITY_COLOURS["error"]}"' in row
    assert ">24<" in row and "c.zero_()" in row and "tanh" not in re.sub(r'TOOLTIP="[^"]*"', "", row)  # comment cut
    assert "c: v0 → v1<BR/>out: v0 → v0 (not noticed)" in row
    assert "! silently corrupted saved tensor" in row
    others = [row_of(source, 0), row_of(source, 2)]
    assert all(SEVERITY_FILL["error"] not in other for other in others)
    assert "← because of: silently corrupted saved tensor" in others[1]  # the backward that used the bad values
    assert [len(re.findall(r"<TD ", r)) for r in table_rows(source)] == [7] * 4  # header and three rows, 7 columns


def test_severity_colours_follow_the_finding(data_trace: Trace) -> None:
    write = next(e for e in data_trace.events if e.kind is EventKind.INPLACE_WRITE)
    warning = Finding(FindingKind.UPDATE_WITHOUT_GRADIENT, write.location.file, write.location.line, "m", "f",
                      events=[write.seq])
    row = row_of(timeline_digraph(data_trace, [warning]).source, 1)
    assert f'BGCOLOR="{SEVERITY_FILL["warning"]}"' in row and f'COLOR="{SEVERITY_COLOURS["warning"]}"' in row
    # the row is framed: top and bottom on every cell, the left side on the first, the right side on the last
    sides = re.findall(r'SIDES="(\w+)"', row)
    assert sides == ["TBL"] + ["TB"] * 5 + ["TBR"]


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
    assert [(r.kind, r.line, r.count) for r in rows] == [("detach", 4, 50), ("inplace_write", 5, 50)]
    assert len(rows[1].seqs) == 50
    assert rows[1].versions_text.startswith("x: v0 → v1 … v49 → v50")
    source = timeline_digraph(trace, []).source
    assert ">2 × 50<" in row_of(source, 1)
    assert "x: v0 → v1 … v49 → v50" in row_of(source, 1)


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
    steps = [r for r in timeline_rows(trace, []) if r.kind == "optimizer_step"]
    assert [(r.line, r.outcome, r.error) for r in steps] == [
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
    assert any(r.line == 700 and r.severity == "error" for r in rows)
    omitted = [r for r in rows if r.kind == "omitted"]
    assert sum(r.count for r in omitted) + sum(1 for r in rows if r.kind != "omitted") == 1000
    assert omitted[0].code.endswith("more events not shown")
    assert [r.index for r in rows] == list(range(len(rows)))


def test_hostile_code_is_escaped() -> None:
    trace = long_trace(1)
    trace.tensors["t0"].names = ['<w>&"{x}|']
    trace.events[0].location = Location("long.py", 1, 'q["<i>"].add_(1)\\n')
    row = row_of(timeline_digraph(trace, []).source, 0)
    assert "&lt;w&gt;&amp;&quot;{x}|: v0 → v1" in row
    # backslashes doubled even in HTML-like labels: Graphviz reads `\n`, `\N`, `\G`... there too
    assert "q[&quot;&lt;i&gt;&quot;].add_(1)\\\\n" in row
    assert "<i>" not in row and "<w>" not in row
    # the source cell's tooltip (an attribute of the HTML-like label, read once): entities, backslashes doubled
    assert 'TOOLTIP="long.py:1: q[&quot;&lt;i&gt;&quot;].add_(1)\\\\n"' in row


def test_a_tensor_named_like_a_tag_prints_literally() -> None:
    trace = long_trace(2)
    trace.tensors["t0"].names = ["<b>"]
    trace.events[1].location = Location("long.py", 2, "<b>.add_(1)  # </TD></TR></TABLE>")
    source = timeline_digraph(trace, []).source
    rows = table_rows(source)
    assert "&lt;b&gt;: v0 → v1" in rows[1] and "&lt;b&gt;.add_(1)" in rows[2]
    assert "<b>" not in source and "</TD></TR></TABLE>" not in source.replace("</TD></TR></TABLE>>]", "")


@pytest.mark.dot
def test_timeline_lays_out(detach_trace: Trace) -> None:
    svg = render(detach_trace, "timeline").svg()
    assert "<svg" in svg and "c: v0 → v1" in svg and SEVERITY_FILL["error"] in svg


@pytest.mark.dot
def test_hostile_code_lays_out() -> None:
    trace = long_trace(2)
    trace.events[0].location = Location("long.py", 1, 'q["<i>"].add_(1)\\n')
    trace.tensors["t0"].names = ["<b>"]
    svg = timeline_digraph(trace, []).pipe(format="svg").decode("utf-8")
    texts = [html.unescape(t) for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    assert 'q["<i>"].add_(1)\\n' in texts and "<b>: v0 → v1" in texts  # drawn as written, not as markup
    assert "<i>" not in svg and "<b>" not in svg
    assert len(re.findall(r'<text [^>]*font-weight="bold"', svg)) == 7  # the header's titles only: no `<b>` obeyed


# ---------------------------------------------------------------------- a table that reads like one
def test_model_construction_writes_are_one_row(gallery) -> None:  # type: ignore[no-untyped-def]
    trace = gradviz.trace_script(gallery / "plot_01_testdetach.py")
    rows = timeline_rows(trace, gradviz.diagnose(trace))
    setup = [r for r in rows if r.alias == "model set up"]
    assert len(setup) == 1 and rows[0] is setup[0]
    assert setup[0].versions_text == "2 parameters initialised in place (2 writes at lines 24-25)"
    assert not [r for r in rows if r.kind == "inplace_write" and r is not setup[0]]  # nn.Linear's writes folded


def test_the_error_that_ended_the_program_is_said_once(detach_trace: Trace) -> None:
    rows = timeline_rows(detach_trace, gradviz.diagnose(detach_trace))
    errors = [r.error for r in rows if r.error and "modified by an inplace operation" in r.error]
    assert len(errors) == 1
    assert rows[-1].kind == "exception" and rows[-1].error == "the error of the backward above ended the program"


def _svg_texts(svg: str) -> list[tuple[float, float, float, str]]:
    """(x, y, font size, text) of every `<text>` of an SVG, text unescaped."""
    out = []
    for attrs, text in re.findall(r"<text ([^>]*)>([^<]*)</text>", svg):
        x = float(re.search(r'\bx="([-\d.]+)"', attrs).group(1))
        y = float(re.search(r'\by="([-\d.]+)"', attrs).group(1))
        size = float(re.search(r'font-size="([\d.]+)"', attrs).group(1))
        assert 'text-anchor="start"' in attrs, attrs  # every cell left-aligned
        out.append((x, y, size, html.unescape(text).replace("\xa0", " ")))
    return out


@pytest.mark.dot
@pytest.mark.parametrize("program", ["gallery/plot_01_testdetach.py", "tests/programs/realistic/dcgan.py"])
def test_columns_line_up_in_the_drawing_and_no_text_leaves_the_table(program: str) -> None:
    """Rendered by the real dot: the text of a column starts at the header's x in every row, and no text runs into
    the next column or past the table's right edge."""
    trace = gradviz.trace_script(ROOT / program)
    rows = timeline_rows(trace, gradviz.diagnose(trace))
    svg = timeline_digraph(trace, gradviz.diagnose(trace)).pipe(format="svg").decode("utf-8")
    texts = _svg_texts(svg)
    top = min(y for _, y, _, _ in texts)
    header = sorted(x for x, y, _, _ in texts if y == top)
    assert [t for _, y, _, t in sorted(texts) if y == top] == [
        "#", "line", "source", "event", "alias", "versions before → after", "outcome"]
    shapes = re.findall(r'points="([^"]*)"', svg)[1:]  # the cells' fills and rules (the first is the page)
    right = max(float(x) for x in re.findall(r"([-\d.]+),[-\d.]+", " ".join(shapes)))
    starts: dict[float, int] = {}
    for x, _y, size, text in texts:
        assert x in header, (x, text, header)  # a text starting anywhere else is a column out of line
        starts[x] = starts.get(x, 0) + 1
        column = header.index(x)
        end = header[column + 1] if column + 1 < len(header) else right
        # a gap of at least 2 points to the next column's text, or the table's edge, measured as a browser draws
        # the text (DejaVu Sans Mono advances 0.602 em; dot measures a little narrower, the padding takes it up)
        assert x + len(text.rstrip()) * 0.602 * size <= end - 2, (text, x, end)
    assert starts[header[0]] == len(rows) + 1  # every row numbered, in the first column
    assert starts[header[2]] >= len(rows) + 1  # every row's source line, in the third
    multi = [r for r in rows if len(r.versions) > 1 or r.count > 1]
    assert multi, "the program has rows of several tensors or folded loops: wrapped cells are tested"


def test_long_texts_wrap_within_their_column_and_are_whole_in_the_tooltip() -> None:
    trace = long_trace(1)
    call = "w.add_(" + " + ".join(f"torch.ones_like(w) * {i}" for i in range(12)) + ")"
    trace.events[0].location = Location("long.py", 1, call)
    row = row_of(timeline_digraph(trace, []).source, 0)
    source_cell = re.findall(r"<TD ([^>]*)>(.*?)</TD>", row)[2]
    lines = [html.unescape(re.sub(r"<[^>]+>", "", line)) for line in source_cell[1].split("<BR/>")]
    assert len(lines) == 3 and all(len(line) <= 44 for line in lines) and lines[-1].endswith("…")
    assert lines[0] in call and lines[1] in call  # cut at spaces, in order
    assert f'TOOLTIP="long.py:1: {html.escape(call)}"' in source_cell[0]
    assert 'BALIGN="LEFT"' in source_cell[0]


def test_a_huge_trace_is_a_bounded_table_with_a_summary_row() -> None:
    trace = long_trace(20000)
    rows = timeline_rows(trace, [])
    assert len(rows) == 301 and rows[-1].kind == "omitted"
    assert rows[-1].code == "… 19700 more events not shown"
    table = table_rows(timeline_digraph(trace, []).source)
    assert len(table) == 302  # the header, 300 events, the summary
    assert 'COLSPAN="7"' in table[-1] and "… 19700 more events not shown" in table[-1]


@pytest.mark.dot
def test_a_program_without_events_says_so_in_the_table() -> None:
    trace = long_trace(0)
    rows = table_rows(timeline_digraph(trace, []).source)
    assert len(rows) == 2 and 'COLSPAN="7"' in rows[1]
    svg = timeline_digraph(trace, []).pipe(format="svg").decode("utf-8")
    assert "no events: the program made no aliases, in-place writes or backward calls" in html.unescape(svg)


def test_events_of_several_files_name_their_file(trace_of: Callable[..., Trace], tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("def clear(t):\n    t.zero_()\n", encoding="utf-8")
    trace = trace_of(
        """
        import sys, torch
        sys.path.insert(0, __file__.rsplit("/", 1)[0])
        from helper import clear
        x = torch.ones(3)
        y = x.detach()
        clear(x)
        """,
        name="main.py",
    )
    source = timeline_digraph(trace, []).source
    wheres = [re.findall(r"<TD [^>]*>(?:<FONT[^>]*>)?([^<]*)", row)[1] for row in table_rows(source)[1:]]
    assert "main.py:5" in wheres and "helper.py:2" in wheres


BATCHNORM_NET = (
    "import torch\n"
    "import torch.nn as nn\n"
    "model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))\n"
    "model = model.to('cpu')\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "for step in range(3):\n"
    "    loss = model(torch.randn(5, 4)).pow(2).mean()\n"
    "    opt.zero_grad()\n"
    "    loss.backward()\n"
    "    opt.step()\n"
    "state = model.state_dict()\n"
)


def test_model_set_up_is_one_row_with_buffers_and_to(trace_of: Callable[..., Trace]) -> None:
    trace = trace_of(BATCHNORM_NET)
    rows = timeline_rows(trace, gradviz.diagnose(trace))
    setup = [r for r in rows if r.alias == "model set up"]
    assert len(setup) == 1
    assert setup[0].versions_lines == [
        "6 parameters initialised in place (6 writes at line 3)",
        "3 buffers (running statistics, counters) filled as the modules were built",
        "6 parameters moved: .data set at line 4 (Module.to / _apply)",
    ]
    assert not [r for r in rows if r.line in (3, 4) and r is not setup[0]]  # nothing else of the set-up
