"""
GAN: the discriminator step detaches the fakes
==============================================

The discriminator step uses ``fake.detach()``, so ``d_loss.backward()`` stops at
the generator's output and leaves the generator's gradients alone. The
generator step then backpropagates through a fresh forward pass of the
discriminator into ``G`` without detaching. The cut is deliberate and every
parameter receives gradients.

Findings: cut_edge
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)

G = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 2))
D = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))
opt_g = torch.optim.SGD(G.parameters(), lr=0.05)
opt_d = torch.optim.SGD(D.parameters(), lr=0.05)
bce = nn.BCEWithLogitsLoss()
real = torch.randn(16, 2) + 3
ones, zeros = torch.ones(16, 1), torch.zeros(16, 1)

for step in range(3):
    fake = G(torch.randn(16, 2))
    # discriminator step: no gradient into G
    fake_for_d = fake.detach()
    d_loss = bce(D(real), ones) + bce(D(fake_for_d), zeros)
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    # generator step: gradient flows through D (after its update) into G
    g_loss = bce(D(fake), ones)
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    print(f"step {step}: d_loss {d_loss.item():.4f}  g_loss {g_loss.item():.4f}")
