"""Real setups, one process: every warning and error gradviz gives must agree with what PyTorch shows (non-zero
gradients before each step, what each step changed, the program's own error, live autograd nodes after N and
N + 2 steps). Correct programs must come out without a warning; the one setup that really starves parameters (a
reentrant checkpoint whose inputs do not require grad) must name them, with PyTorch's reason."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

import gradviz
from gradviz.analysis import FindingKind, Severity, diagnose

from . import truth as pytorch

SETUPS = {
    # a hyperparameter sweep: the second model is built (and initialised in place) after the first one's backward
    "model_sweep": """
        import torch, torch.nn as nn
        for run in range(2):
            torch.manual_seed(run)
            m = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.Linear(16, 2))
            opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
            for step in range(STEPS):
                loss = nn.functional.cross_entropy(m(torch.randn(4, 8)), torch.randint(0, 2, (4,)))
                opt.zero_grad(); loss.backward(); opt.step()
    """,
    "checkpoint_reentrant": """
        import torch, torch.nn as nn
        from torch.utils.checkpoint import checkpoint
        torch.manual_seed(0)
        blocks = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), nn.Tanh()) for _ in range(2)])
        head = nn.Linear(8, 1)
        opt = torch.optim.SGD([*blocks.parameters(), *head.parameters()], lr=0.1)
        for step in range(STEPS):
            h = torch.randn(4, 8).requires_grad_()
            for block in blocks:
                h = checkpoint(block, h, use_reentrant=True)
            loss = head(h).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
    """,
    "checkpoint_non_reentrant": """
        import torch, torch.nn as nn
        from torch.utils.checkpoint import checkpoint
        torch.manual_seed(0)
        blocks = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), nn.GELU()) for _ in range(2)])
        head = nn.Linear(8, 1)
        opt = torch.optim.AdamW([*blocks.parameters(), *head.parameters()], lr=0.01)
        for step in range(STEPS):
            h = torch.randn(4, 8)
            for block in blocks:
                h = checkpoint(block, h, use_reentrant=False)
            loss = head(h).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
    """,
    # MAML, second order: fast weights through autograd.grad(create_graph=True), a meta loss summed per epoch
    "maml_second_order": """
        import torch, torch.nn as nn, torch.nn.functional as F
        from torch.func import functional_call
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
        meta_opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        names = [n for n, _ in model.named_parameters()]
        for epoch in range(STEPS):
            meta_opt.zero_grad()
            meta_loss = 0.0
            for task in range(3):
                xs, xq = torch.randn(10, 1), torch.randn(10, 1)
                ys, yq = torch.sin(xs), torch.sin(xq)
                params = list(model.parameters())
                loss = F.mse_loss(functional_call(model, dict(zip(names, params)), (xs,)), ys)
                grads = torch.autograd.grad(loss, params, create_graph=True)
                fast = [p - 0.01 * g for p, g in zip(params, grads)]
                meta_loss = meta_loss + F.mse_loss(functional_call(model, dict(zip(names, fast)), (xq,)), yq)
            meta_loss.backward()
            meta_opt.step()
    """,
    # WGAN-GP: the gradient penalty through autograd.grad(create_graph=True), a detached fake for the critic
    "wgan_gp": """
        import torch, torch.nn as nn
        torch.manual_seed(0)
        G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
        D = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
        opt_g = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.5, 0.9))
        opt_d = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.5, 0.9))
        for step in range(STEPS):
            real = torch.randn(6, 8)
            fake = G(torch.randn(6, 4))
            alpha = torch.rand(6, 1)
            mixed = (alpha * real + (1 - alpha) * fake.detach()).requires_grad_(True)
            grad, = torch.autograd.grad(D(mixed).sum(), mixed, create_graph=True)
            penalty = ((grad.norm(2, dim=1) - 1) ** 2).mean()
            d_loss = D(fake.detach()).mean() - D(real).mean() + 10 * penalty
            opt_d.zero_grad(); d_loss.backward(); opt_d.step()
            g_loss = -D(G(torch.randn(6, 4))).mean()
            opt_g.zero_grad(); g_loss.backward(); opt_g.step()
    """,
    # a Hessian-vector product (double backward) in a training step: curvature regularisation
    "hessian_vector_product": """
        import torch, torch.nn as nn
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        for step in range(STEPS):
            loss = net(torch.randn(7, 5)).pow(2).mean()
            params = list(net.parameters())
            grads = torch.autograd.grad(loss, params, create_graph=True)
            v = [torch.randn_like(p) for p in params]
            hvp = torch.autograd.grad(sum((g * u).sum() for g, u in zip(grads, v)), params, retain_graph=True)
            total = loss + 1e-3 * sum((h * u).sum() for h, u in zip(hvp, v)).detach()
            opt.zero_grad(); total.backward(); opt.step()
    """,
    # torch.func: gradients computed functionally, written into .grad for the optimizer
    "torch_func": """
        import torch, torch.nn as nn
        from torch.func import functional_call, grad
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        opt = torch.optim.SGD(net.parameters(), lr=0.05)
        def loss_fn(params, x, y):
            return ((functional_call(net, params, (x,)) - y) ** 2).mean()
        for step in range(STEPS):
            x, y = torch.randn(6, 4), torch.randn(6, 1)
            grads = grad(loss_fn)(dict(net.named_parameters()), x, y)
            for name, p in net.named_parameters():
                p.grad = grads[name]
            opt.step()
    """,
    "autocast_bf16": """
        import torch, torch.nn as nn
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        opt = torch.optim.SGD(net.parameters(), lr=0.05)
        for step in range(STEPS):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = net(torch.randn(5, 8))
                loss = nn.functional.cross_entropy(out.float(), torch.randint(0, 4, (5,)))
            opt.zero_grad(); loss.backward(); opt.step()
    """,
}
# a HuggingFace model built from its config (no download), trained with gradient checkpointing
HF_GPT2 = """
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel
        torch.manual_seed(0)
        config = GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=50, n_positions=16)
        model = GPT2LMHeadModel(config)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": REENTRANT})
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for step in range(STEPS):
            ids = torch.randint(0, 50, (2, 8))
            loss = model(input_ids=ids, labels=ids).loss
            opt.zero_grad(); loss.backward(); opt.step()
