"""The Namer's expressions read as Python: a container's entries are subscripted (`main[6](…)`), never `6(…)`."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

import gradviz
from gradviz.analysis.names import Namer, call_name
from gradviz.render import render

REALISTIC = Path(__file__).resolve().parents[2] / "tests" / "programs" / "realistic"

#: a call of a bare number, as `6(4(x))`: not `fc2(x)`, `main[6](x)`, `h.0(x)` or `1.5(`
_NUMBER_CALLED = re.compile(r"(?<![\w\].\[])\d+\(")


@pytest.mark.parametrize(
    ("module", "called"),
    [("model.fc1", "fc1"), ("netG.main.6", "main[6]"), ("model.layers.0.1", "layers[0][1]"), ("nets[0]", "nets[0]"),
     ('models["G"].main.0', "main[0]"), ("model.transformer.h.0.attn", "attn"), ("Sequential", "Sequential")],
)
def test_a_module_is_called_as_the_program_calls_it(module: str, called: str) -> None:
    assert call_name(module) == called


@pytest.fixture(scope="module")
def dcgan() -> gradviz.Trace:
    return gradviz.trace_script(REALISTIC / "dcgan.py")


def test_sequential_children_are_subscripted_in_expressions(dcgan: gradviz.Trace) -> None:
    """A DCGAN's `nn.Sequential` layers: `tanh(main[6](main[4](…)))`, not `tanh(6(4(…)))`."""
    namer = Namer(dcgan)
    names = {namer.tensor(tid) for tid in dcgan.tensors} | {namer.expression(tid) for tid in dcgan.tensors}
    assert "tanh(main[6](main[4](\N{HORIZONTAL ELLIPSIS})))" in names  # the generator's output, before `fake = `
    assert "main[0](z)" in names
    assert [name for name in names if _NUMBER_CALLED.search(name)] == []


def test_no_view_or_message_calls_a_number(dcgan: gradviz.Trace) -> None:
    findings = gradviz.diagnose(dcgan)
    texts = [html.unescape(render(dcgan, view, findings=findings).source) for view in ("graph", "memory", "timeline")]
    texts += [finding.message for finding in findings]
    assert texts[0].count("netG.main.0") > 0  # the views name the layers by their path
    assert [match.group(0) for text in texts for match in _NUMBER_CALLED.finditer(text)] == []


def test_a_statement_is_quoted_without_its_trailing_comment() -> None:
    from gradviz.analysis.names import statement

    assert statement("    h = self.act(h)  # gradviz: ignore[cut_edge]\n") == "h = self.act(h)"
    assert statement("y = g(x) # one space before it") == "y = g(x)"
    assert statement("s = f('#  not a comment')  # but this is") == "s = f('#  not a comment')"
    assert statement("z = (a +  # open") == "z = (a +  # open"  # a line that does not tokenise alone: as written
