"""GPT-2 with 2 layers built from a transformers config (no download), trained for 4 steps on random tokens."""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=64, n_positions=16, attn_pdrop=0.0,
                    embd_pdrop=0.0, resid_pdrop=0.0)
model = GPT2LMHeadModel(config)
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = torch.randint(0, 64, (12, 8))
for start in range(0, 12, 4):
    batch = tokens[start:start + 4]
    loss = model(input_ids=batch, labels=batch).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.3f}")
