"""Two layers trained one after the other on a fixed batch of 64 (forward-forward style): the second layer reads 300
features instead of 200, and its input is the first layer's output, cut off by `.detach()`."""
import torch
import torch.nn as nn

torch.manual_seed(2)
inputs = torch.randn(64, 200)
for layer in [nn.Linear(200, 300), nn.Linear(300, 300)]:
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.01)
    for step in range(3):
        goodness = torch.relu(torch.mm(inputs, layer.weight.T) + layer.bias).pow(2).mean()
        optimizer.zero_grad()
        goodness.backward()
        optimizer.step()
    inputs = torch.relu(layer(inputs)).detach()