"""
HF_SETUPS = {
    "hf_gpt2_checkpointing_reentrant": HF_GPT2.replace("REENTRANT", "True"),
    "hf_gpt2_checkpointing_non_reentrant": HF_GPT2.replace("REENTRANT", "False"),
}


def _program(tmp: Path, name: str, source: str, steps: int) -> Path:
    script = tmp / f"{name}_{steps}.py"
    script.write_text(textwrap.dedent(source).replace("STEPS", str(steps)))
    return script


def judge(tmp: Path, name: str, source: str, steps: int = 2) -> tuple[list, pytorch.Truth]:
    """gradviz's findings on the program with `steps` steps, checked against PyTorch's truth on N and N + 2."""
    script = _program(tmp, name, source, steps)
    truth = pytorch.run(script)
    longer = pytorch.run(_program(tmp, name, source, steps + 2))
    trace = gradviz.trace_script(script)
    assert not trace.internal_errors, trace.internal_errors
    findings = diagnose(trace)
    wrong = pytorch.contradictions(findings, truth, grows=longer.live_nodes > truth.live_nodes)
    assert not wrong, "\n".join(wrong)
    return findings, truth


@pytest.mark.parametrize(
    "name", [*sorted(SETUPS), *(pytest.param(name, marks=pytest.mark.slow) for name in sorted(HF_SETUPS))]
)
def test_correct_setup_has_no_warning(name: str, tmp_path: Path) -> None:
    findings, truth = judge(tmp_path, name, {**SETUPS, **HF_SETUPS}[name])
    assert truth.error is None, truth.error
    # every parameter the optimizers hold got a non-zero gradient before some step (the programs are correct) ...
    assert truth.steps and all(step.with_grad for step in truth.steps)
    # ... and gradviz agrees: nothing above info
    assert [f for f in findings if f.severity is not Severity.INFO] == []


def test_reentrant_checkpoint_without_grad_inputs_starves_its_blocks(tmp_path: Path) -> None:
    source = SETUPS["checkpoint_reentrant"].replace(".requires_grad_()", "")
    findings, truth = judge(tmp_path, "checkpoint_no_grad_input", source)
    starved = {f"blocks.{i}.0.{kind}" for i in range(2) for kind in ("weight", "bias")}
    assert truth.ever_with_grad.isdisjoint(starved)  # PyTorch: "None of the inputs have requires_grad=True"
    dead = [f for f in findings if f.kind is FindingKind.DEAD_PARAMETER]
    assert len(dead) == 1 and set(dead[0].parameters) == starved  # one finding for the checkpoint line
    line = textwrap.dedent(source).splitlines().index("        h = checkpoint(block, h, use_reentrant=True)") + 1
    assert all(f.line == line and "None of the inputs have requires_grad=True" in f.message for f in dead)


def test_maml_keeps_the_same_graph_after_more_epochs(tmp_path: Path) -> None:
    """PyTorch keeps the same number of autograd nodes after 2 epochs and after 4, and gradviz says no graph is kept
    alive; keeping every epoch's meta loss in a list makes PyTorch's count grow, and gradviz says so at that line."""
    source = SETUPS["maml_second_order"]
    short = pytorch.run(_program(tmp_path, "maml", source, 2))
    long = pytorch.run(_program(tmp_path, "maml", source, 4))
    assert short.live_nodes == long.live_nodes > 0
    for epochs in (2, 4):
        findings = diagnose(gradviz.trace_script(_program(tmp_path, "maml", source, epochs)))
        assert [(f.kind, f.line) for f in findings if f.severity is not Severity.INFO] == [], epochs

    kept = source.replace("names = [", "history = []\n        names = [").replace(
        "meta_opt.step()", "meta_opt.step()\n            history.append(meta_loss)")
    kept_short = pytorch.run(_program(tmp_path, "maml_kept", kept, 2))
    kept_long = pytorch.run(_program(tmp_path, "maml_kept", kept, 4))
    assert kept_long.live_nodes > kept_short.live_nodes  # PyTorch: each epoch's graph stays reachable
    made = next(i for i, line in enumerate(textwrap.dedent(kept).splitlines(), 1) if "meta_loss = meta_loss +" in line)
    findings = diagnose(gradviz.trace_script(_program(tmp_path, "maml_kept", kept, 4)))
    (kept_alive,) = [f for f in findings if f.kind is FindingKind.GRAPH_KEPT_ALIVE]
    assert kept_alive.line == made  # where the value that holds the graph is made
    # the growth it states is PyTorch's (217 nodes after 2 epochs, 433 after 4: 108 an epoch; gradviz: "about 100")
    growth = int(re.search(r"grows by about (\d+) autograd nodes per step", kept_alive.message).group(1))
    assert growth == pytest.approx((kept_long.live_nodes - kept_short.live_nodes) / 2, rel=0.2), kept_alive.message
    assert pytorch.contradictions(findings, kept_long, grows=True) == []
