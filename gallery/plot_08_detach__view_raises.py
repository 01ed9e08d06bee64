"""
detach_() on a view raises
==========================

原题：pytorch中detach()和detach_()的用法和区别（视图上的 detach_()）

A view shares its base's storage and autograd history, so autograd cannot turn
the view alone into a leaf. ``detach_()`` on a view raises "Can't detach views
in-place"; ``detach()`` is the out-of-place alternative.

Findings: none
Raises: RuntimeError
"""
import torch

torch.manual_seed(0)

a = torch.randn(4, requires_grad=True)
b = a * 2
v = b[:2]  # a view of b
print("v is a view:", v._is_view(), "| v.grad_fn =", type(v.grad_fn).__name__)
print("v.detach() works:", v.detach())
v.detach_()  # RuntimeError: Can't detach views in-place. Use detach() instead.
