"""`%%gradviz --steps N` and `--stop-after N` in an in-process IPython shell."""

from __future__ import annotations

import pytest

from .test_magic import run, shell, svgs  # noqa: F401 - the shell fixture

pytest.importorskip("IPython")

CELL = """\
%%gradviz {options}
w = torch.ones(3, requires_grad=True)
opt = torch.optim.SGD([w], lr=0.1)
done = 0
for i in range(6):
    opt.zero_grad()
    (w * w).sum().backward()
    opt.step()
    done += 1
"""


@pytest.mark.dot
def test_magic_steps_traces_the_window_and_runs_the_cell_to_its_end(shell):  # noqa: F811
    result, captured = run(shell, CELL.format(options="--steps 2"))
    assert result.error_in_exec is None
    assert shell.user_ns["done"] == 6
    texts = svgs(captured)[0]
    assert "steps 1-2 of 6 traced" in texts


@pytest.mark.dot
def test_magic_stop_after_ends_the_cell_quietly(shell):  # noqa: F811
    result, captured = run(shell, CELL.format(options="--stop-after 2"))
    assert result.error_in_exec is None
    assert shell.user_ns["done"] == 1  # stopped inside the second step
    assert "steps 1-2 traced, then the program was stopped there (--stop-after)" in svgs(captured)[0]


def test_magic_bad_steps_is_a_usage_error(shell):  # noqa: F811
    result, captured = run(shell, CELL.format(options="--steps 0"))
    assert "--steps must be at least 1 step, got 0" in captured.stderr + str(result.error_in_exec or "")
    assert "Traceback" not in captured.stdout
