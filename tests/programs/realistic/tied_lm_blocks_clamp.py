"""A tied-weight LM with two blocks, 30 AdamW steps (`python tied_lm_blocks_clamp.py N`: N steps): each block clamps
its hidden activations through `.data` after `fc2` saved them, so each `fc2.weight` gradient is silently wrong."""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
vocab, n_embd = 32, 16


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(n_embd, 4 * n_embd)
        self.fc2 = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        out = self.fc2(h)
        h.data.clamp_(max=1.0)  # after fc2 saved h
        return x + out


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(n_embd, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx):
        x = self.wte(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
model = LM()
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
data = torch.randint(0, vocab, (64, 9))
for step in range(steps):
    batch = data[(step * 8) % 64:(step * 8) % 64 + 8]
    logits = model(batch[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, vocab), batch[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"loss {loss.item():.3f}")
