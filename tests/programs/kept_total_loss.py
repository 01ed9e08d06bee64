"""The PyTorch FAQ's first out-of-memory answer: `total_loss += loss` keeps every step's graph alive."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
total_loss = 0
for step in range(4):
    opt.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    opt.step()
    total_loss += loss  # expect: graph_kept_alive
print(f"mean loss {float(total_loss) / 4:.4f}")
