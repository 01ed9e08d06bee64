"""The Recorder's state is declared once: what two or more of its parts use is declared in `RecorderState`
(tracer/state.py), which every part is mixed over; a part declares only what no other part uses. A name declared
twice (two parts, or a part and the state) fails here."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from gradviz.tracer.recorder import Recorder
from gradviz.tracer.state import RecorderState

TRACER = Path(__file__).resolve().parents[2] / "gradviz" / "tracer"


def _declared(cls: type) -> set[str]:
    """The names a class's own body declares with an annotation (as the source reads, not as Python keeps them)."""
    path = TRACER / f"{cls.__module__.rsplit('.', 1)[-1]}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == cls.__name__).body
    return {node.target.id for node in body if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}


def test_every_part_of_the_recorder_is_mixed_over_the_one_state():
    parts = [cls for cls in Recorder.__mro__[1:] if cls.__module__.startswith("gradviz.tracer.") and cls is not RecorderState]
    assert len(parts) == 9, [cls.__name__ for cls in parts]
    assert all(issubclass(cls, RecorderState) for cls in parts)
    assert Recorder.__mro__.index(RecorderState) > max(Recorder.__mro__.index(cls) for cls in parts)


def test_no_attribute_is_declared_twice():
    owners: dict[str, list[str]] = defaultdict(list)
    for cls in [RecorderState, *(c for c in Recorder.__mro__[1:] if issubclass(c, RecorderState) and c is not RecorderState)]:
        for name in _declared(cls):
            owners[name].append(cls.__name__)
    assert {name: where for name, where in owners.items() if len(where) > 1} == {}
    assert len(_declared(RecorderState)) >= 40  # (what the parts share: the trace, the live tensors, the window, ...)


def test_the_shared_state_is_what_a_new_recorder_has():
    recorder = Recorder()
    missing = [name for name in _declared(RecorderState) if not name.startswith("__") and not hasattr(recorder, name)]
    assert missing == []
