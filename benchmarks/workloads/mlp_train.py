"""A plain MLP training run on synthetic data: `python mlp_train.py STEPS` (the step-window benchmark's workload)."""

import sys

import torch

torch.manual_seed(0)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6000
model = torch.nn.Sequential(
    torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)
)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
data = torch.randn(512, 32)
labels = torch.randint(0, 10, (512,))
for step in range(steps):
    batch = slice((step * 32) % 512, (step * 32) % 512 + 32)
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(data[batch]), labels[batch])
    loss.backward()
    opt.step()
    if step % 1000 == 0:
        print(f"step {step}: loss {loss.item():.6f}")
print(f"final loss {loss.item():.8f}")
