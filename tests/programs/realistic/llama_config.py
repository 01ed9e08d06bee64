"""Llama built from a transformers config (no download), trained 2 steps on random tokens: 4 decoder layers, or
as many as the first argument says."""
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
config = LlamaConfig(num_hidden_layers=int(sys.argv[1]) if len(sys.argv) > 1 else 4, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                     num_key_value_heads=2, vocab_size=64, max_position_embeddings=32)
model = LlamaForCausalLM(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

for step in range(2):
    tokens = torch.randint(0, config.vocab_size, (2, 12))
    out = model(tokens, labels=tokens)
    optimizer.zero_grad()
    out.loss.backward()
    optimizer.step()
    print(f"step {step} loss {out.loss.item():.3f}")
