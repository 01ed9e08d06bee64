"""One behaviour for `render` and `check` (issue 21.4): the same finding text, -q, --fail-on, a saved trace's old
error, --color and NO_COLOR, typos and abbreviations, --step checked early, progress lines on long runs."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gradviz

from .conftest import GALLERY, write

DATA = GALLERY / "plot_02_data_silent.py"
DETACH = GALLERY / "plot_03_detach_raises.py"


@pytest.fixture(scope="module")
def raised_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trace of plot_03 (backward raises RuntimeError at line 31), saved as the CLI's -o x.json writes it."""
    path = tmp_path_factory.mktemp("saved") / "raises.json"
    gradviz.trace_script(DETACH).to_json(path)
    return path


def _finding_block(stdout: str) -> str:
    """From the severity line of the first finding to the blank line after its fix."""
    start = stdout.index("error  ")
    return stdout[start : stdout.index("\n\n", start)]


def test_render_prints_each_finding_as_check_does_and_quiet_never_hides_it(python_m_gradviz):
    render = python_m_gradviz("render", DATA, "-o", "g.dot", "-q")
    check = python_m_gradviz("check", DATA, "-q")

    assert render.returncode == 0 and check.returncode == 1, render.stderr + check.stderr
    block = _finding_block(render.stdout)
    assert block == _finding_block(check.stdout)
    lines = block.splitlines()
    assert lines[0] == f"error  {DATA}:24  silently_corrupted_saved_tensor"
    assert lines[1].strip().startswith("24 | c.zero_()")
    assert lines[-1].startswith("  fix: ") and ".detach()" in lines[-1]  # the fix, not one sentence
    assert "gradviz: wrote" not in render.stdout  # -q hides the informational lines only


def test_fail_on_sets_the_exit_status_of_render(python_m_gradviz, raised_trace):
    assert python_m_gradviz("render", raised_trace, "-o", "a.svg").returncode == 0
    assert python_m_gradviz("render", raised_trace, "-o", "a.svg", "--fail-on", "error").returncode == 1
    assert python_m_gradviz("render", raised_trace, "-o", "a.svg", "--fail-on", "warning").returncode == 1
    assert python_m_gradviz("check", raised_trace, "--fail-on", "never").returncode == 0
    clash = python_m_gradviz("check", raised_trace, "--strict", "--fail-on", "never")
    assert clash.returncode == 2 and "--strict and --fail-on never disagree" in clash.stderr


def test_a_saved_trace_describes_its_recorded_error_once_and_does_not_raise_it(python_m_gradviz, raised_trace):
    expected = re.compile(
        r"gradviz: raises\.json: the recorded run raised RuntimeError at line 31: one of the variables needed for "
        r"gradient computation has been modified by an inplace operation: .* \(recorded, not raised again\)"
    )
    for command in ("render", "check"):
        result = python_m_gradviz(command, raised_trace.name, cwd=raised_trace.parent)
        assert "Traceback" not in result.stderr and str(DETACH.parent) not in result.stderr
        assert [line for line in result.stderr.splitlines() if "recorded run" in line] == result.stderr.splitlines()
        assert len(result.stderr.splitlines()) == 1 and expected.fullmatch(result.stderr.strip()), result.stderr
        assert "the script raised" not in result.stdout  # described once, on stderr
    assert python_m_gradviz("render", raised_trace, "-q").returncode == 0  # a loop drawing saved traces passes
    assert python_m_gradviz("check", raised_trace, "-q").returncode == 1  # the error finding, not the old error


@pytest.mark.parametrize(
    ("args", "env", "coloured"),
    [
        (["--color", "always"], {}, True),
        (["--color", "never"], {"FORCE_COLOR": "1"}, False),
        ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        ([], {"FORCE_COLOR": "1"}, True),
        ([], {}, False),  # not a terminal
    ],
    ids=["always", "never", "no-color", "terminal", "pipe"],
)
def test_color_option_and_no_color_leave_no_escape_at_all(python_m_gradviz, raised_trace, args, env, coloured):
    result = python_m_gradviz("check", raised_trace, *args, env=env)

    assert result.returncode == 1
    assert "poisoned_saved_tensor" in result.stdout
    if coloured:
        assert "\x1b[1;31merror\x1b[0m" in result.stdout and "\x1b[1mpoisoned_saved_tensor" in result.stdout
    else:  # NO_COLOR and --color never: no colour, and no bold or dim either (a spinner may still move the cursor)
        assert "\x1b[" not in result.stdout
        assert not re.search(r"\x1b\[[0-9;]*m", result.stderr), result.stderr


