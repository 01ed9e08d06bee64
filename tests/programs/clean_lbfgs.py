"""LBFGS computes the loss and its backward in a closure it calls from inside step(): every parameter gets its
gradient there, so no update is without gradient."""
import torch
import torch.nn as nn

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
x, y = torch.randn(32, 3), torch.randn(32, 1)


def closure():
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for step in range(3):
    loss = optimizer.step(closure)
    print(f"step {step}: loss {loss.item():.4f}")
