"""
EMA teacher updated through .data before backward
=================================================

The loss is built from the outputs of a student and of an EMA teacher whose
parameters still require grad, so the teacher's second layer saves its weight
for backward. The EMA update then rewrites the teacher's weights in place
through ``.data``: the bytes change but the saved tensor's version counter does
not, so backward succeeds and computes the teacher's first-layer gradients with
the new weights.

Findings: silently_corrupted_saved_tensor
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)

student = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
teacher = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
x = torch.randn(16, 4)

loss = ((student(x) - teacher(x)) ** 2).mean()
for pt, ps in zip(teacher.parameters(), student.parameters()):
    pt.data.mul_(0.99).add_(0.01 * ps.data)
loss.backward()
print("teacher[0].weight.grad[0] (computed with the updated teacher[2].weight):")
print(teacher[0].weight.grad[0])
