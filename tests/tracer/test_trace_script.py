"""trace_script runs a script exactly as `python path argv...` would, and restores the interpreter afterwards."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import gradviz
from gradviz import EventKind


def test_main_argv_and_path(tmp_path: Path, trace_of) -> None:
    (tmp_path / "helper_beside_script.py").write_text("VALUE = 41\n", encoding="utf-8")
    argv_before, path_before, main_before = list(sys.argv), list(sys.path), sys.modules["__main__"]
    trace = trace_of(
        """
        import os
        import sys
        import torch
        import helper_beside_script
        assert __name__ == "__main__", __name__
        assert sys.argv[1:] == ["--flag", "7"], sys.argv
        assert sys.argv[0].endswith("prog.py"), sys.argv
        assert sys.path[0] == os.path.dirname(os.path.abspath(__file__)), sys.path[0]
        answer = torch.tensor(float(helper_beside_script.VALUE + 1))
        """,
        argv=["--flag", 7],
        name="prog.py",
    )
    assert trace.exception is None, trace.exception
    assert trace.error is None
    assert trace.tensor("answer").shape == []
    assert trace.script == str((tmp_path / "prog.py").resolve())
    assert sys.argv == argv_before
    assert sys.path == path_before
    assert sys.modules["__main__"] is main_before
    sys.modules.pop("helper_beside_script", None)


def test_path0_is_script_folder(tmp_path: Path) -> None:
    folder = tmp_path / "sub dir"
    folder.mkdir()
    script = folder / "where.py"
    out = tmp_path / "path0.txt"
    script.write_text(f"import sys\nopen({str(out)!r}, 'w').write(sys.path[0])\n", encoding="utf-8")
    path_before = list(sys.path)
    gradviz.trace_script(script)
    assert out.read_text() == str(folder.resolve())
    assert sys.path == path_before


def test_restored_after_exception(trace_of) -> None:
    argv_before, path_before = list(sys.argv), list(sys.path)
    trace = trace_of("import sys\nraise KeyError('boom')\n", argv=["x"])
    assert trace.exception.type == "KeyError"
    assert trace.exception.message == "'boom'"
    assert trace.exception.location.line == 2
    assert isinstance(trace.error, KeyError)
    assert sys.argv == argv_before and sys.path == path_before


def test_sys_exit_code_kept(trace_of) -> None:
    trace = trace_of(
        """
        import sys
        import torch
        x = torch.ones(2).add_(1)
        sys.exit(3)
        never = torch.zeros(1)
        """
    )
    assert isinstance(trace.error, SystemExit)
    assert trace.error.code == 3
    assert trace.exception.type == "SystemExit"
    assert trace.exception.message == "3"
    assert trace.exception.location.line == 4
    assert trace.events[-1].kind is EventKind.EXCEPTION
    # everything up to the exit is there, nothing after it
    assert [e.kind for e in trace.events_of(EventKind.INPLACE_WRITE)] == [EventKind.INPLACE_WRITE]
    with pytest.raises(KeyError):
        trace.tensor("never")
    with pytest.raises(SystemExit) as raised:
        trace.reraise()
    assert raised.value.code == 3


def test_sys_exit_without_code(trace_of) -> None:
    trace = trace_of("import sys\nsys.exit()\n")
    assert trace.exception.type == "SystemExit"
    assert trace.exception.exit_code == 0
    assert trace.error.code == 0  # rebuilt from the record: sys.exit() and sys.exit(0) end the same way


def test_missing_script() -> None:
    argv_before, path_before = list(sys.argv), list(sys.path)
    with pytest.raises(FileNotFoundError, match="no_such_script.py"):
        gradviz.trace_script("/nonexistent/folder/no_such_script.py")
    assert sys.argv == argv_before and sys.path == path_before


def test_script_exception_inside_function_reports_script_line(trace_of, line_of) -> None:
    text = """
    import torch

    def step(a):
        out = a.tanh()
        out.detach().mul_(2)
        out.sum().backward()

    a = torch.ones(3, requires_grad=True)
    step(a)
    """
    trace = trace_of(text)
    assert trace.exception.type == "RuntimeError"
    # the innermost script frame: the backward call inside step(), not the call site
    assert trace.exception.location.line == line_of(text, "out.sum().backward()")
    write = trace.events_of(EventKind.INPLACE_WRITE)[0]
    assert write.location.line == line_of(text, "mul_(2)")
