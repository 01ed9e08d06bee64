"""The seed document's TestDetach module: layer1's output is detached, so layer1 never learns."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class TestDetach(nn.Module):
    def __init__(self, InDim, HiddenDim, OutDim):
        super().__init__()
        self.layer1 = nn.Linear(InDim, HiddenDim, False)
        self.layer2 = nn.Linear(HiddenDim, OutDim, False)

    def forward(self, x, DetachLayer1=True):
        x = torch.relu(self.layer1(x))
        x = x.detach()  # expect: cut_edge; expect: dead_parameter params=model.layer1.weight
        x = self.layer2(x)
        return x


model = TestDetach(4, 3, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, target = torch.randn(8, 4), torch.randn(8, 2)
for step in range(3):
    optimizer.zero_grad()
    loss = ((model(x, True) - target) ** 2).mean()
    loss.backward()
    optimizer.step()
assert model.layer1.weight.grad is None and model.layer2.weight.grad is not None
