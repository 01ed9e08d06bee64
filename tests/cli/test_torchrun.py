"""Under torchrun every rank writes its own files and rank 0 prints one summary of all ranks (issue 11.5): a real
2-process DDP training run with the gloo backend on the loopback interface."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import svg_texts, write

pytestmark = pytest.mark.slow

DDP_TRAIN = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(8, 4)
    out = model(x).tanh()
    if rank == 1 and step == 2:
        out.data.zero_()  # a bug on rank 1 only
    loss = out.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"rank {rank} trained")
dist.destroy_process_group()
"""


def _torchrun(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "GRADVIZ_DEBUG")}
    env.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", GRADVIZ_RANK_TIMEOUT="60")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "--local-addr", "127.0.0.1", "-m", "gradviz", *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)


def test_each_rank_writes_its_own_files_and_rank_0_sums_up(tmp_path):
    write(tmp_path, "ddp_train.py", DDP_TRAIN)
    result = _torchrun(tmp_path, "render", "ddp_train.py", "-o", "graph.{rank}.svg", "-o", "trace.json")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # the ranks share one pipe: the program's own lines are there, whichever rank's write lands first
    assert "rank 0 trained" in result.stdout and "rank 1 trained" in result.stdout
    assert "[rank 0] gradviz: wrote graph.0.svg" in lines and "[rank 1] gradviz: wrote graph.1.svg" in lines
    # a name without {rank} gets the rank before its suffix, so no rank overwrites another's file
    assert "[rank 0] gradviz: wrote trace.rank0.json" in lines and "[rank 1] gradviz: wrote trace.rank1.json" in lines
    for rank in (0, 1):
        assert "TanhBackward0" in svg_texts(tmp_path / f"graph.{rank}.svg")
        assert json.loads((tmp_path / f"trace.rank{rank}.json").read_text())
    summary = lines.index("gradviz: all 2 ranks: rank 0: 0 errors, 0 warnings, 0 info; rank 1: 1 error, 0 warnings, 0 info")
    # the finding in full, as `gradviz check` prints it, labelled with the rank that had it
    assert lines[summary + 1] == "error  ddp_train.py:14  silently_corrupted_saved_tensor  [rank 1]"
    assert lines[summary + 2].split("|", 1)[1].strip().startswith("out.data.zero_()")
    assert not list(Path(tmp_path).glob("*.gradviz.svg"))


def test_check_json_under_torchrun_is_one_document_with_every_rank(tmp_path):
    write(tmp_path, "ddp_train.py", DDP_TRAIN)
    result = _torchrun(tmp_path, "check", "ddp_train.py", "--json")

    assert result.returncode == 1, result.stderr  # rank 1's error finding fails the check
    document = json.loads(result.stdout)  # exactly one document on stdout, from rank 0
    assert document["world_size"] == 2
    assert document["ranks"] == [{"rank": 0, "exception": None, "exit_status": 0},
                                 {"rank": 1, "exception": None, "exit_status": 0}]
    assert [(f["kind"], f["line"], f["ranks"]) for f in document["findings"]] == [("silently_corrupted_saved_tensor", 14, [1])]
    assert "rank 0 trained" in result.stderr and "rank 1 trained" in result.stderr


def _torchrun_env(tmp_path: Path, extra: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "GRADVIZ_DEBUG")}
    env.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", **extra)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "--local-addr", "127.0.0.1", "-m", "gradviz", *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)


def test_each_rank_trace_holds_that_rank_s_own_run(tmp_path):
    import gradviz

    write(tmp_path, "ddp_train.py", DDP_TRAIN)
    result = _torchrun_env(tmp_path, {"GRADVIZ_RANK_TIMEOUT": "60"}, "render", "ddp_train.py", "-o", "run.json", "-q")

    assert result.returncode == 0, result.stderr
    found = {}
    for rank in (0, 1):
        trace = gradviz.Trace.load(tmp_path / f"run.rank{rank}.json")
        assert trace.script == str(tmp_path / "ddp_train.py")
        assert len(trace.events_of(gradviz.EventKind.OPTIMIZER_STEP)) == 3  # the three steps of that rank
        assert len(trace.events_of(gradviz.EventKind.BACKWARD)) == 3
        found[rank] = [(f.kind.value, f.line) for f in gradviz.diagnose(trace)]
        data_reads = [e.location.line for e in trace.events_of(gradviz.EventKind.DATA_GET) if e.location]
        assert data_reads == ([14] if rank == 1 else [])  # only rank 1 ran the buggy line
    assert found == {0: [], 1: [("silently_corrupted_saved_tensor", 14)]}


SLOW_RANK = """import os, time
import torch
a = torch.tensor([1.0, 2.0], requires_grad=True)
out = a.tanh()
out.sum().backward()
if os.environ["RANK"] == "1":
    time.sleep(12)  # longer than rank 0 waits
print(f"rank {os.environ['RANK']} done")
"""


def test_rank_0_names_the_rank_that_did_not_report_in_time(tmp_path):
    write(tmp_path, "slow.py", SLOW_RANK)
    result = _torchrun_env(tmp_path, {"GRADVIZ_RANK_TIMEOUT": "3"}, "check", "slow.py")

    assert "Traceback" not in result.stderr, result.stderr
    # what rank 0 says, without its `[rank 0] ` prefix
    said = [line.removeprefix("[rank 0] ") for line in result.stderr.splitlines() if line.startswith("[rank 0] gradviz:")]
    absent = [line for line in said if re.search(r"\brank(\(s\))? 1\b", line)
              and re.search(r"no result|did not report|not report|missing", line)]
    assert absent, result.stderr  # rank 0 says which rank it did not hear from
    assert not any(re.search(r"\brank(\(s\))? 0\b", line) for line in absent)  # and not itself
    assert "rank 0 done" in result.stdout and "rank 1 done" in result.stdout  # the slow rank still ran to its end
