"""
WGAN: clipping the critic's weights before backward
===================================================

The critic loss is built first, then the weights are clipped in place through
``p.data.clamp_`` and only then is ``backward()`` called. The second layer's
weight was saved to compute the gradient of the hidden layer; ``.data`` writes
it without moving the version counter, so backward silently uses the clipped
values and the first layer's gradients are wrong.

Findings: silently_corrupted_saved_tensor
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)

critic = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.RMSprop(critic.parameters(), lr=5e-5)
real, fake = torch.randn(16, 2) + 3, torch.randn(16, 2)

for step in range(3):
    loss = critic(fake).mean() - critic(real).mean()
    for p in critic.parameters():
        p.data.clamp_(-0.01, 0.01)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: critic loss {loss.item():.5f}")
