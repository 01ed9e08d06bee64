"""One vocabulary for what events keep in `data`: `model.EventData` declares every key with its type (mypy checks
each read and write against it), the trace file's checks and docs/trace-format.md name the same keys, and the
traces gradviz writes hold no other key."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

import gradviz
from gradviz.model import EventData, EventKind
from gradviz.tracefile import checks

ROOT = Path(__file__).resolve().parents[2]
DECLARED = set(typing.get_type_hints(EventData))
ANALYSIS_ONLY = {"rewrap"}  # (the cut pass's re-wraps: events it makes, never in a trace file)


def test_the_declared_keys_are_the_documented_ones():
    doc = (ROOT / "docs" / "trace-format.md").read_text(encoding="utf-8")
    lines = doc[doc.index("| kind | `tensor` / `result`"):].splitlines()
    table = "\n".join(line for line in lines[: next((k for k, line in enumerate(lines) if not line.startswith("|")), None)])
    data_cells = {line.split(" | ")[-1] for line in table.splitlines()[2:]}  # the `data` column of each kind
    named = {key for cell in data_cells for key in re.findall(r"`([a-z_]+)`", cell)}
    assert sorted(DECLARED - ANALYSIS_ONLY - named) == []
    assert len(data_cells) == len(EventKind)


def test_the_trace_file_checks_only_declared_keys():
    checked = {key for specs in checks._EVENT_DATA.values() for key in specs}
    assert checked <= DECLARED, sorted(checked - DECLARED)
    assert "reached_nodes" in checked and "byte_range" in checked


@pytest.mark.parametrize("program", ["detach__saved_input.py", "clean_checkpoint_custom_function.py",
                                     "p_data_reassign_saved.py", "lbfgs_closure_detach.py", "tbptt.py"])
def test_recorded_events_hold_declared_keys_only(program):
    trace = gradviz.trace_script(str(ROOT / "tests" / "programs" / program))
    held = {key for event in trace.events for key in event.data}
    assert held <= DECLARED, sorted(held - DECLARED)
    kinds = {event.kind for event in trace.events}
    assert EventKind.BACKWARD in kinds  # (each of them makes a backward: its keys are among those checked)
