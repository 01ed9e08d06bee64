"""WGAN-GP: a gradient penalty through torch.autograd.grad(create_graph=True): clean."""
import torch, torch.nn as nn
torch.manual_seed(0)
D = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.Adam(D.parameters(), lr=1e-3)
for _ in range(3):
    real, fake = torch.randn(8, 2), torch.randn(8, 2)
    eps = torch.rand(8, 1)
    mix = (eps * real + (1 - eps) * fake).requires_grad_(True)
    grads = torch.autograd.grad(D(mix).sum(), mix, create_graph=True)[0]
    penalty = ((grads.norm(2, dim=1) - 1) ** 2).mean()
    loss = D(fake).mean() - D(real).mean() + 10 * penalty
    opt.zero_grad(); loss.backward(); opt.step()
