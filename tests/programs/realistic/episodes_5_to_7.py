"""Policy gradient whose episodes last 5, 6 or 7 moves (an environment ending at different times): one backward per
episode over `torch.cat` of that episode's log-probabilities."""
import torch
import torch.nn as nn

torch.manual_seed(1)
net = nn.Sequential(nn.Linear(3, 12), nn.Tanh(), nn.Linear(12, 3), nn.LogSoftmax(dim=-1))
optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
for episode in range(9):
    picked = []
    for move in range(5 + (episode * 2) % 3):
        logp = net(torch.randn(1, 3))
        choice = torch.multinomial(logp.exp(), 1)
        picked.append(logp.gather(1, choice).view(1))
    loss = -torch.cat(picked).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"last loss {loss.item():.3f}")
