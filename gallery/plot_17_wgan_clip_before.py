"""
WGAN: clipping the critic's weights before the forward pass
===========================================================

The same critic, with the clipping moved to the start of each iteration, as in
the original WGAN code. The in-place writes through ``.data`` happen while no
graph that saved the weights is alive, so the next forward pass saves the
clipped values and backward uses exactly what the forward pass used.

Findings: none
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)

critic = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.RMSprop(critic.parameters(), lr=5e-5)
real, fake = torch.randn(16, 2) + 3, torch.randn(16, 2)

for step in range(3):
    for p in critic.parameters():
        p.data.clamp_(-0.01, 0.01)
    loss = critic(fake).mean() - critic(real).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: critic loss {loss.item():.5f}")
