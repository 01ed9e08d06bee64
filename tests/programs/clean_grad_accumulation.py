"""Gradient accumulation over two batches, an auxiliary head used on every other batch, a DataLoader: clean."""
import torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
aux = nn.Linear(8, 1)  # an auxiliary head used only on even steps
opt = torch.optim.Adam(list(model.parameters()) + list(aux.parameters()), lr=1e-3, weight_decay=1e-4)
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,))), batch_size=8, shuffle=True)
for step, (x, y) in enumerate(loader):
    h = model[1](model[0](x))
    loss = nn.functional.cross_entropy(model[2](h), y) / 2
    if step % 2 == 0:
        loss = loss + aux(h).pow(2).mean()
    loss.backward()
    if step % 2 == 1:  # gradient accumulation over two batches
        opt.step()
        opt.zero_grad()
    print(step, loss.item())
