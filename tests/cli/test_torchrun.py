"""Under torchrun every rank writes its own files and rank 0 prints one summary of all ranks (issue 11.5): a real
2-process DDP training run with the gloo backend on the loopback interface."""

from __future__ import annotations

import json
import os
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


def _torchrun(tmp_path: Path, *args: str, timeout: str = "60") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "GRADVIZ_DEBUG")}
    env.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", GRADVIZ_RANK_TIMEOUT=timeout)
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


def test_check_sarif_under_torchrun_is_one_log_with_every_ranks_results(tmp_path):
    from .test_formats import validate

    write(tmp_path, "ddp_train.py", DDP_TRAIN)
    result = _torchrun(tmp_path, "check", "ddp_train.py", "--format", "sarif")

    assert result.returncode == 1, result.stderr  # rank 1's error finding fails the check
    log = json.loads(result.stdout)  # one document on stdout: no summary, no second rank's log
    validate(log)
    (found,) = log["runs"][0]["results"]
    assert (found["ruleId"], found["level"], found["properties"]["ranks"]) == ("silently_corrupted_saved_tensor", "error", [1])
    physical = found["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"]["uri"] == "ddp_train.py" and physical["region"]["startLine"] == 14
    assert "[backward here](" in found["message"]["text"]  # rank 1's own related locations came along
    assert log["runs"][0]["invocations"] == [{"executionSuccessful": True, "exitCode": 1}]


def test_check_github_under_torchrun_prints_every_ranks_workflow_commands(tmp_path):
    write(tmp_path, "ddp_train.py", DDP_TRAIN)
    result = _torchrun(tmp_path, "check", "ddp_train.py", "--format", "github")

    assert result.returncode == 1, result.stderr
    (command,) = result.stdout.splitlines()  # only workflow commands on stdout: the programs' prints went to stderr
    assert command.startswith(
        "::error file=ddp_train.py,line=14,title=silently_corrupted_saved_tensor (rank 1)::`out`, saved by TanhBackward0"
    )
    assert "rank 1 trained" in result.stderr


def test_a_rank_later_than_the_timeout_is_named_and_prints_its_own_findings(tmp_path):
    late = DDP_TRAIN + "if rank == 1:\n    import time\n    time.sleep(12)  # long after rank 0 stopped waiting\n"
    write(tmp_path, "ddp_train.py", late)
    result = _torchrun(tmp_path, "check", "ddp_train.py", timeout="3")

    assert result.returncode == 1, result.stdout + result.stderr  # rank 1's error still fails the job
    lines = result.stdout.splitlines()
    # rank 0 does not claim "all 2 ranks": it names the one that did not report
    assert "gradviz: 1 of 2 ranks reported: rank 0: 0 errors, 0 warnings, 0 info; rank 1: no result" in lines
    assert ("[rank 0] gradviz: no result from rank 1 after 3 s (GRADVIZ_RANK_TIMEOUT): crashed, or still running; "
            "a late rank prints its own findings when it ends") in result.stderr.splitlines()
    # rank 1 prints its findings itself, when it ends
    assert ("[rank 1] gradviz: rank 0 stopped waiting for this rank after 3 s (GRADVIZ_RANK_TIMEOUT): "
            "its findings follow here") in result.stderr.splitlines()
    assert "error  ddp_train.py:14  silently_corrupted_saved_tensor  [rank 1]" in lines
    assert "[rank 1] ddp_train.py: 1 error, 0 warnings, 0 info" in lines
    assert lines.index("gradviz: 1 of 2 ranks reported: rank 0: 0 errors, 0 warnings, 0 info; rank 1: no result") < lines.index(
        "error  ddp_train.py:14  silently_corrupted_saved_tensor  [rank 1]"
    )


def test_a_late_rank_under_sarif_is_a_notification_and_its_findings_go_to_stderr(tmp_path):
    from .test_formats import validate

    late = DDP_TRAIN + "if rank == 1:\n    import time\n    time.sleep(12)  # long after rank 0 stopped waiting\n"
    write(tmp_path, "ddp_train.py", late)
    result = _torchrun(tmp_path, "check", "ddp_train.py", "--format", "sarif", timeout="3")

    assert result.returncode == 1, result.stdout + result.stderr
    log = json.loads(result.stdout)  # still one document: the late rank writes elsewhere
    validate(log)
    run = log["runs"][0]
    assert run["results"] == []  # rank 0 had nothing, and rank 1's result never reached it
    (notice,) = run["invocations"][0]["toolExecutionNotifications"]
    assert notice["level"] == "warning"
    assert notice["message"]["text"].startswith("gradviz: no result from rank 1 after 3 s (GRADVIZ_RANK_TIMEOUT)")
    assert "error  ddp_train.py:14  silently_corrupted_saved_tensor  [rank 1]" in result.stderr.splitlines()


def test_each_rank_trace_holds_that_rank_s_own_run(tmp_path):
    import gradviz

    write(tmp_path, "ddp_train.py", DDP_TRAIN)
    result = _torchrun(tmp_path, "render", "ddp_train.py", "-o", "run.json", "-q")

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


RANK_0_FAILS = """\
import time
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
if rank == 0:
    raise RuntimeError("rank 0 has its own error")
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.tanh()
out.data.zero_()
out.sum().backward()
time.sleep(60)  # rank 1 is slow: still running when rank 0 ends, and torchrun stops it
print(f"rank {rank} done")
"""


def test_a_slower_rank_stopped_by_torchrun_after_rank_0_failed_still_prints_its_findings(tmp_path):
    """Issue 28 item 3: rank 0 exits 1 with its own error; torchrun then sends SIGTERM to rank 1, which must not
    take rank 1's findings with it."""
    write(tmp_path, "ddp_train.py", RANK_0_FAILS)
    result = _torchrun(tmp_path, "check", "ddp_train.py", timeout="3")

    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "gradviz: 1 of 2 ranks reported: rank 0: 0 errors, 0 warnings, 0 info, exited 1; rank 1: no result" in lines
    assert ("[rank 1] gradviz: torchrun is stopping this rank (SIGTERM: another rank failed): its findings follow "
            "here") in result.stderr.splitlines()
    at = lines.index("error  ddp_train.py:11  silently_corrupted_saved_tensor  [rank 1]")
    assert lines[at + 1] == "     11 | out.data.zero_()"
    # stopped where it was, as the signal stops it (status 128 + 15), not at its end
    assert "[rank 1] ddp_train.py: 1 error, 0 warnings, 0 info; the script raised StoppedByTorchrun at line 13" in lines
    assert "rank 1 done" not in result.stdout


def test_a_rank_waiting_in_a_collective_for_a_failed_rank_0_still_prints_its_findings(tmp_path):
    """The DDP form of the same: rank 1 waits in all_reduce for rank 0, which failed; once rank 0 has ended, the
    collective fails on rank 1 and torchrun stops it: its findings still reach the output."""
    waits = RANK_0_FAILS.replace(
        "time.sleep(60)  # rank 1 is slow: still running when rank 0 ends, and torchrun stops it",
        "dist.all_reduce(a.grad)  # waits for rank 0, which never comes",
    )
    write(tmp_path, "ddp_train.py", waits)
    result = _torchrun(tmp_path, "check", "ddp_train.py", timeout="3")

    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "gradviz: 1 of 2 ranks reported: rank 0: 0 errors, 0 warnings, 0 info, exited 1; rank 1: no result" in lines
    at = lines.index("error  ddp_train.py:11  silently_corrupted_saved_tensor  [rank 1]")
    assert lines[at + 1] == "     11 | out.data.zero_()"
