# raises: RuntimeError
"""y is saved as an input of y * y; y.detach_() makes backward raise."""
import torch

torch.manual_seed(0)

x = torch.randn(3, requires_grad=True)
y = x * 2
z = y * y
y.detach_()  # expect: detach_inplace_saved
z.sum().backward()
