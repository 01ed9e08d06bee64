"""A hand-written layer using `self.weight.data` in forward: its parameters never train."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class MyLinear(nn.Module):
    def __init__(self, n, m):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, m) * 0.1)
        self.bias = nn.Parameter(torch.zeros(m))

    def forward(self, X):
        return torch.matmul(X, self.weight.data) + self.bias.data  # expect: cut_edge; expect: dead_parameter params=model.0.weight,model.0.bias


model = nn.Sequential(MyLinear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    loss = model(torch.randn(3, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
