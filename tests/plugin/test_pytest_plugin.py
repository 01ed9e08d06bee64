"""The pytest plugin, as users run it: `pytest --gradviz`, the marker, the fixture, reports and xdist, in subprocesses."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test starts pytest (and torch) in a subprocess

TESTS = textwrap.dedent(
    '''
    import gc
    import weakref

    import pytest
    import torch


    def test_data_bug():
        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.tanh()
        c = out.data
        c.zero_()
        out.sum().backward()


    def test_clean_training_loop():
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            loss = model(torch.randn(4, 3)).pow(2).mean()
            loss.backward()
            opt.step()
        assert model[0].weight.grad is not None


    def test_already_failing():
        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.tanh()
        c = out.detach()
        c.zero_()
        out.sum().backward()


    def test_dead_parameter_is_a_warning():
        layer1, layer2 = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
        hidden = layer1(torch.ones(1, 2)).detach()
        layer2(hidden).sum().backward()


    @pytest.mark.gradviz(allow=["silently_corrupted_saved_tensor"])
    def test_marked_allowed():
        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.tanh()
        out.data.zero_()
        out.sum().backward()


    @pytest.mark.gradviz
    def test_marked_bug():
        w = torch.ones(3, requires_grad=True)
        y = w.exp()
        y.data.mul_(2)
        y.sum().backward()


    @pytest.mark.gradviz(allow=["silently_corrupted_saved_tensor"])
    def test_fixture(gradviz_trace):
        import gradviz

        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.tanh()
        c = out.data
        c.zero_()
        out.sum().backward()
        (found,) = gradviz.diagnose(gradviz_trace)
        assert (found.kind.value, found.code.strip()) == ("silently_corrupted_saved_tensor", "c.zero_()")
        c_record, out_record = gradviz_trace.tensor("c"), gradviz_trace.tensor("out")
        assert c_record.origin == "data" and c_record.version_counter != out_record.version_counter
        (write,) = gradviz_trace.events_of("inplace_write")
        # c moved to v1; out, whose bytes are the same, stayed at v0: autograd cannot notice
        assert {(v.tensor, v.before, v.after) for v in write.versions} == {(c_record.id, 0, 1), (out_record.id, 0, 0)}


    def test_skipped():
        pytest.skip("not today")


    @pytest.mark.xfail(reason="known")
    def test_expected_failure():
        assert torch.ones(1).item() == 2


    KEPT = []


    def test_big_activation():
        x = torch.randn(256, 256, requires_grad=True)
        y = x.tanh() * 2
        KEPT.append(weakref.ref(y))
        y.sum().backward()


    def test_nothing_kept_alive():
        gc.collect()
        assert [ref() for ref in KEPT] == [None] * len(KEPT)  # xdist may have run the other test elsewhere


    @pytest.mark.parametrize("n", [1, 2])
    def test_printing(n, capsys):
        print(torch.arange(n).sum().item())
        assert capsys.readouterr().out == f"{n * (n - 1) // 2}\\n"
    '''
).lstrip("\n")



def _line(test: str, code: str) -> int:
    """The line of TESTS holding `code` (stripped) inside the function `test`."""
    lines = TESTS.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"def {test}("))
    return next(i + 1 for i in range(start, len(lines)) if lines[i].strip() == code)


DATA_WRITE = _line("test_data_bug", "c.zero_()")
DETACH_WRITE = _line("test_already_failing", "c.zero_()")
MARKED_WRITE = _line("test_marked_bug", "y.data.mul_(2)")


@dataclass
class Run:
    returncode: int
    output: str
    outcomes: dict[str, str]  # test name -> passed / failed / skipped
    messages: dict[str, str]  # test name -> failure message and text
    folder: Path


def run_pytest(folder: Path, *args: str) -> Run:
    (folder / "test_train.py").write_text(TESTS, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "FORCE_COLOR", "NO_COLOR"))}
    env["COLUMNS"] = "200"  # the short summary is cut to the terminal's width
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--junitxml=junit.xml", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    outcomes: dict[str, str] = {}
    messages: dict[str, str] = {}
    for case in ET.parse(folder / "junit.xml").getroot().iter("testcase"):
        name = case.get("name", "")
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"error": "failed", "failure": "failed"}.get(child.tag, "skipped")
                messages[name] = (child.get("message") or "") + "\n" + (child.text or "")
        outcomes[name] = outcome
    return Run(proc.returncode, proc.stdout + proc.stderr, outcomes, messages, folder)


UNTRACED = {
    "test_data_bug": "passed",
    "test_clean_training_loop": "passed",
    "test_already_failing": "failed",
    "test_dead_parameter_is_a_warning": "passed",
    "test_marked_allowed": "passed",
    "test_marked_bug": "failed",  # the marker traces it without --gradviz
    "test_fixture": "passed",
    "test_skipped": "skipped",
    "test_expected_failure": "skipped",
    "test_big_activation": "passed",
    "test_nothing_kept_alive": "passed",  # gradviz keeps no tensor of a test alive
    "test_printing[1]": "passed",
    "test_printing[2]": "passed",
}


@pytest.fixture(scope="module")
def with_flag(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_pytest(tmp_path_factory.mktemp("flag"), "--gradviz", "--gradviz-report", "reports")


def test_without_the_flag_only_the_marked_test_is_checked(tmp_path):
    run = run_pytest(tmp_path)

    assert run.outcomes == UNTRACED
    message = run.messages["test_marked_bug"]
    assert message.startswith(f"Failed: gradviz: silently_corrupted_saved_tensor at test_train.py:{MARKED_WRITE}\n")
    assert "gradviz" not in run.messages["test_already_failing"]  # unmarked: no section, no tracing
    assert "------ gradviz" not in run.output.split("test_already_failing", 1)[1].split("test_marked_bug")[0]


def test_flag_fails_the_data_bug_with_the_check_commands_text(with_flag):
    expected = dict(UNTRACED, test_data_bug="failed")
    assert with_flag.outcomes == expected
    assert with_flag.returncode == 1
    message = with_flag.messages["test_data_bug"]
    assert message.startswith(f"Failed: gradviz: silently_corrupted_saved_tensor at test_train.py:{DATA_WRITE}\n")
    assert "the test itself passed; its run has 1 error:" in message
    # the finding exactly as `gradviz check` prints it: kind, file:line, source line, message, fix
    assert f"error  test_train.py:{DATA_WRITE}  silently_corrupted_saved_tensor\n" in message
    assert f"\n  {DATA_WRITE:>5} | c.zero_()\n" in message
    assert f"  `out`, saved by TanhBackward0 for backward at v0, had its bytes changed at line {DATA_WRITE} through `c`" in message
    assert "\n  fix: Use `.detach()` instead of `.data`" in message
    assert "traceback" not in message  # the findings are the whole story: no frames of gradviz's hook
    summary = re.search(r"^FAILED test_train.py::test_data_bug - (.*)$", with_flag.output, re.M)
    assert summary and summary.group(1).startswith("Failed: gradviz: silently_corrupted_saved_tensor at test_train")
    # a warning alone does not fail without --gradviz-strict
    assert with_flag.outcomes["test_dead_parameter_is_a_warning"] == "passed"


def test_a_test_failing_for_its_own_reason_keeps_its_failure_and_gets_the_findings(with_flag):
    message = with_flag.messages["test_already_failing"]
    assert message.startswith("RuntimeError: one of the variables needed for gradient computation")
    section = with_flag.output.split("- gradviz findings -", 1)[1]
    assert section.lstrip("-\n").startswith(f"error  test_train.py:{DETACH_WRITE}  poisoned_saved_tensor")
    # the traceback is the one pytest shows untraced: none of the tracer's frames
    failure = with_flag.output.split("__ test_already_failing __", 1)[1].split("- gradviz findings -")[0]
    assert "out.sum().backward()" in failure and "_engine_run_backward" in failure
    assert "gradviz/tracer" not in failure and "handle_torch_function" not in failure


def test_marker_allow_and_fixture(with_flag):
    assert with_flag.outcomes["test_marked_allowed"] == "passed"
    assert with_flag.outcomes["test_fixture"] == "passed"  # its asserts on the trace held
    assert with_flag.outcomes["test_marked_bug"] == "failed"


def test_report_is_written_for_each_failing_traced_test(with_flag):
    reports = sorted(p.name for p in (with_flag.folder / "reports").iterdir())
    assert reports == [
        "test_train.py__test_already_failing.html",
        "test_train.py__test_data_bug.html",
        "test_train.py__test_marked_bug.html",
    ]
    page = (with_flag.folder / "reports" / "test_train.py__test_data_bug.html").read_text(encoding="utf-8")
    assert "<title>gradviz report: test_train.py::test_data_bug</title>" in page
    assert "silently_corrupted_saved_tensor" in page and "TanhBackward0" in page and 'id="gv-data"' in page  # the explorer's document
    assert "wrote reports/test_train.py__test_data_bug.html" in with_flag.output


def test_strict_fails_warnings_and_xdist_gives_the_same_outcomes(tmp_path):
    run = run_pytest(tmp_path, "--gradviz-strict", "-n", "2")

    expected = dict(UNTRACED, test_data_bug="failed", test_dead_parameter_is_a_warning="failed")
    assert run.outcomes == expected
    assert "bringing up nodes..." in run.output and re.search(r"^\[gw[01]\] linux", run.output, re.M)  # xdist ran it
    message = run.messages["test_dead_parameter_is_a_warning"]
    dead_line = _line("test_dead_parameter_is_a_warning", "hidden = layer1(torch.ones(1, 2)).detach()")
    # one finding for the cut, naming both parameters it starves, grouped by module
    assert message.startswith(f"Failed: gradviz: dead_parameter at test_train.py:{dead_line}\n")
    assert "the test itself passed; its run has 1 warning (strict: warnings fail too):" in message
    assert f"warning  test_train.py:{dead_line}  dead_parameter  (layer1: weight, bias)" in message
    assert "cut_edge" not in message  # info never fails a test
    assert f"error  test_train.py:{DATA_WRITE}  silently_corrupted_saved_tensor" in run.messages["test_data_bug"]


def test_bad_marker_options_are_one_clear_error(tmp_path):
    (tmp_path / "test_bad.py").write_text(
        "import pytest\n\n@pytest.mark.gradviz(allow=['cut_edges'])\ndef test_x():\n    pass\n", encoding="utf-8"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_bad.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1
    assert "@pytest.mark.gradviz(allow=...): unknown finding kind 'cut_edges'; the kinds are cut_edge, " in proc.stdout
    assert "Traceback" not in proc.stdout and "gradviz/integrations/pytest_plugin.py" not in proc.stdout


def test_plugin_load_imports_no_torch():
    code = "import sys, pytest, gradviz.integrations.pytest_plugin; print(sorted(m for m in ('torch', 'networkx') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "[]", proc.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True, timeout=120
    ).stdout
    assert "--gradviz " in listed and "--gradviz-strict" in listed and "--gradviz-report=DIR" in listed
