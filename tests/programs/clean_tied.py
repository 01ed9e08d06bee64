"""Weight tying: one parameter used by an embedding and an output layer: clean."""
import torch, torch.nn as nn
torch.manual_seed(0)
emb = nn.Embedding(20, 8); out = nn.Linear(8, 20, bias=False); out.weight = emb.weight
opt = torch.optim.SGD(list(emb.parameters()), lr=0.1)
x = torch.randint(0, 20, (4, 5))
for _ in range(2):
    logits = out(emb(x))
    loss = nn.functional.cross_entropy(logits.reshape(-1, 20), x.reshape(-1))
    opt.zero_grad(); loss.backward(); opt.step()
