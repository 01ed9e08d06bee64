"""No hang and no lost output: outputs that cannot be written as files are refused before the script runs (a FIFO
nobody reads, a device, a folder that takes no new file), a saved trace naming a FIFO or /dev/zero as its script is
read without blocking, and `--json` / SARIF stdout holds the document alone when the program's threads and atexit
handlers print after its main code. Every command runs with a timeout: a hang fails the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT, write

TIMEOUT = 90
# proves whether the script ran: it leaves a file behind
SCRIPT = """\
import pathlib
import torch

pathlib.Path("ran.txt").write_text("ran")
w = torch.ones(3, requires_grad=True)
h = torch.tanh(w)
(h.detach() * w).sum().backward()
"""
# prints from a thread and an atexit handler after its main code
LATE = """\
import atexit
import threading
import time

import torch


def late():
    time.sleep(0.5)
    print("thread: late line")


atexit.register(lambda: print("atexit: goodbye"))
threading.Thread(target=late).start()
w = torch.ones(2, requires_grad=True)
(w * 2).sum().backward()
print("main: done")
"""


def test_a_fifo_as_output_is_refused_before_the_script_runs(gradviz_cli, tmp_path: Path) -> None:
    write(tmp_path, "train.py", SCRIPT)
    os.mkfifo(tmp_path / "p.svg")
    result = gradviz_cli("render", "train.py", "-o", "p.svg", "-o", "q.dot", timeout=TIMEOUT)
    assert result.returncode == 2
    assert result.stderr == "gradviz: cannot write p.svg: it is not a regular file (a FIFO (named pipe)); give -o a file\n"
    assert not (tmp_path / "ran.txt").exists() and not (tmp_path / "q.dot").exists()


def test_a_device_and_gradviz_own_stdout_are_refused_as_outputs(python_m_gradviz, tmp_path: Path) -> None:
    """/dev/null is a device; /dev/stdout is whatever stdout is: a pipe, a terminal, or the file the report is
    written to, which -o would overwrite (decided: refused in every case)."""
    write(tmp_path, "train.py", SCRIPT)
    os.symlink("/dev/null", tmp_path / "null.svg")
    os.symlink("/dev/stdout", tmp_path / "stdout.svg")
    device = python_m_gradviz("render", "train.py", "-o", "null.svg", timeout=TIMEOUT)
    assert (device.returncode, device.stderr) == (
        2, "gradviz: cannot write null.svg: it is not a regular file (a device); give -o a file\n",
    )
    piped = python_m_gradviz("render", "train.py", "-o", "stdout.svg", timeout=TIMEOUT)  # stdout: a pipe
    assert (piped.returncode, piped.stderr) == (
        2, "gradviz: cannot write stdout.svg: it is not a regular file (a FIFO (named pipe)); give -o a file\n",
    )
    with open(tmp_path / "report.txt", "w") as report:
        done = subprocess.run(
            [sys.executable, "-m", "gradviz", "render", "train.py", "-o", "stdout.svg"], cwd=tmp_path,
            stdout=report, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    assert (done.returncode, done.stderr) == (
        2, "gradviz: cannot write stdout.svg: it is gradviz's stdout, where its report goes\n",
    )
    assert not (tmp_path / "ran.txt").exists() and (tmp_path / "report.txt").read_text() == ""


def test_a_folder_that_takes_no_file_is_refused_before_the_script_runs(python_m_gradviz, tmp_path: Path) -> None:
    """/proc takes no new file, whoever asks; `os.access` tells root it is writable, so only trying tells."""
    write(tmp_path, "train.py", SCRIPT)
    result = python_m_gradviz("render", "train.py", "-o", "/proc/gradviz-graph.svg", timeout=TIMEOUT)
    assert result.returncode == 2
    assert result.stderr.startswith("gradviz: cannot write /proc/gradviz-graph.svg: folder /proc takes no new file (")
    assert not (tmp_path / "ran.txt").exists()


def _trace_naming(tmp_path: Path, python_m_gradviz, script: str) -> Path:
    """A saved trace of a real run (a finding at the script's line), its script and file names pointing at
    `script`, its sources emptied."""
    write(tmp_path, "train.py", SCRIPT)
    made = python_m_gradviz("render", "train.py", "-o", "made.json", timeout=TIMEOUT)
    assert made.returncode == 0, made.stderr
    text = (tmp_path / "made.json").read_text().replace(json.dumps(str(tmp_path / "train.py")), json.dumps(script))
    document = json.loads(text)
    assert document["script"] == script
    document["sources"] = {}
    saved = tmp_path / "named.json"
    saved.write_text(json.dumps(document))
    return saved


def test_a_trace_naming_dev_zero_as_its_script_is_read_without_hanging(python_m_gradviz, tmp_path: Path) -> None:
    _trace_naming(tmp_path, python_m_gradviz, "/dev/zero")
    checked = python_m_gradviz("check", "named.json", timeout=TIMEOUT)
    assert checked.returncode == 0, checked.stderr
    assert "/dev/zero:7  cut_edge" in checked.stdout  # the finding stands, its line is not quoted
    drawn = python_m_gradviz("render", "named.json", "-o", "g.svg", "-o", "g.html", timeout=TIMEOUT)
    assert drawn.returncode == 0, drawn.stderr
    assert (tmp_path / "g.svg").stat().st_size > 0 and (tmp_path / "g.html").stat().st_size > 0


def test_a_trace_naming_a_fifo_as_its_script_is_read_without_hanging(python_m_gradviz, tmp_path: Path) -> None:
    fifo = tmp_path / "source.py"
    _trace_naming(tmp_path, python_m_gradviz, str(fifo))
    os.mkfifo(fifo)
    checked = python_m_gradviz("check", "named.json", "--json", timeout=TIMEOUT)
    assert checked.returncode == 0, checked.stderr
    assert [(f["kind"], f["line"]) for f in json.loads(checked.stdout)["findings"]] == [("cut_edge", 7)]
    drawn = python_m_gradviz("render", "named.json", "-o", "g.svg", timeout=TIMEOUT)
    assert drawn.returncode == 0, drawn.stderr
    assert (tmp_path / "g.svg").stat().st_size > 0


def test_json_stdout_holds_the_document_alone_when_threads_and_atexit_print_late(gradviz_cli, tmp_path: Path) -> None:
    write(tmp_path, "late.py", LATE)
    plain = subprocess.run([sys.executable, "late.py"], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert plain.stdout == "main: done\nthread: late line\natexit: goodbye\n"  # Python: all three, in this order
    for flags in (["--json"], ["--format", "sarif"]):
        result = gradviz_cli("check", "late.py", *flags, timeout=TIMEOUT)
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)  # the whole of stdout is one document
        assert document.get("findings", document.get("runs")) is not None
        # the program's output, whole and in Python's order, on stderr
        assert result.stderr == plain.stdout, result.stderr


def test_json_without_late_printers_gives_stdout_back(python_m_gradviz, tmp_path: Path) -> None:
    """The program's main-code output goes to stderr; nothing is held after it ends."""
    write(tmp_path, "train.py", SCRIPT.replace("import torch\n", "import torch\nprint('hello')\n"))
    result = python_m_gradviz("check", "train.py", "--json", timeout=TIMEOUT)
    assert result.returncode == 0 and result.stderr == "hello\n"
    assert [(f["kind"], f["line"]) for f in json.loads(result.stdout)["findings"]] == [("cut_edge", 8)]
