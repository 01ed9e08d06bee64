"""How the lifetime findings are drawn: the graph view's holder boxes, the graph-memory chart's data."""

from __future__ import annotations

from pathlib import Path

import pytest

import gradviz
from gradviz.analysis import FindingKind, diagnose
from gradviz.analysis.memory_profile import memory_profile
from gradviz.render import render

GALLERY = Path(__file__).resolve().parents[2] / "gallery"


@pytest.fixture(scope="module")
def total_loss() -> gradviz.Trace:
    return gradviz.trace_script(GALLERY / "plot_22_total_loss_kept_alive.py")


def test_graph_view_draws_the_accumulator_with_the_graphs_it_holds_rolled(total_loss: gradviz.Trace) -> None:
    source = render(total_loss, "graph").source
    assert "keeps 6 steps&#x27; graphs alive" in source  # (the label's quote, escaped as the DOT holds it)
    assert "stored at line 27" in source
    assert "total_loss" in source
    # the steps it holds, drawn once; each `total_loss += loss` is drawn in the step whose loss it reads (made after
    # that backward): step 1's starts from 0, every later one adds to the total of the step before
    assert "step 1: no carried state, backward at line 25" in source
    assert "↻ step ×5 (steps 2-6): backward at line 25" in source
    assert "graph_kept_alive" in source  # the legend entry


def test_graph_view_marks_the_freed_graph_a_new_chunk_builds_on() -> None:
    trace = gradviz.trace_script(GALLERY / "plot_24_hidden_without_detach.py")
    source = render(trace, "graph").source
    assert "graph freed by an earlier backward" in source
    assert "reused at line 25" in source


def test_memory_profile_of_validation_without_no_grad() -> None:
    trace = gradviz.trace_script(GALLERY / "plot_23_validation_without_no_grad.py")
    profile = memory_profile(trace)
    assert profile.backwards == []
    # never freed: the bytes held only grow, batch after batch
    sizes = [size for _, size in profile.points]
    assert sizes == sorted(sizes) and sizes[-1] == profile.peak[1]
    # 8 batches; each keeps at least its two ReLU outputs (32 x 64 floats, 8 KB each)
    assert profile.peak[1] >= 8 * 2 * 32 * 64 * 4
    (kept,) = profile.kept
    assert kept[1] == 24 and kept[2] >= 2 * 32 * 64 * 4
    assert profile.top_holders[0][0].startswith("module ")


def test_memory_profile_of_a_training_loop_returns_to_zero_after_each_backward(total_loss: gradviz.Trace) -> None:
    profile = memory_profile(total_loss)
    assert len(profile.backwards) == 6
    held = dict(profile.points)
    for seq, _line in profile.backwards:
        after = max((s for s in held if s <= seq), default=None)
        assert after is not None and held[after] == 0  # backward freed what the step saved


def test_predicted_freed_graph_is_a_warning_in_json(tmp_path: Path) -> None:
    trace = gradviz.trace_script(Path(__file__).resolve().parents[1] / "programs" / "freed_predicted.py")
    (finding,) = [f for f in diagnose(trace) if f.kind is FindingKind.BACKWARD_THROUGH_FREED_GRAPH]
    data = finding.to_dict()
    assert data["severity"] == "warning" and data["predicted"] is True and data["line"] == 12
    assert "calling backward will raise" in data["message"]
    assert type(finding).from_dict(data).severity.value == "warning"


def test_lifetime_findings_from_a_trace_loaded_from_json(total_loss: gradviz.Trace) -> None:
    """The passes read plain records: a saved and reloaded trace gives the same findings."""
    again = gradviz.Trace.loads(total_loss.to_json())
    first = [(f.kind, f.line, f.message) for f in diagnose(total_loss)]
    assert first == [(f.kind, f.line, f.message) for f in diagnose(again)]
    assert [kind for kind, _, _ in first] == [FindingKind.GRAPH_KEPT_ALIVE]


def test_timeline_marks_every_step_of_the_accumulator(total_loss: gradviz.Trace) -> None:
    from gradviz.picture.timeline_rows import timeline_rows

    rows = timeline_rows(total_loss, diagnose(total_loss))
    marked = [row for row in rows if "graph_kept_alive" in row.findings]
    # the in-place `total_loss += loss` of steps 2-6 (step 1 makes the tensor), loop rows folded together
    assert sum(len(row.seqs) for row in marked) == 5
    assert {row.kind for row in marked} == {"inplace_write"}
    assert {row.severity for row in marked} == {"warning"}
