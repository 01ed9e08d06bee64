"""After one normal step layer1 is frozen by detach, but zero grads + momentum + weight decay keep moving it."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Linear(4, 3)
        self.layer2 = nn.Linear(3, 2)
        self.freeze_layer1 = False

    def forward(self, x):
        h = torch.relu(self.layer1(x))
        if self.freeze_layer1:
            h = h.detach()  # expect: cut_edge
        return self.layer2(h)


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
x, target = torch.randn(8, 4), torch.randn(8, 2)
for step in range(3):
    model.freeze_layer1 = step > 0
    optimizer.zero_grad(set_to_none=False)
    loss = ((model(x) - target) ** 2).mean()
    loss.backward()
    before = model.layer1.weight.detach().clone()
    optimizer.step()  # expect: update_without_gradient param=model.layer1.weight; expect: update_without_gradient param=model.layer1.bias
    assert step == 0 or not torch.equal(model.layer1.weight.detach(), before)
assert (model.layer1.weight.grad == 0).all()
