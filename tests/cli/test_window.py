"""`--steps N` and `--stop-after N` as users run them: `gradviz check|render` in a subprocess."""

from __future__ import annotations

import json
import runpy
import sys

import pytest

from .conftest import svg_texts, write

TRAIN = """\
import sys, torch
torch.manual_seed(0)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(steps):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    if step % 10 == 0:
        print("step", step, repr(loss.item()))
print("final", repr(loss.item()))
"""


@pytest.fixture
def train(tmp_path):
    return write(tmp_path, "train.py", TRAIN)


def _python(path, capsys, *args: str) -> str:
    """What `python path args` prints (run in this process, where torch is already imported: much faster)."""
    capsys.readouterr()
    saved = sys.argv
    sys.argv = [str(path), *args]
    try:
        runpy.run_path(str(path), run_name="__main__")
    finally:
        sys.argv = saved
    return capsys.readouterr().out


def test_check_steps_traces_the_window_and_says_so_with_the_same_output(python_m_gradviz, train, capsys):
    plain = _python(train, capsys, "40")
    result = python_m_gradviz("check", train, "--steps", "5", "--", "40")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:-2] == plain.splitlines()  # the script's own output, unchanged, then our summary
    # the final print after the loop is code the window never ran: the sentinel traced it again, and says so
    assert lines[-2] == "gradviz: traced again after step 40: new code at line 14"  # (its kind is its reason: said once)
    assert lines[-1] == "train.py: no problems found (steps 1-5 of 40 traced)"


def test_stop_after_ends_the_script_after_the_window_and_exits_0(python_m_gradviz, train):
    result = python_m_gradviz("check", train, "--stop-after", "3", "--", "40")
    assert result.returncode == 0
    assert result.stdout.splitlines()[0].startswith("step 0 ")
    assert "final" not in result.stdout and "step 10" not in result.stdout
    assert "steps 1-3 traced, then the program was stopped there (--stop-after)" in result.stdout
    assert result.stderr.strip().splitlines() == [
        "gradviz: stopped train.py after 3 traced steps (--stop-after); exit status as if it had ended normally"
    ]


def test_stop_after_one_step_says_step(python_m_gradviz, train):
    result = python_m_gradviz("check", train, "--stop-after", "1", "--", "40")
    assert result.returncode == 0
    assert "step 1 traced, then the program was stopped there (--stop-after)" in result.stdout
    assert result.stderr.strip().splitlines() == [
        "gradviz: stopped train.py after 1 traced step (--stop-after); exit status as if it had ended normally"
    ]


def test_check_traces_the_first_100_steps_by_default_and_all_on_request(python_m_gradviz, train):
    default = python_m_gradviz("check", train, "--json", "--", "130")
    assert default.returncode == 0
    window = json.loads(default.stdout)["window"]
    assert (window["unit"], window["traced"], window["total"], window["closed"]) == ("step", 100, 130, True)
    assert window["description"] == "steps 1-100 of 130 traced"


def test_steps_all_traces_the_whole_run():
    from gradviz.cli.command import build_parser
    from gradviz.cli.options import Options

    def window(*argv: str) -> dict[str, object]:
        return Options.from_namespace(build_parser().parse_args(list(argv))).window()

    assert window("check", "t.py") == {"steps": 100, "stop_after": False}
    assert window("check", "t.py", "--steps", "all") == {}
    assert window("render", "t.py") == {}
    assert window("render", "t.py", "--stop-after", "7") == {"steps": 7, "stop_after": True}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps", "0"], "gradviz: --steps must be at least 1 step, got 0"),
        (["--steps", "-4"], "gradviz: --steps must be at least 1 step, got -4"),
        (["--stop-after", "0"], "gradviz: --stop-after must be at least 1 step, got 0"),
        (["--steps", "ten"], "gradviz: --steps expects a whole number of steps, or `all`, got 'ten'"),
        (["--steps", "3", "--stop-after", "5"], "gradviz: --steps 3 and --stop-after 5 disagree: give one of them"),
    ],
)
def test_bad_window_values_are_one_line_and_exit_2(python_m_gradviz, train, args, message):
    for command in ("check", "render"):
        result = python_m_gradviz(command, train, *args)
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == [message]
        assert result.stdout == ""  # the script never ran


@pytest.mark.dot
def test_render_steps_draws_the_window_and_names_it(python_m_gradviz, train, tmp_path):
    result = python_m_gradviz("render", train, "--steps", "2", "-o", "g.svg", "--", "25")
    assert result.returncode == 0, result.stderr
    assert "gradviz: steps 1-2 of 25 traced" in result.stdout
    # the step after the loop reads the loss (new code): traced again, said by the CLI and by the picture's header
    assert "gradviz: traced again after step 25: new code at line 14" in result.stdout
    texts = svg_texts(tmp_path / "g.svg")
    assert "steps 1-2 of 25 traced; traced again after step 25: new code at line 14" in texts
    assert any(t.startswith("AddmmBackward0") for t in texts)


