"""GAN discriminator losses on real and fake batches summed before one backward, and a multi-task loss summed
in a loop before one backward each step: graphs kept deliberately for one later backward, no finding."""
import torch
import torch.nn as nn

torch.manual_seed(0)
D = nn.Sequential(nn.Linear(3, 1), nn.Sigmoid())
heads = nn.ModuleList(nn.Linear(3, 1) for _ in range(3))
opt_d = torch.optim.SGD(D.parameters(), lr=0.01)
opt_h = torch.optim.SGD(heads.parameters(), lr=0.01)
bce = nn.BCELoss()
for step in range(2):
    real, fake = torch.randn(4, 3), torch.randn(4, 3)
    d_real = bce(D(real), torch.ones(4, 1))
    d_fake = bce(D(fake), torch.zeros(4, 1))
    d_loss = d_real + d_fake
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    total = 0.0
    for head in heads:
        total = total + head(real).pow(2).mean()
    opt_h.zero_grad()
    total.backward()
    opt_h.step()
