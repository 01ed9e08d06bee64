"""A backbone frozen with requires_grad_(False) but still handed to the optimizer: clean."""
import torch, torch.nn as nn
torch.manual_seed(0)
backbone = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
head = nn.Linear(8, 1)
backbone(torch.randn(2, 4))  # a first call, before freezing, as loading code often does
for p in backbone.parameters():
    p.requires_grad_(False)
model = nn.Sequential(backbone, head)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for _ in range(3):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
