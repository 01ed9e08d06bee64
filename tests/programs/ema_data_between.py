"""EMA teacher updated through .data between the forward pass and backward: silent corruption."""
import torch
import torch.nn as nn

torch.manual_seed(0)

student = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
teacher = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
x = torch.randn(16, 4)

loss = ((student(x) - teacher(x)) ** 2).mean()
for pt, ps in zip(teacher.parameters(), student.parameters()):
    pt.data.mul_(0.99).add_(0.01 * ps.data)  # expect: silently_corrupted_saved_tensor
loss.backward()