def test_a_misspelt_option_shows_the_subcommand_usage_and_the_closest_options(python_m_gradviz, raised_trace):
    typo = python_m_gradviz("render", raised_trace, "--colapse-modules")
    prefix = python_m_gradviz("render", raised_trace, "--col")
    strict = python_m_gradviz("check", raised_trace, "--stirct")
    command = python_m_gradviz("chekc", raised_trace)
    stray = python_m_gradviz("check", raised_trace, "extra")

    for result in (typo, prefix, strict, command, stray):
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert typo.stderr.startswith("usage: python -m gradviz render (SCRIPT | -m MODULE | TRACE.json)")
    assert "unrecognized argument: --colapse-modules (did you mean --collapse-modules?)" in typo.stderr
    # no silent prefix: --col is not taken for --collapse-modules; both candidates are named
    assert "unrecognized argument: --col (did you mean --color or --collapse-modules?)" in prefix.stderr
    assert strict.stderr.startswith("usage: python -m gradviz check ") and "(did you mean --strict?)" in strict.stderr
    assert "invalid choice: 'chekc'" in command.stderr and "did you mean 'check'?" in command.stderr
    assert "extra (arguments for the script go after `--`" in stray.stderr
    assert not list(Path(typo.cwd).glob("*.svg"))  # nothing ran, nothing was drawn


def test_step_beyond_the_end_of_a_saved_trace_is_said_before_anything_is_drawn(python_m_gradviz, raised_trace):
    result = python_m_gradviz("render", raised_trace, "--step", "4", "-o", "g.svg")
    syntax = python_m_gradviz("render", raised_trace, "--step", "0")

    assert result.returncode == 2
    assert result.stderr == (
        "gradviz: --step 4 does not exist: the saved trace holds 1 backward call(s) with a graph; only --step 1 exists\n"
    )
    assert not (result.cwd / "g.svg").exists()
    assert syntax.returncode == 2 and "--step: must be at least 1, got 0" in syntax.stderr


LONG_RUN = """\
import time
import torch

w = torch.ones(3, requires_grad=True)
optimizer = torch.optim.SGD([w], lr=0.1)
for step in range(6):
    loss = (w * 2).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    time.sleep(0.5)
print("done")
"""


def test_progress_lines_count_steps_and_say_when_the_run_goes_on_untraced(python_m_gradviz, tmp_path):
    write(tmp_path, "slow.py", LONG_RUN)
    env = {"GRADVIZ_PROGRESS_INTERVAL": "0.4"}
    shown = python_m_gradviz("check", "slow.py", "--steps", "3", "--progress", env=env)
    hidden = python_m_gradviz("check", "slow.py", "--steps", "3", env=env)

    assert shown.returncode == hidden.returncode == 0, shown.stderr
    lines = shown.stderr.splitlines()
    counted = [line for line in lines if re.fullmatch(r"gradviz: [12] steps? traced, \d+:\d\d elapsed", line)]
    assert counted, shown.stderr
    closed = [i for i, line in enumerate(lines) if re.fullmatch(
        r"gradviz: 3 steps traced in \d+:\d\d; running untraced from here \(the rest of the run is counted, not "
        r"recorded\)", line)]
    assert len(closed) == 1, shown.stderr
    assert lines.index(counted[0]) < closed[0]
    assert any(re.fullmatch(r"gradviz: running untraced, \d+:\d\d elapsed", line) for line in lines[closed[0]:])
    assert "done" in shown.stdout and "steps 1-3 of 6 traced" in shown.stdout
    assert shown.stdout == hidden.stdout  # progress goes to stderr only
    assert "traced" not in hidden.stderr and "elapsed" not in hidden.stderr  # stderr is no terminal, not asked


def test_a_script_too_deeply_nested_to_compile_is_a_user_error(python_m_gradviz, tmp_path):
    # 50,000 terms: Python 3.13 compiles 5,000 (its compiler's limit is higher), no Python from 3.10 to 3.13 these
    write(tmp_path, "deep.py", "x = " + "+".join(["1"] * 50_000) + "\n")
    plain = subprocess.run([sys.executable, "deep.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert plain.returncode == 1 and "RecursionError" in plain.stderr  # Python itself cannot compile it

    result = python_m_gradviz("check", "deep.py")

    assert result.returncode == 2
    assert result.stderr == (
        "gradviz: cannot compile deep.py: RecursionError: maximum recursion depth exceeded during compilation\n"
    )


def test_fifo_folder_and_device_are_refused_by_type_without_blocking(python_m_gradviz, tmp_path):
    import os
    import threading

    os.mkfifo(tmp_path / "pipe.json")
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "folder.json").mkdir()
    os.symlink("/dev/zero", tmp_path / "zero.json")

    assert python_m_gradviz("render", "pipe.json").stderr == (
        "gradviz: 'pipe.json' is not a regular file (a FIFO (named pipe)), so it is not a trace file\n"
    )
    assert python_m_gradviz("check", "pipe.py").stderr == (
        "gradviz: 'pipe.py' is not a regular file (a FIFO (named pipe)), so it is not a Python script\n"
    )
    assert python_m_gradviz("check", "folder.json").stderr == "gradviz: 'folder.json' is a folder, not a trace file\n"
    zero = python_m_gradviz("check", "zero.json")
    assert zero.returncode == 2 and "not a regular file (a device)" in zero.stderr

    # the Python API too: Trace.load returns at once with a ValueError, it never waits for a writer
    errors: list[str] = []

    def load() -> None:
        try:
            gradviz.Trace.load(tmp_path / "pipe.json")
        except ValueError as exc:
            errors.append(str(exc))

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), "Trace.load blocked on a FIFO"
    assert errors == [f"cannot read trace file {str(tmp_path / 'pipe.json')!r}: not a regular file (a FIFO (named pipe))"]


