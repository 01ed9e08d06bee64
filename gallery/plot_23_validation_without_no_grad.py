"""
Validation without ``torch.no_grad()``
======================================

The evaluation loop forgets ``torch.no_grad()`` and sums the batch losses as
tensors. No backward ever runs, so nothing frees the saved activations: every
batch's graph, with everything it saved, stays alive in ``val_loss``. The
graph-memory view shows the bytes held climbing batch after batch.

Findings: graph_kept_alive
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
crit = nn.CrossEntropyLoss()
batches = [(torch.randn(32, 16), torch.randint(0, 4, (32,))) for _ in range(8)]
model.eval()
val_loss = 0.0
for x, y in batches:
    out = model(x)
    val_loss = val_loss + crit(out, y)  # a tensor with history: every batch's graph stays alive
print(f"validation loss {val_loss.item() / len(batches):.3f}")
