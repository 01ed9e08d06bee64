"""Gradient accumulation (nanoGPT's `gradient_accumulation_steps`): 2 micro-batches per optimizer step, 4 steps."""
import torch
import torch.nn as nn

torch.manual_seed(3)
model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(4):
    for micro in range(2):
        logits = model(torch.randn(5, 8))
        loss = nn.functional.cross_entropy(logits, torch.randint(0, 4, (5,))) / 2
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
print(f"loss {loss.item():.3f}")
