"""A GPT-2 (2 layers) built from a `transformers` config, trained for a few steps on random tokens: the explorer's
size and speed benchmark (benchmarks/bench_explorer.py) and its gallery screenshot."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=4, n_embd=128, n_positions=64, vocab_size=1000, bos_token_id=0, eos_token_id=0)
model = GPT2LMHeadModel(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

for step in range(3):
    tokens = torch.randint(0, config.vocab_size, (4, 32))
    loss = model(tokens, labels=tokens).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.3f}")
