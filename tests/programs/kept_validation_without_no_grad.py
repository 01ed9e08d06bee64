"""Validation without torch.no_grad() that accumulates the loss: every batch's activations stay alive."""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
crit = nn.CrossEntropyLoss()
batches = [(torch.randn(16, 4), torch.randint(0, 2, (16,))) for _ in range(5)]
model.eval()
val_loss = 0.0
for x, y in batches:
    out = model(x)
    val_loss = val_loss + crit(out, y)  # expect: graph_kept_alive
print(f"val loss {val_loss.item() / len(batches):.3f}")
