"""The trace files the command line writes load everywhere; the size limit can be raised from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gradviz
from gradviz import Trace

from .conftest import GALLERY, write

TRAIN = """\
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(5):
    opt.zero_grad()
    hidden = model[1](model[0](x))
    loss = torch.nn.functional.mse_loss(model[2](hidden.detach()), y)
    loss.backward()
    opt.step()
print(f"loss {loss.item():.4f}")
"""


def test_render_json_output_is_a_loadable_trace(python_m_gradviz, tmp_path: Path) -> None:
    write(tmp_path, "train.py", TRAIN)
    result = python_m_gradviz("render", "train.py", "-o", "train.json", "-q")
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / "train.json").read_text(encoding="utf-8"))
    assert (document["format"], document["format_version"], document["view"]) == ("gradviz-trace", 2, "graph")
    # one dead_parameter finding for the cut, naming every parameter it starves
    assert [f["kind"] for f in document["findings"]] == ["dead_parameter", "cut_edge"]
    assert [f.get("parameters") for f in document["findings"]] == [["model.0.weight", "model.0.bias"], None]
    assert {f["line"] for f in document["findings"]} == {9}  # the hidden.detach() line

    trace = Trace.load(tmp_path / "train.json")  # the same file, read as a trace: view and findings are extras
    assert len(trace.events_of("optimizer_step")) == 5
    assert trace.tensor("0.weight").parameter == "model.0.weight"
    # the analysis of the loaded trace finds what the run found
    assert [(f.kind.value, f.parameter, f.line) for f in gradviz.diagnose(trace)] == [
        (f["kind"], f.get("parameter"), f["line"]) for f in document["findings"]
    ]


def test_render_json_of_a_failing_script_loads(python_m_gradviz) -> None:
    result = python_m_gradviz("render", GALLERY / "plot_03_detach_raises.py", "-o", "raises.json", "-q")
    assert result.returncode == 1
    trace = Trace.load(result.cwd / "raises.json")
    assert trace.exception is not None and trace.exception.type == "RuntimeError"
    assert trace.exception.location is not None and trace.exception.location.line == 31


def _load_in_subprocess(path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = "import sys, gradviz\ntry:\n    t = gradviz.Trace.load(sys.argv[1])\nexcept ValueError as e:\n    sys.exit(str(e))\nprint(len(t.tensors))"
    return subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True, timeout=120)


def test_the_size_limit_is_raised_from_the_environment(tmp_path: Path) -> None:
    import os

    path = tmp_path / "t.json"
    trace = gradviz.trace_script(GALLERY / "plot_02_data_silent.py")
    trace.to_json(path)
    size = path.stat().st_size
    env = {k: v for k, v in os.environ.items() if k != "GRADVIZ_MAX_TRACE_SIZE"}

    low = _load_in_subprocess(path, {**env, "GRADVIZ_MAX_TRACE_SIZE": "1K"})
    assert size > 1024
    assert low.returncode == 1
    assert low.stderr.strip() == (
        f"{path} is larger than the limit of 1024 bytes for a trace file; if it is one, raise the limit: "
        "GRADVIZ_MAX_TRACE_SIZE=2G on the command line, Trace.load(path, max_bytes=...) in Python"
    )
    raised = _load_in_subprocess(path, {**env, "GRADVIZ_MAX_TRACE_SIZE": "1M"})
    assert raised.returncode == 0 and raised.stdout.strip() == str(len(trace.tensors))
    bad = _load_in_subprocess(path, {**env, "GRADVIZ_MAX_TRACE_SIZE": "lots"})
    assert bad.returncode == 1
    assert bad.stderr.strip() == "GRADVIZ_MAX_TRACE_SIZE: not a size: 'lots' (write it as bytes, or with K, M, G: 800M, 2G)"


def test_check_reads_a_saved_trace_within_the_size_limit(python_m_gradviz, tmp_path: Path) -> None:
    trace = gradviz.trace_script(GALLERY / "plot_02_data_silent.py")
    trace.to_json(tmp_path / "saved.json")
    size = (tmp_path / "saved.json").stat().st_size

    refused = python_m_gradviz("check", "saved.json", env={"GRADVIZ_MAX_TRACE_SIZE": str(size - 1)})
    assert refused.returncode == 2
    assert f"saved.json is larger than the limit of {size - 1} bytes for a trace file" in refused.stderr
    assert "GRADVIZ_MAX_TRACE_SIZE=2G" in refused.stderr

    checked = python_m_gradviz("check", "saved.json", env={"GRADVIZ_MAX_TRACE_SIZE": str(size)})
    assert checked.returncode == 1, checked.stderr  # an error finding
    assert "silently_corrupted_saved_tensor" in checked.stdout


def test_check_reads_the_older_render_json_wrapper(python_m_gradviz, tmp_path: Path) -> None:
    v1 = json.loads((Path(__file__).parents[1] / "tracer" / "data" / "trace_v1.json").read_text(encoding="utf-8"))
    write(tmp_path, "old.json", json.dumps({"view": "graph", "trace": v1, "findings": []}))
    result = python_m_gradviz("check", "old.json")
    assert result.returncode == 1, result.stderr
    assert "silently_corrupted_saved_tensor" in result.stdout


def test_check_refuses_a_trace_without_its_events_rather_than_finding_nothing(python_m_gradviz, tmp_path: Path) -> None:
    saved = python_m_gradviz("render", str(GALLERY / "plot_02_data_silent.py"), "-q", "-o", "saved.json")
    assert saved.returncode == 0, saved.stderr
    document = json.loads((tmp_path / "saved.json").read_text(encoding="utf-8"))
    for field in ("events", "internal_errors"):
        write(tmp_path, f"no_{field}.json", json.dumps({k: v for k, v in document.items() if k != field}))

        result = python_m_gradviz("check", f"no_{field}.json")

        assert result.returncode == 2, result.stdout
        assert "no problems found" not in result.stdout
        assert result.stderr.strip() == (f"gradviz: no_{field}.json: '{field}' is missing (required in format "
                                         "version 2; docs/trace-format.md lists the optional fields)")
