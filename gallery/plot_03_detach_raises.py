"""
Writing through .detach(): autograd notices
===========================================

原题：Pytorch中x.data()与x.detach()的区别（代码示例二：x.detach()）

``out.detach()`` also shares storage with ``out``, but unlike ``.data`` it shares
``out``'s version counter too. ``c.zero_()`` bumps that counter from 0 to 1;
``TanhBackward`` saved ``out`` at version 0, so backward refuses to use it and
raises instead of returning a wrong gradient.

Findings: poisoned_saved_tensor
Raises: RuntimeError
"""
import torch

torch.manual_seed(0)

a = torch.tensor([1, 2, 3.], requires_grad=True)
print(a)
out = a.tanh()
print(out)
c = out.detach()  # shares out's memory and its version counter
c.zero_()  # out._version goes from 0 to 1
print(c.requires_grad)
print(c)
print(out.requires_grad)
print(out)
print("----------------------------------------------")

out.sum().backward()  # RuntimeError: ... is at version 1; expected version 0 instead
print(a.grad)
