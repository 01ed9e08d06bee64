"""A hyperparameter sweep: the second model is initialised in place after the first one's backward calls; an
initialisation is not an update. Nothing to report."""
import torch
import torch.nn as nn

for run in range(2):
    torch.manual_seed(run)
    m = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.Linear(16, 2))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for step in range(3):
        loss = nn.functional.cross_entropy(m(torch.randn(4, 8)), torch.randint(0, 2, (4,)))
        opt.zero_grad(); loss.backward(); opt.step()
