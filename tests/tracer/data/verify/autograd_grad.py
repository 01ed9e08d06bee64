"""`torch.autograd.grad` through a saved tensor changed by `.data`: the returned gradients are wrong."""
import torch

torch.manual_seed(0)
x = torch.randn(5, requires_grad=True)
w = torch.randn(5, requires_grad=True)
s = torch.sigmoid(x * w)  # SigmoidBackward0 saves its result
s.data.mul_(0.5)
gx, gw = torch.autograd.grad(s.sum(), [x, w])
print("gx:", gx)
print("gw:", gw)
