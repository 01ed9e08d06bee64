"""
DQN: a target network evaluated under no_grad
=============================================

The TD target comes from a separate target network evaluated inside
``torch.no_grad()``. No graph is recorded for it, so there is nothing to cut:
the target is a plain constant and only the online network is trained. The
target network is refreshed with ``load_state_dict`` between updates.

Findings: none
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)

q_net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
target_net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
target_net.load_state_dict(q_net.state_dict())
optimizer = torch.optim.SGD(q_net.parameters(), lr=0.05)
gamma = 0.9

for step in range(3):
    s, s_next = torch.randn(16, 4), torch.randn(16, 4)
    a, r = torch.randint(0, 2, (16,)), torch.randn(16)
    with torch.no_grad():
        target = r + gamma * target_net(s_next).max(dim=1).values
    q = q_net(s).gather(1, a[:, None]).squeeze(1)
    loss = nn.functional.smooth_l1_loss(q, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    target_net.load_state_dict(q_net.state_dict())
    print(f"step {step}: loss {loss.item():.4f}")
