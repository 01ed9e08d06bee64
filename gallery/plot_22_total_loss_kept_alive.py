"""
``total_loss += loss`` keeps every step's graph alive
=====================================================

The PyTorch FAQ's first out-of-memory answer. ``loss`` carries its autograd
history, so ``total_loss += loss`` builds one long graph that links every
step's loss: nothing the steps computed can be freed while ``total_loss``
lives, and the graph grows by one step each iteration. Accumulate a number
instead: ``total_loss += loss.item()``.

Findings: graph_kept_alive
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
total_loss = 0
for step in range(6):
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    total_loss += loss  # keeps this step's graph linked to all earlier ones
print(f"mean training loss {float(total_loss) / 6:.4f}")
