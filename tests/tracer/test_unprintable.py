"""User objects whose __str__/__repr__ raise never replace the user's error (issue 10.6 and its siblings)."""

from __future__ import annotations

import pytest
import torch

import gradviz


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no str")

    def __repr__(self) -> str:
        raise ValueError("no repr")


class FailingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        return x * 2

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        raise Unprintable()


def test_an_unprintable_error_raised_inside_backward_reaches_the_user() -> None:
    a = torch.ones(3, requires_grad=True)
    with pytest.raises(Unprintable):
        with gradviz.trace() as t:
            FailingBackward.apply(a).sum().backward()
    backward = t.events_of("backward")[0]
    assert backward.data["outcome"] == "error"
    assert backward.data["error"] == {"type": "Unprintable", "message": "<exception str() failed>"}
    assert (t.exception.type, t.exception.message) == ("Unprintable", "<exception str() failed>")
    assert t.exception.traceback.endswith("Unprintable: <exception str() failed>\n")


def test_text_helpers_never_fail() -> None:
    from gradviz.text import clean, safe_repr, safe_str

    assert safe_str(Unprintable()) == "<exception str() failed>"
    assert safe_repr(Unprintable()) == "<Unprintable object (repr() failed)>"
    assert clean("bad \udcff value") == "bad \\udcff value"
    assert clean("café") == "café"


@pytest.mark.parametrize("name", ["UnicodeDecodeError", "UnicodeEncodeError", "UnicodeTranslateError", "ExceptionGroup",
                                  "BaseExceptionGroup"])
def test_a_builtin_error_that_wants_other_arguments_is_rebuilt_as_a_program_error(name: str) -> None:
    """Built-ins whose constructor refuses one message (a TypeError, the one error rebuild() expects there)."""
    from gradviz.model import ExceptionRecord, ProgramError

    rebuilt = ExceptionRecord(name, "bad bytes", module="builtins").rebuild()
    assert type(rebuilt) is ProgramError and str(rebuilt) == f"{name}: bad bytes"
    again = ExceptionRecord("KeyError", "missing", module="builtins").rebuild()
    assert type(again) is KeyError and again.args == ("missing",)
