"""detach() used only to log: .item(), numpy, a running tensor sum and a metric. No gradient path is cut."""
import torch
import torch.nn as nn

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
running_loss = torch.zeros(())

for step in range(3):
    pred = model(x)
    loss = nn.functional.cross_entropy(pred, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    running_loss += loss.detach()
    accuracy = (pred.detach().argmax(dim=1) == y).float().mean().item()
    probs = pred.detach().softmax(dim=1).cpu().numpy()
    print(f"step {step}: loss {loss.detach().item():.4f}, acc {accuracy:.3f}, p0 {probs[0].round(3)}")
print("mean loss:", (running_loss / 3).item())
