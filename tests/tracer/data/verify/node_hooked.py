"""A hook put on a grad_fn itself, which no torch function call shows: measuring would run it a second time."""
import torch

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.tanh()
out.grad_fn.register_prehook(lambda grad_outputs: print("prehook ran"))
out.data.zero_()
out.sum().backward()
print("a.grad:", a.grad)
