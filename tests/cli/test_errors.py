"""What the command does with scripts it cannot run, bad options, unwritable outputs and a missing `dot`."""

from __future__ import annotations

import json
import sys

import pytest

from .conftest import GALLERY, svg_texts, write

DATA = GALLERY / "plot_02_data_silent.py"
NO_TENSORS = 'print("no torch here")\n'


def one_line_error(result) -> str:
    """The single `gradviz: ...` line a usage error prints on stderr (and nothing like a traceback)."""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gradviz: ")
    return lines[0]


@pytest.mark.parametrize("command", ["render", "check"])
def test_missing_script(gradviz_cli, command):
    result = gradviz_cli(command, "nowhere.py")

    assert result.returncode == 2
    assert one_line_error(result) == "gradviz: no such script: 'nowhere.py'"
    assert result.stdout == ""


def test_not_a_python_file(gradviz_cli, tmp_path):
    write(tmp_path, "notes.txt", "print('valid Python, wrong suffix')\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "blob.py").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\xff\xfe")

    for name, why in [("notes.txt", "expected a .py script"), ("folder", "is a folder"), ("blob.py", "not a Python file")]:
        result = gradviz_cli("render", name)
        assert result.returncode == 2, name
        line = one_line_error(result)
        assert repr(name) in line and why in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob.py", "folder", "notes.txt"]  # nothing written


@pytest.mark.parametrize("command", ["render", "check --json"])
def test_syntax_error_names_file_and_line(gradviz_cli, tmp_path, command):
    write(tmp_path, "broken.py", "import torch\nx = torch.ones(3\nprint(x)\n")
    result = gradviz_cli(*command.split(), "broken.py")

    assert result.returncode == 2
    line = one_line_error(result)
    assert line.startswith("gradviz: syntax error in broken.py:2: ")
    assert "never closed" in line
    assert result.stdout == ""


def test_syntax_error_raised_by_the_script_while_running_is_a_script_failure(python_m_gradviz, tmp_path):
    # compile() of bad text at run time is the script's own error, not "cannot run"
    write(tmp_path, "runtime_syntax.py", "import torch\nt = torch.ones(2)\ncompile('x = (', 'inner', 'exec')\n")
    result = python_m_gradviz("check", "runtime_syntax.py", "--json")

    assert result.returncode == 1
    assert json.loads(result.stdout)["exception"]["type"] == "SyntaxError"
    assert json.loads(result.stdout)["exception"]["line"] == 3


def test_unknown_view_and_bad_max_nodes_are_usage_errors(gradviz_cli):
    bad_view = gradviz_cli("render", DATA, "--view", "sideways")
    bad_count = gradviz_cli("render", DATA, "--max-nodes", "0")

    assert bad_view.returncode == 2 and bad_count.returncode == 2
    assert "invalid choice: 'sideways' (choose from 'graph', 'memory', 'timeline', 'report', 'graph-memory')" in bad_view.stderr
    assert "--max-nodes: must be at least 1, got 0" in bad_count.stderr
    assert "Traceback" not in bad_view.stderr + bad_count.stderr
    assert bad_view.stdout == bad_count.stdout == ""  # refused before running the script


def test_unknown_output_format_names_the_choices(gradviz_cli):
    result = gradviz_cli("render", DATA, "-o", "picture.gif")

    assert result.returncode == 2
    assert one_line_error(result) == (
        "gradviz: cannot tell the output format of 'picture.gif' ('.gif'): use one of "
        ".svg, .png, .pdf, .dot, .json, .html"
    )
    assert result.stdout == ""  # the script did not run


def test_unwritable_output_paths(gradviz_cli, tmp_path):
    write(tmp_path, "afile", "")
    (tmp_path / "adir.svg").mkdir()

    cases = {
        "missing/out.svg": "cannot write missing/out.svg: folder missing does not exist",
        "afile/out.svg": "cannot write afile/out.svg: afile is not a folder",
        "adir.svg": "cannot write adir.svg: it is a folder",
    }
    for output, message in cases.items():
        result = gradviz_cli("render", DATA, "-o", output)
        assert result.returncode == 2
        assert one_line_error(result) == f"gradviz: {message}"
        assert result.stdout == ""


def test_missing_dot_still_writes_the_dot_file_and_says_how_to_install(gradviz_cli, tmp_path):
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    result = gradviz_cli("render", DATA, "-o", "graph.svg", env={"PATH": str(empty_bin)})

    assert result.returncode == 2
    line = one_line_error(result)
    assert "Graphviz's `dot` program was not found" in line
    assert "wrote the DOT source to graph.dot" in line
    assert "apt-get install graphviz" in line
    assert not (tmp_path / "graph.svg").exists()
    assert (tmp_path / "graph.dot").read_text().startswith("digraph")
    assert "silently_corrupted_saved_tensor" in result.stdout  # the findings are still reported