def test_a_trace_over_the_size_limit_is_refused_by_its_size_before_reading(python_m_gradviz, tmp_path, raised_trace):
    # a sparse file: its first bytes are zeros, so only a size check made before reading names the limit
    huge = tmp_path / "huge.json"
    with huge.open("wb") as stream:
        stream.truncate(3 * 2**30)
    with pytest.raises(ValueError, match=r"huge\.json is larger than the limit of 1024 MiB for a trace file"):
        gradviz.Trace.load(huge, max_bytes=2**30)

    size = raised_trace.stat().st_size
    refused = python_m_gradviz("check", raised_trace, env={"GRADVIZ_MAX_TRACE_SIZE": str(size - 1)})
    accepted = python_m_gradviz("check", raised_trace, env={"GRADVIZ_MAX_TRACE_SIZE": str(size)})
    assert refused.returncode == 2 and refused.stderr.startswith(
        f"gradviz: {raised_trace} is larger than the limit of {size - 1} bytes for a trace file; if it is one, raise "
        "the limit: GRADVIZ_MAX_TRACE_SIZE=2G on the command line"
    )
    assert accepted.returncode == 1 and "poisoned_saved_tensor" in accepted.stdout
    bad = python_m_gradviz("check", raised_trace, env={"GRADVIZ_MAX_TRACE_SIZE": "lots"})
    assert bad.returncode == 2 and "GRADVIZ_MAX_TRACE_SIZE: not a size: 'lots'" in bad.stderr


def test_trace_module_runs_a_module_as_python_m_and_records_its_bug(tmp_path, monkeypatch):
    (tmp_path / "tm_pkg").mkdir()
    write(tmp_path / "tm_pkg", "__init__.py", "")
    write(tmp_path / "tm_pkg", "train.py", textwrap.dedent("""\
        import sys
        import torch
        a = torch.tensor([1.0, 2.0], requires_grad=True)
        out = a.tanh()
        out.data.zero_()
        out.sum().backward()
        ARGS = sys.argv[1:]
        print("name", __name__, "args", ARGS)
        """))
    monkeypatch.chdir(tmp_path)

    trace = gradviz.trace_module("tm_pkg.train", ["--fast"])

    assert trace.script == str(tmp_path / "tm_pkg" / "train.py")
    assert trace.exception is None
    findings = gradviz.diagnose(trace)
    assert [(f.kind.value, f.line) for f in findings] == [("silently_corrupted_saved_tensor", 5)]
    with pytest.raises(ModuleNotFoundError, match=r"No module named tm_pkg\.nothing"):
        gradviz.trace_module("tm_pkg.nothing")


def test_step_beyond_the_window_is_said_when_the_window_closes_not_after_the_run(python_m_gradviz, tmp_path):
    # the program says it is done on stderr too, so the order of the two streams' lines is the order of events
    write(tmp_path, "slow.py", LONG_RUN.replace('print("done")', 'import sys; print("done", file=sys.stderr)'))

    result = python_m_gradviz("render", "slow.py", "--steps", "2", "--step", "5", "-o", "g.svg",
                              env={"GRADVIZ_PROGRESS_INTERVAL": "100"})

    assert result.returncode == 2
    lines = result.stderr.splitlines()
    early = ("gradviz: --step 5 is beyond the 2 backward calls traced: the window closed (2 steps). The program runs on; "
             "nothing can be drawn for that step (Ctrl-C ends it now)")
    assert lines[0] == early, result.stderr
    assert lines.index("done") > 0  # said while the program still ran
    assert lines[-1].startswith("gradviz: --step 5 does not exist: the run made 2 backward call(s) with a graph")
    assert not (tmp_path / "g.svg").exists()
