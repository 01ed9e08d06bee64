"""Each program in tests/programs/ declares, on its own lines, the findings gradviz must report there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import gradviz
from gradviz.analysis import Severity, diagnose

PROGRAMS = sorted((Path(__file__).parent.parent / "programs").glob("*.py"))
# `param=model.0.weight`; a dead_parameter finding names every parameter its cause starves, in creation order:
# `params=model.0.weight,model.0.bias`
EXPECT = re.compile(r"expect:\s*(\w+)(?:\s+params?=([^\s;]+))?")


def expectations(path: Path) -> tuple[set[tuple[str, int, str | None]], str | None]:
    expected = set()
    raises = None
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if number == 1 and text.startswith("# raises:"):
            raises = text.split(":", 1)[1].strip()
            continue
        if "#" in text:
            comment = text[text.index("#") :]
            for kind, param in EXPECT.findall(comment):
                expected.add((kind, number, param or None))
    return expected, raises


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_program_findings_match_declarations(program: Path) -> None:
    expected, raises = expectations(program)
    trace = gradviz.trace_script(program)
    assert not trace.internal_errors
    if raises:
        assert trace.exception is not None and trace.exception.type == raises
    else:
        assert trace.exception is None, trace.exception
    findings = diagnose(trace)
    got = {(f.kind.value, f.line, ",".join(f.parameters) if f.parameters else f.parameter) for f in findings}
    # findings without a parameter match a declaration without one
    assert got == expected, "\n".join(f"{f.kind.value}:{f.line} {f.parameter} {f.message}" for f in findings)


def test_clean_programs_have_no_error_or_warning() -> None:
    for name in ("clean_train.py", "logging_only.py", "wgan_clip_before.py", "p_data_reassign_after_backward.py"):
        trace = gradviz.trace_script(PROGRAMS[0].parent / name)
        assert [f for f in diagnose(trace) if f.severity is not Severity.INFO] == [], name