@pytest.mark.dot
def test_script_without_tensors_writes_an_empty_diagram_and_says_so(gradviz_cli, tmp_path):
    write(tmp_path, "plain.py", NO_TENSORS)
    result = gradviz_cli("render", "plain.py")

    assert result.returncode == 0
    assert result.stdout.splitlines() == ["no torch here", "gradviz: wrote plain.gradviz.svg"]
    assert one_line_error(result) == (
        "gradviz: warning: plain.py created no tensors, so there is nothing to draw or check"
    )
    assert svg_texts(tmp_path / "plain.gradviz.svg")[0] == "plain.py"


@pytest.mark.dot
def test_the_empty_diagram_carries_the_no_tensors_message(python_m_gradviz, tmp_path):
    write(tmp_path, "plain.py", NO_TENSORS)
    python_m_gradviz("render", "plain.py", "-q")

    texts = svg_texts(tmp_path / "plain.gradviz.svg")
    assert any("no tensors" in t for t in texts), texts


def test_check_on_script_without_tensors_finds_nothing(python_m_gradviz, tmp_path):
    write(tmp_path, "plain.py", NO_TENSORS)
    result = python_m_gradviz("check", "plain.py", "--json")

    assert result.returncode == 0
    assert json.loads(result.stdout) == {"gradviz": "0.1.0", "script": "plain.py", "exception": None, "findings": []}
    assert result.stderr.splitlines() == [
        "no torch here",
        "gradviz: warning: plain.py created no tensors, so there is nothing to draw or check",
    ]


def test_no_command_and_unknown_command(gradviz_cli):
    bare = gradviz_cli()
    unknown = gradviz_cli("draw", "x.py")

    assert bare.returncode == 2 and unknown.returncode == 2
    assert "the following arguments are required: COMMAND" in bare.stderr
    assert "invalid choice: 'draw'" in unknown.stderr


def test_internal_error_is_one_line_with_a_hint_and_exit_3(tmp_path, monkeypatch, capsys):
    """A bug in the analysis: the diagram is still written, then one line and exit 3 (run in-process)."""
    import importlib

    from gradviz.cli import command as cli

    def broken(trace):
        raise KeyError("boom")

    monkeypatch.setattr(importlib.import_module("gradviz.analysis"), "diagnosis", broken)
    monkeypatch.chdir(tmp_path)
    status = cli.main(["render", str(DATA), "-o", "out.dot"])

    err = capsys.readouterr().err
    assert status == 3
    assert err.splitlines() == [
        "gradviz: internal error: KeyError: 'boom'",
        "gradviz: this is a bug in gradviz: please report it with the command you ran "
        "(GRADVIZ_DEBUG=1 shows the traceback)",
    ]
    assert (tmp_path / "out.dot").read_text().startswith("digraph")


def test_internal_error_in_rendering_writes_the_trace(tmp_path, monkeypatch, capsys):
    import importlib

    from gradviz import model
    from gradviz.cli import command as cli

    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    # `gradviz.render` is the function; the subpackage is reached through importlib
    monkeypatch.setattr(importlib.import_module("gradviz.render"), "render", broken)
    monkeypatch.chdir(tmp_path)
    status = cli.main(["render", str(DATA), "-q"])

    err = capsys.readouterr().err
    assert status == 3
    assert "gradviz: wrote the trace to plot_02_data_silent.gradviz.trace.json" in err
    assert "gradviz: internal error: ZeroDivisionError: division by zero" in err
    trace = model.Trace.load(tmp_path / "plot_02_data_silent.gradviz.trace.json")
    assert trace.tensor("out").names == ["out"]


def test_importing_the_cli_is_light():
    import subprocess

    code = "import gradviz.cli, gradviz.cli.runner_options, sys; print(sorted({'torch', 'IPython', 'rich'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_outputs_in_each_format(tmp_path, monkeypatch, capsys):
    """The suffix picks the format; the report defaults to .html (in-process: the format, not the start, matters)."""
    from gradviz.cli import command as cli

    monkeypatch.chdir(tmp_path)
    statuses = [
        cli.main(["render", str(DATA), "-o", "g.dot", "-q"]),
        cli.main(["render", str(DATA), "-o", "g.json", "-q"]),
        cli.main(["render", str(DATA), "--view", "report", "-q"]),
    ]

    assert statuses == [0, 0, 0]
    assert capsys.readouterr().err == ""
    assert (tmp_path / "g.dot").read_text().startswith("digraph")
    payload = json.loads((tmp_path / "g.json").read_text())
    assert [f["kind"] for f in payload["findings"]] == ["silently_corrupted_saved_tensor"]
    page = (tmp_path / "plot_02_data_silent.gradviz.html").read_text()
    assert page.lstrip().lower().startswith("<!doctype html")
    assert "silently_corrupted_saved_tensor" in page
