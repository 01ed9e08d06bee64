"""The script runs as `python script.py args...` would; exit codes, progress and help follow the issue."""

from __future__ import annotations

import json
import re

import pytest

from gradviz import __version__

from .conftest import GALLERY, write

SCRIPT = """\
import os, sys
import torch
import helper

print("argv0", sys.argv[0] == "project/train.py")
print("argv", sys.argv[1:])
print("path0", sys.path[0] == os.path.dirname(os.path.abspath(__file__)))
print("helper", helper.VALUE)
x = torch.ones(2, requires_grad=True)
(x * 3).sum().backward()
if __name__ == "__main__":
    print("main block ran")
    os.chdir(os.path.dirname(os.path.abspath(__file__)) + "/sub")  # the output still lands where gradviz started
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else None)
"""


@pytest.fixture
def project(tmp_path):
    folder = tmp_path / "project"
    (folder / "sub").mkdir(parents=True)
    write(folder, "helper.py", "VALUE = 42\n")
    write(folder, "train.py", SCRIPT)
    return folder


def test_script_runs_like_python_with_its_arguments_imports_and_main_block(gradviz_cli, project, tmp_path):
    result = gradviz_cli("render", "project/train.py", "-o", "out.dot", "--", "0", "--lr", "0.1", "--", "x")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:6] == [
        "argv0 True",  # python itself keeps it as typed; runpy.run_path makes it absolute
        "argv ['0', '--lr', '0.1', '--', 'x']",
        "path0 True",
        "helper 42",
        "main block ran",
        "gradviz: wrote out.dot",
    ]
    assert (tmp_path / "out.dot").read_text().startswith("digraph")
    assert not (project / "sub" / "out.dot").exists()


def test_system_exit_keeps_the_scripts_code_and_still_writes(python_m_gradviz, project, tmp_path):
    # (exit code 0 -> 0 is the test above)
    result = python_m_gradviz("render", "project/train.py", "-o", "g.json", "-q", "--", "4")

    assert result.returncode == 4
    assert result.stderr == ""
    payload = json.loads((tmp_path / "g.json").read_text())
    assert payload["exception"]["type"] == "SystemExit"
    assert payload["exception"]["message"] == "4"


def test_system_exit_with_a_message_prints_it_and_exits_1(python_m_gradviz, tmp_path):
    write(tmp_path, "quit.py", "import sys\nsys.exit('giving up')\n")
    render = python_m_gradviz("render", "quit.py", "-o", "q.dot", "-q")
    check = python_m_gradviz("check", "quit.py", "--json")

    assert render.returncode == 1 and render.stderr.splitlines()[-1] == "giving up"
    assert check.returncode == 1
    assert json.loads(check.stdout)["exception"] == {"type": "SystemExit", "message": "giving up", "line": 2}


def test_check_exit_status_on_a_clean_script_and_on_a_failing_one(python_m_gradviz, project):
    clean = python_m_gradviz("check", "project/train.py")
    failing = python_m_gradviz("check", "project/train.py", "--", "3")

    assert clean.returncode == 0
    assert clean.stdout.splitlines()[-1] == "project/train.py: no problems found"
    assert failing.returncode == 1
    assert failing.stdout.splitlines()[-1] == (
        "project/train.py: 0 errors, 0 warnings, 0 info; the script exited with status 3"
    )


def test_check_json_sends_every_kind_of_script_output_to_stderr(python_m_gradviz, tmp_path):
    write(
        tmp_path,
        "noisy.py",
        "import os, subprocess, sys, torch\n"
        "print('from print')\n"
        "os.write(1, b'from the file descriptor\\n')\n"
        "subprocess.run([sys.executable, '-c', 'print(\"from a child process\")'])\n"
        "sys.stdout.write('no newline')\n",
    )
    result = python_m_gradviz("check", "noisy.py", "--json")

    assert result.returncode == 0
    assert json.loads(result.stdout)["findings"] == []
    for text in ("from print", "from the file descriptor", "from a child process", "no newline"):
        assert text in result.stderr


def test_progress_and_colour_show_on_a_terminal_not_with_quiet_or_no_color(python_m_gradviz):
    # FORCE_COLOR makes rich treat stdout and stderr as terminals
    script = GALLERY / "plot_02_data_silent.py"
    verbose = python_m_gradviz("render", script, "-o", "g.dot", env={"FORCE_COLOR": "1"})
    quiet = python_m_gradviz("check", script, "-q", env={"FORCE_COLOR": "1", "NO_COLOR": "1"})

    assert f"gradviz: running {script} under the tracer..." in verbose.stderr
    assert "gradviz: analysing the trace..." in verbose.stderr
    assert "gradviz: laying out the graph view..." in verbose.stderr
    assert "\x1b[1;31merror" in verbose.stdout  # the finding's severity in red
    assert "under the tracer" not in quiet.stderr and "analysing" not in quiet.stderr
    assert "silently_corrupted_saved_tensor" in quiet.stdout
    assert "\x1b[1;31m" not in quiet.stdout and "\x1b[31m" not in quiet.stdout  # NO_COLOR


def test_version(gradviz_cli):
    result = gradviz_cli("--version")

    assert result.returncode == 0
    assert result.stdout.strip() == f"gradviz {__version__}"


def test_help_lists_commands_and_render_help_describes_every_option_with_examples(gradviz_cli):
    top = gradviz_cli("--help")
    render = gradviz_cli("render", "--help")
    check = gradviz_cli("check", "--help")

    assert top.returncode == render.returncode == check.returncode == 0
    prog = "gradviz" if gradviz_cli.form == "gradviz" else "python -m gradviz"
    assert top.stdout.startswith(f"usage: {prog} ")
    assert re.search(r"^\s+render\s+run a script", top.stdout, re.M)
    assert re.search(r"^\s+check\s+run a script", top.stdout, re.M)
    # each option with its value's name: `-o OUT, --output OUT` up to Python 3.12, `-o, --output OUT` from 3.13
    for option in (r"-o( OUT)?, --output OUT", r"--view \{graph,memory,timeline,report,graph-memory\}",
                   "--max-nodes N", "--depth N", "--collapse-modules", "--show-saved, --no-show-saved", "--quiet"):
        assert re.search(rf"^  {option}(,|  |$)", render.stdout, re.M), option
    examples = render.stdout[render.stdout.index("examples:") :]
    for example in ("-o graph.png", "--view memory", "--view report", "--max-nodes 200", "--depth 1",
                    "--no-show-saved", "-q -- --epochs 1"):
        assert f"gradviz render train.py {example}" in re.sub(r" +", " ", examples)
    for option in ("--json", "--strict", "--quiet"):
        assert option in check.stdout
    assert "exit status: 0 no error finding" in check.stdout
