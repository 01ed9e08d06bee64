"""A GAN loop with three backward calls per iteration (discriminator on real data, on generated data, generator),
each followed by a logged metric `output.mean().item()` read from the graph that backward just used."""
import torch
import torch.nn as nn

torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(3, 10), nn.ReLU(), nn.Linear(10, 5), nn.Tanh())
critic = nn.Sequential(nn.Linear(5, 10), nn.LeakyReLU(0.2), nn.Linear(10, 1), nn.Sigmoid())
bce = nn.BCELoss()
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3)
opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
for iteration in range(4):
    critic.zero_grad()
    scores = critic(torch.randn(6, 5)).view(-1)
    loss_real = bce(scores, torch.ones(6))
    loss_real.backward()
    real_score = scores.mean().item()
    made = generator(torch.randn(6, 3))
    scores = critic(made.detach()).view(-1)
    loss_made = bce(scores, torch.zeros(6))
    loss_made.backward()
    made_score = scores.mean().item()
    opt_c.step()
    generator.zero_grad()
    scores = critic(made).view(-1)
    loss_gen = bce(scores, torch.ones(6))
    loss_gen.backward()
    fooled = scores.mean().item()
    opt_g.step()
print(f"{real_score:.3f} {made_score:.3f} {fooled:.3f}")
