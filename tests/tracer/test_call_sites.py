"""Call sites are looked up by code object and instruction offset (callsite.site): every recorded call still gets its
own line, in a loop, in a long function, in a second trace of the same code; metadata reads record nothing."""

from __future__ import annotations

import inspect
import warnings

import torch

import gradviz
from gradviz.tracer import callsite


def _two_lines(x: torch.Tensor) -> torch.Tensor:
    a = x * 2
    b = a.tanh()
    return b


def _line_of(fragment: str) -> int:
    lines, first = inspect.getsourcelines(_two_lines)
    return first + next(i for i, text in enumerate(lines) if fragment in text)


def test_each_call_in_a_loop_keeps_its_own_line() -> None:
    x = torch.ones(3, requires_grad=True)
    with gradviz.trace() as trace:
        for _ in range(3):
            _two_lines(x)
    lines = [(op.name, op.line) for op in trace.ops]
    assert lines == [("Tensor.mul", _line_of("x * 2")), ("Tensor.tanh", _line_of("a.tanh()"))] * 3


def test_a_second_trace_of_the_same_code_gets_the_same_lines_and_new_stand_ins() -> None:
    x = torch.ones(3, requires_grad=True)
    with gradviz.trace() as first:
        _two_lines(x)
    # tracing stopped: no stand-in (each holds its caller's globals) outlives it
    assert all(entry[2] is None for entry in callsite._sites.values())
    with gradviz.trace() as second:
        _two_lines(x)
    assert [op.line for op in second.ops] == [op.line for op in first.ops] == [_line_of("x * 2"), _line_of("a.tanh()")]


def test_lines_in_a_long_function_are_exact() -> None:
    body = "".join(f"    k{i} = {i}\n" for i in range(300))
    source = f"def long(x):\n{body}    y = x.exp()\n    return y.sum()\n"
    namespace: dict[str, object] = {}
    exec(compile(source, "long_function.py", "exec"), namespace)  # noqa: S102 - a user function of 300 lines
    x = torch.ones(2, requires_grad=True)
    with gradviz.trace() as trace:
        namespace["long"](x)  # type: ignore[operator]
    assert [(op.name, op.file, op.line) for op in trace.ops] == [
        ("Tensor.exp", "long_function.py", 302),
        ("Tensor.sum", "long_function.py", 303),
    ]


def test_metadata_reads_record_nothing_and_change_nothing() -> None:
    x = torch.ones(2, 3, requires_grad=True)
    with gradviz.trace() as trace:
        facts = (x.dim(), x.shape, x.size(1), x.dtype, x.requires_grad, x.numel(), len(x), x.is_leaf)
    assert facts == (2, torch.Size([2, 3]), 3, torch.float32, True, 6, 2, True)
    assert trace.ops == [] and trace.tensors == {}


def test_a_warning_from_a_recorded_call_is_at_the_program_s_line() -> None:
    x = torch.ones(1, requires_grad=True) * 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradviz.trace():
            line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
            torch.tensor(x)  # "To copy construct from a tensor": raised from C++
    (warning,) = [w for w in caught if "copy construct" in str(w.message)]
    assert (warning.filename, warning.lineno) == (__file__, line)
