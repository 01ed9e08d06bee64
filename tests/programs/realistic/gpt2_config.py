"""GPT-2 with 2 layers built from a transformers config (no download), trained 3 steps on random tokens."""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=16)
model = GPT2LMHeadModel(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

for step in range(3):
    tokens = torch.randint(0, config.vocab_size, (2, 12))
    out = model(tokens, labels=tokens)
    optimizer.zero_grad()
    out.loss.backward()
    optimizer.step()
    print(f"step {step} loss {out.loss.item():.3f}")
