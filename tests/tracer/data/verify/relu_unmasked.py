"""The same write as relu_masked.py, but onto a position relu kept: its gradient is now wrong."""
import torch

x = torch.tensor([-1.0, 2.0, -3.0, 4.0], requires_grad=True)
h = x.relu()
m = h.data
m[0] = 5.0  # a masked position turns positive: backward now lets a gradient through there
loss = (h * 3).sum()
loss.backward()
print("x.grad:", x.grad)
