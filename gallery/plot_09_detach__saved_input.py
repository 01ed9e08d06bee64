"""
detach_() on a tensor saved for backward
========================================

原题：pytorch中detach()和detach_()的用法和区别（被保存的输入上的 detach_()）

``z = y * y`` saves ``y`` as an input, because the gradient of a product needs
the other factor. ``y.detach_()`` detaches that very tensor in place (without
bumping its version counter), and backward refuses to use it: "Trying to use a
saved tensor that has been detached in-place".

Findings: detach_inplace_saved
Raises: RuntimeError
"""
import torch

torch.manual_seed(0)

x = torch.randn(3, requires_grad=True)
y = x * 2
z = y * y  # MulBackward0 saves y (twice: self and other)
version_before = y._version
y.detach_()
print("y.grad_fn =", y.grad_fn, "| version unchanged:", y._version == version_before)
z.sum().backward()  # RuntimeError: Trying to use a saved tensor that has been detached in-place
