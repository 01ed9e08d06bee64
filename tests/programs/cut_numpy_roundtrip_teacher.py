"""Distillation with the teacher's logits through numpy: an intended cut (info); the teacher is in no optimizer,
so its parameters are frozen on purpose, not dead."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
teacher, student = nn.Linear(4, 3), nn.Linear(4, 3)
opt = torch.optim.SGD(student.parameters(), lr=0.1)
for step in range(2):
    x = torch.randn(5, 4)
    soft = torch.from_numpy(teacher(x).data.cpu().numpy())  # expect: cut_edge
    loss = F.kl_div(F.log_softmax(student(x), 1), F.softmax(soft, 1), reduction="batchmean")
    opt.zero_grad(); loss.backward(); opt.step()
