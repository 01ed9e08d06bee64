"""relu's saved output clamped through .data, then saved again by fc2 after the write: relu's backward reads only
the sign (unchanged), fc2 reads what it saved (the clamped values): every gradient is right."""
import torch

torch.manual_seed(0)
fc1 = torch.nn.Linear(4, 8)
fc2 = torch.nn.Linear(8, 2)
x = torch.randn(16, 4) * 3
h = torch.relu(fc1(x))
h.data.clamp_(max=1.0)  # expect: silently_corrupted_saved_tensor
out = fc2(h)
out.pow(2).mean().backward()
