"""Two models trained one after the other in one script: a regressor, then a classifier on its features."""
import torch
import torch.nn as nn

torch.manual_seed(0)

regressor = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 1))
opt = torch.optim.SGD(regressor.parameters(), lr=0.05)
x, y = torch.randn(32, 6), torch.randn(32, 1)
for step in range(4):
    opt.zero_grad()
    loss = nn.functional.mse_loss(regressor(x), y)
    loss.backward()
    opt.step()

classifier = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
opt2 = torch.optim.Adam(classifier.parameters(), lr=1e-2)
labels = torch.randint(0, 3, (32,))
for step in range(4):
    opt2.zero_grad()
    loss = nn.functional.cross_entropy(classifier(x), labels)
    loss.backward()
    opt2.step()
print(f"losses done {loss.item():.3f}")
