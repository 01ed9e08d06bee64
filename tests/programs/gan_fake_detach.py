"""GAN with fake.detach() in the discriminator step and a plain generator step: a deliberate cut."""
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

for step in range(2):
    fake = G(torch.randn(16, 2))
    fake_for_d = fake.detach()  # expect: cut_edge
    d_loss = bce(D(real), ones) + bce(D(fake_for_d), zeros)
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = bce(D(fake), ones)
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
