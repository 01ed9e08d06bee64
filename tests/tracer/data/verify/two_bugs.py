"""Two silent writes: relu's output clamped (harmless: relu reads the sign, fc2 saved the clamped values after the
write) and a sigmoid's saved output halved (its backward reads it: fc3's gradients are wrong)."""
import torch

torch.manual_seed(0)
fc1 = torch.nn.Linear(4, 8)
fc2 = torch.nn.Linear(8, 2)
fc3 = torch.nn.Linear(4, 2)
x = torch.randn(16, 4) * 3
h = torch.relu(fc1(x))
h.data.clamp_(max=1.0)  # expect: silently_corrupted_saved_tensor
gate = torch.sigmoid(fc3(x))
gate.data.mul_(0.5)  # expect: silently_corrupted_saved_tensor
out = fc2(h) * gate
out.pow(2).mean().backward()
