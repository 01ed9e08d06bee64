# raises: RuntimeError
"""The seed document's second example: a write through .detach() bumps the shared version counter."""
import torch

a = torch.tensor([1, 2, 3.], requires_grad=True)
print(a)
out = a.tanh()
print(out)
c = out.detach()
c.zero_()  # expect: poisoned_saved_tensor
print(c.requires_grad)
print(c)
print(out.requires_grad)
print(out)
print("----------------------------------------------")

out.sum().backward()
print(a.grad)
