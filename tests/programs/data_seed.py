"""The seed document's first example: a write through .data corrupts tanh's saved output silently."""
import torch

a = torch.tensor([1, 2, 3.], requires_grad=True)
print(a)
out = a.tanh()
print(out)
c = out.data
c.zero_()  # expect: silently_corrupted_saved_tensor
print(c.requires_grad)
print(c)
print(out.requires_grad)
print(out)
print("----------------------------------------------")

out.sum().backward()
print(a.grad)  # tensor([1., 1., 1.]) instead of 1 - tanh(a)**2
