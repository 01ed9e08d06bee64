"""
A clean training loop that detaches only for logging
====================================================

``loss.detach().item()`` and ``pred.detach().cpu().numpy()`` take values out of
the graph for printing and metrics. Nothing computed from them flows back into
a loss, so no gradient path is cut and every parameter trains.

Findings: none
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(32, 4), torch.randn(32, 1)
history = []

for step in range(5):
    pred = model(x)
    loss = ((pred - y) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    history.append(loss.detach().item())
    first_preds = pred.detach().cpu().numpy()[:3, 0]
    print(f"step {step}: loss {history[-1]:.4f}, first predictions {first_preds.round(3)}")