def test_help_documents_the_window(python_m_gradviz):
    check = python_m_gradviz("check", "--help").stdout
    assert "--steps N" in check and "--stop-after N" in check
    assert "default: 100; `all` traces the whole run" in " ".join(check.split())
    render = " ".join(python_m_gradviz("render", "--help").stdout.split())
    assert "(default: the whole run)" in render and "--stop-after 3" in render


def test_window_options_do_not_apply_to_a_saved_trace(python_m_gradviz, tmp_path):
    import torch

    import gradviz

    a = torch.ones(2, requires_grad=True)
    with gradviz.trace() as t:
        (a * 2).sum().backward()
    t.to_json(tmp_path / "run.json")
    result = python_m_gradviz("check", "run.json", "--steps", "3")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "gradviz: 'run.json' is a saved trace: nothing runs, so --steps and --stop-after do not apply"
    ]
    assert python_m_gradviz("check", "run.json").returncode == 0  # check's default window does not get in the way


def test_module_runs_take_the_window_too(python_m_gradviz, tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text(TRAIN)
    result = python_m_gradviz("check", "-m", "pkg.train", "--steps", "2", "--", "12", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "-m pkg.train: no problems found (steps 1-2 of 12 traced)"


LATE_BUG = """\
import torch
w = torch.ones(2, requires_grad=True)
optimizer = torch.optim.SGD([w], lr=0.01)
for step in range(130):
    out = (w * 1.0).tanh()
    if step == 119:
        out.data.zero_()  # a bug in step 120 only: beyond the default window of 100 steps
    optimizer.zero_grad()
    out.sum().backward()
    optimizer.step()
print("done")
"""


def test_steps_all_traces_past_the_default_window_of_100_steps(python_m_gradviz, tmp_path):
    write(tmp_path, "late.py", LATE_BUG)

    default = python_m_gradviz("check", "late.py", "--json")
    window_only = python_m_gradviz("check", "late.py", "--json", "--no-sentinel")
    whole = python_m_gradviz("check", "late.py", "--json", "--steps", "all")

    assert window_only.returncode == 0, window_only.stderr
    windowed = json.loads(window_only.stdout)
    assert windowed["findings"] == []  # the default window ends at step 100, before the bug
    assert windowed["window"]["description"] == "steps 1-100 of 130 traced"
    # by default the sentinel sees the new line run in step 120 and traces that step again: the bug is found
    assert default.returncode == 1, default.stderr
    watched = json.loads(default.stdout)
    assert [(f["kind"], f["line"]) for f in watched["findings"]] == [("silently_corrupted_saved_tensor", 7)]
    assert watched["window"]["description"] == "steps 1-100 of 130 traced"
    assert [(r["step"], r["reason"], r["line"]) for r in watched["window"]["rearmed"]] == [(119, "new code", 7)]
    assert whole.returncode == 1, whole.stderr
    document = json.loads(whole.stdout)
    assert "window" not in document  # nothing left untraced
    assert [(f["kind"], f["line"]) for f in document["findings"]] == [("silently_corrupted_saved_tensor", 7)]
    assert "done" in whole.stderr  # the whole run ran, to its last line


THREAD_TRAIN = """\
import threading, torch
def work():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(30):
        opt.zero_grad()
        h = torch.tanh(model(torch.randn(2, 3)))
        if i == 20:
            h.data.mul_(2.0)
        h.sum().backward()
        opt.step()
    print("B done", i + 1)
t = threading.Thread(target=work, name="B")
t.start()
t.join()
"""


def test_steps_a_thread_made_after_its_window_are_said_to_have_run_unwatched(python_m_gradviz, tmp_path):
    """The sentinel watches the tracing thread: a training thread's steps after its own window ran neither traced nor
    watched (its step 21 writes `h.data` behind autograd's back), and every output says so instead of a bare "no
    problems found"."""
    write(tmp_path, "threaded.py", THREAD_TRAIN)
    said = "in thread 'B', the 25 steps after recording stopped there ran unwatched (the sentinel watches the tracing thread only)"
    text = python_m_gradviz("check", "threaded.py", "--steps", "5")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[-2:] == [f"gradviz: {said}", "threaded.py: no problems found (steps 1-5 of 30 traced)"]
    document = json.loads(python_m_gradviz("check", "threaded.py", "--steps", "5", "--json").stdout)
    assert document["window"]["unwatched"] == {"B": 25}
    assert document["window"]["coverage"] == f"steps 1-5 of 30 traced; {said}"
    github = python_m_gradviz("check", "threaded.py", "--steps", "5", "--format", "github").stdout.splitlines()
    assert f"::notice::gradviz: {said}" in github
    # the whole run traced: the write is found, and nothing is said to have run unwatched
    whole = python_m_gradviz("check", "threaded.py", "--steps", "all")
    assert "silently_corrupted_saved_tensor" in whole.stdout and "unwatched" not in whole.stdout
