"""A GRU cell's state carried into a new graph after backward freed the old one; the script stops before the
next backward, so the error is predicted (a warning): the next backward would raise."""
import torch
import torch.nn as nn

torch.manual_seed(0)
cell = nn.GRUCell(3, 4)
h = torch.zeros(2, 4)
for t in range(3):
    h = cell(torch.randn(2, 3), h)
h.pow(2).mean().backward()
h = cell(torch.randn(2, 3), h)  # expect: backward_through_freed_graph
prediction = h.pow(2).mean()
print(prediction.item())
