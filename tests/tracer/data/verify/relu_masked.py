"""A write through `.data` onto the positions relu zeroed: ReluBackward reads its saved result only where it is > 0."""
import torch

x = torch.tensor([-1.0, 2.0, -3.0, 4.0], requires_grad=True)
h = x.relu()  # ReluBackward0 saves its result
m = h.data
m[0] = -5.0  # below zero, as relu's zero was: the mask backward reads is unchanged
m[2] = -7.0
loss = (h * 3).sum()
loss.backward()
print("x.grad:", x.grad)
