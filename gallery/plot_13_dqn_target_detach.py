"""
DQN: a semi-gradient target with detach()
=========================================

Here the TD target is computed by the online network itself and then detached,
the classic semi-gradient update: the loss pulls ``Q(s, a)`` towards the target
but does not push the target. The detached tensor came from a graph and feeds
the loss, so the cut is real; the network still trains through ``Q(s, a)``.

Findings: cut_edge
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)

q_net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(q_net.parameters(), lr=0.05)
gamma = 0.9

for step in range(3):
    s, s_next = torch.randn(16, 4), torch.randn(16, 4)
    a, r = torch.randint(0, 2, (16,)), torch.randn(16)
    next_value = q_net(s_next).max(dim=1).values
    target = r + gamma * next_value.detach()
    q = q_net(s).gather(1, a[:, None]).squeeze(1)
    loss = nn.functional.smooth_l1_loss(q, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
