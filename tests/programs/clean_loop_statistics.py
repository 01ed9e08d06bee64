"""Statistics kept the right way: `.item()`, `float()`, `.detach()`, under no_grad; the loop variable holds the
last step's graph (every script does that): no finding."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
running, totals, kept, history = 0.0, 0.0, [], {"loss": []}
for step in range(4):
    opt.zero_grad()
    out = model(torch.randn(8, 4))
    loss = out.pow(2).mean()
    loss.backward()
    opt.step()
    running += loss.item()
    totals = totals + float(loss)
    kept.append(loss.detach())
    history["loss"].append(loss.item())
with torch.no_grad():
    val = 0.0
    for _ in range(3):
        val = val + model(torch.randn(8, 4)).pow(2).mean()
print(running, totals, len(kept), float(val))
