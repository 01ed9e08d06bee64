"""A small GPT-like LM with tied embedding weights (the output layer uses the embedding matrix), 30 steps of AdamW
(`python tied_lm_data_renorm.py N`: N steps), and a `.data` write bug: the embedding rows are renormalised through
`.data` between the forward and the backward, so the weight the output layer saved is silently corrupted."""
import math
import sys

import torch
import torch.nn as nn
from torch.nn import functional as F

torch.manual_seed(0)
block_size, vocab, n_embd, n_head = 8, 48, 16, 2


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(n_embd, dim=2)
        q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
        k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
        v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = Attention()
        self.ln2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.block = Block()
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied

    def forward(self, idx):
        pos = torch.arange(idx.size(1))
        x = self.wte(idx) + self.wpe(pos)
        return self.head(self.ln_f(self.block(x)))


def renorm_embeddings(model, max_norm=1.0):
    w = model.wte.weight.data  # the bug: .data hides this write from autograd
    norms = w.norm(dim=1, keepdim=True).clamp(min=max_norm)
    w.mul_(max_norm / norms)


model = TinyGPT()
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
data = torch.randint(0, vocab, (600,))
for step in range(int(sys.argv[1]) if len(sys.argv) > 1 else 30):
    ix = torch.randint(len(data) - block_size - 1, (4,))
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
    logits = model(x)
    loss = F.cross_entropy(logits.view(-1, vocab), y.view(-1))
    renorm_embeddings(model)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"final loss {loss.item():.3f}")
