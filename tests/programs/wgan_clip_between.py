"""WGAN critic weights clipped through .data after the loss is built, before backward."""
import torch
import torch.nn as nn

torch.manual_seed(0)

critic = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
optimizer = torch.optim.RMSprop(critic.parameters(), lr=5e-5)
real, fake = torch.randn(16, 2) + 3, torch.randn(16, 2)

for step in range(3):
    loss = critic(fake).mean() - critic(real).mean()
    for p in critic.parameters():
        p.data.clamp_(-0.01, 0.01)  # expect: silently_corrupted_saved_tensor
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
