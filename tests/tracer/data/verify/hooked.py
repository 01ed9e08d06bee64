"""A tensor hook in a graph whose saved tensor is written through `.data`: measuring would run the hook twice."""
import torch

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
h = a * 2
h.register_hook(lambda g: print("hook saw", g))
out = h.tanh()
out.data.zero_()
out.sum().backward()
print("a.grad:", a.grad)
