"""
Writing through .data: a silently wrong gradient
================================================

原题：Pytorch中x.data()与x.detach()的区别（代码示例一：x.data）

``out.data`` shares storage with ``out`` but gets its own version counter, which
starts at 0. ``c.zero_()`` overwrites the values that ``TanhBackward`` saved
(tanh's output), yet the saved tensor's version still reads 0, so autograd's
check passes. Backward computes ``1 - 0**2 = 1`` instead of ``1 - tanh(a)**2``.

Findings: silently_corrupted_saved_tensor
Raises: none
"""
import torch

torch.manual_seed(0)

a = torch.tensor([1, 2, 3.], requires_grad=True)
print(a)
out = a.tanh()
print(out)
c = out.data  # shares out's memory, but not its version counter
c.zero_()  # changes out too: tanh's saved output is now all zeros
print(c.requires_grad)
print(c)
print(out.requires_grad)
print(out)
print("----------------------------------------------")

out.sum().backward()
print(a.grad)  # tensor([1., 1., 1.]): no error, but wrong
with torch.no_grad():
    print("correct gradient:", 1 - a.tanh() ** 2)
