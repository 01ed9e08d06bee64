"""FSDP2 and DDP on gloo with 2 ranks, run as users run them (`torchrun -m gradviz check --json`): no hang, no
collective of gradviz's own, nothing it could not record, and no warning PyTorch contradicts. The programs check
PyTorch's truth themselves (a non-zero local gradient on every rank before every step, every parameter moved by
it) and fail if it does not hold, under gradviz or not."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

TRUTH = """
    def check_step(optimizer):
        before = {}
        def pre(opt, args, kwargs):
            for p in (q for g in opt.param_groups for q in g["params"]):
                local = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
                assert local is not None and bool(local.any()), "a parameter without gradient before step()"
                before[id(p)] = (p.to_local() if hasattr(p, "to_local") else p).detach().clone()
        def post(opt, args, kwargs):
            for p in (q for g in opt.param_groups for q in g["params"]):
                now = p.to_local() if hasattr(p, "to_local") else p
                assert not torch.equal(before[id(p)], now), "step() left a parameter unchanged"
        optimizer.register_step_pre_hook(pre)
        optimizer.register_step_post_hook(post)
"""

PROGRAMS = {
    # two sub-layers and the root sharded: the layout whose step hook hung (a DTensor torch.equal is a collective)
    "fsdp2": """
        import torch, torch.nn as nn, torch.distributed as dist
        from torch.distributed.fsdp import fully_shard
        dist.init_process_group("gloo")
        TRUTH
        torch.manual_seed(0)
        model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(5)])
        fully_shard(model[1]); fully_shard(model[3]); fully_shard(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        check_step(opt)
        torch.manual_seed(1 + dist.get_rank())
        for step in range(3):
            loss = model(torch.randn(4, 8)).pow(2).sum()
            opt.zero_grad(set_to_none=ZERO); loss.backward(); opt.step()
        dist.destroy_process_group()
    """,
    "ddp": """
        import torch, torch.nn as nn, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("gloo")
        TRUTH
        torch.manual_seed(0)
        model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        check_step(opt)
        torch.manual_seed(1 + dist.get_rank())
        for step in range(3):
            loss = nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 2, (4,)))
            opt.zero_grad(set_to_none=ZERO); loss.backward(); opt.step()
        dist.destroy_process_group()
    """,
}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(tmp: Path, name: str, zero: bool, *args: str) -> subprocess.CompletedProcess[str]:
    source = textwrap.dedent(PROGRAMS[name]).replace("TRUTH", textwrap.indent(textwrap.dedent(TRUTH), "").strip())
    script = tmp / f"{name}.py"
    script.write_text(source.replace("ZERO", str(zero)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={_port()}", *args, str(script)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=240, cwd=tmp)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "zero"), [("fsdp2", True), ("fsdp2", False), ("ddp", False)])
def test_distributed_training_is_clean_on_every_rank(name: str, zero: bool, tmp_path: Path) -> None:
    # one run: gradviz never changes the program, so its own truth checks (and their failure) run under it too
    traced = _torchrun(tmp_path, name, zero, "-m", "gradviz", "check", "--strict")
    output = traced.stdout + traced.stderr
    # no hang (the timeout), PyTorch's truth held, no warning or error on any rank, every call recorded
    assert traced.returncode == 0, output[-3000:]
    assert re.findall(r"rank (\d): 0 errors, 0 warnings", output) == ["0", "1"], output[-3000:]
    assert "could not record" not in output
