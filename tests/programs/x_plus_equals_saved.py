# raises: RuntimeError
"""x * x saves x; `x += 1` on the non-leaf x bumps its version, so backward raises."""
import torch

torch.manual_seed(0)

a = torch.randn(3, requires_grad=True)
x = a * 2
y = x * x
x += 1  # expect: poisoned_saved_tensor
y.sum().backward()
