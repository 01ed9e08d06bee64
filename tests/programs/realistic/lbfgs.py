"""Full-batch logistic regression with L-BFGS: the optimizer calls the closure many times per step."""
import torch
import torch.nn as nn

torch.manual_seed(0)
features = torch.randn(64, 5)
labels = (features[:, 0] - features[:, 1] > 0).float().unsqueeze(1)
model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=6)


def closure():
    optimizer.zero_grad()
    loss = criterion(model(features), labels)
    loss.backward()
    return loss


for epoch in range(3):
    loss = optimizer.step(closure)
print(f"loss {loss.item():.4f}")
