"""24 training steps with tanh's saved output clamped through .data: tanh's backward reads 1 - h^2, so the gradients
come out wrong only at the steps whose batch drives |h| above 0.95 (steps 3 and 9); fc2 saves h after the clamp and
its gradients are right at every step."""
import torch

torch.manual_seed(0)
fc1 = torch.nn.Linear(4, 16)
fc2 = torch.nn.Linear(16, 1)
optimizer = torch.optim.SGD([*fc1.parameters(), *fc2.parameters()], lr=0.05)
LOUD = (2, 8)  # 0-based: steps 3 and 9
batches = [torch.randn(32, 4) * (4.0 if step in LOUD else 0.1) for step in range(24)]
targets = [torch.randn(32, 1) for _ in range(24)]


def train_step(x, y):
    h = torch.tanh(fc1(x))
    h.data.clamp_(-0.95, 0.95)  # expect: silently_corrupted_saved_tensor
    return ((fc2(h) - y) ** 2).mean()


for x, y in zip(batches, targets):
    optimizer.zero_grad()
    loss = train_step(x, y)
    loss.backward()
    optimizer.step()
print(f"final loss {loss.item():.4f}")
