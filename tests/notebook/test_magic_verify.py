"""`%%gradviz --verify`: the cell's silent write is measured, the note under the graph says by how much."""

from __future__ import annotations

import html
import re

import pytest

pytest.importorskip("IPython")

CELL = """\
%%gradviz --verify
a = torch.tensor([1, 2, 3.], requires_grad=True)
out = a.tanh()
c = out.data
c.zero_()
out.sum().backward()
"""


@pytest.fixture(scope="module")
def shell():
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    ip = get_ipython() or start_ipython()
    ip.run_line_magic("load_ext", "gradviz.integrations.notebook")
    ip.run_cell("import torch")
    return ip


def test_magic_line_takes_verify() -> None:
    from gradviz.cli.runner_options import parse_magic_line

    assert parse_magic_line("--verify").verify is True
    assert parse_magic_line("").verify is False


@pytest.mark.dot
def test_magic_verify_shows_the_measured_error(shell) -> None:
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        result = shell.run_cell(CELL)
    assert result.success, result.error_in_exec
    texts = [
        html.unescape(t).replace("\xa0", " ")
        for out in captured.outputs
        if "image/svg+xml" in out.data
        for t in re.findall(r"<text[^>]*>([^<]*)</text>", out.data["image/svg+xml"])
    ]
    assert "measured at step 1: a.grad off by up to 0.99 (relative 2.36, norm ratio 4.07)" in texts
    shown = "".join(out.data.get("text/html", "") for out in captured.outputs)
    assert "Measured with --verify" in html.unescape(shown)
    assert shell.user_ns["a"].grad.tolist() == [1.0, 1.0, 1.0]  # the program's own (wrong) gradient, unchanged
