"""
EMA teacher updated under no_grad after backward
================================================

The same student/teacher pair as in the previous example, but the EMA update
runs after ``backward()`` has consumed the graph, inside ``torch.no_grad()``
and without ``.data``. No saved tensor is alive when the teacher's weights
change, and the next forward pass saves the new values.

Findings: none
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)

student = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
teacher = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)

for step in range(3):
    x = torch.randn(16, 4)
    loss = ((student(x) - teacher(x)) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for pt, ps in zip(teacher.parameters(), student.parameters()):
            pt.mul_(0.99).add_(0.01 * ps)
    print(f"step {step}: loss {loss.item():.4f}")
