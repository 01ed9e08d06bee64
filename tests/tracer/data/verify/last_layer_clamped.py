"""A four-layer MLP whose last weight is clamped through .data between forward and backward: every earlier layer's
gradient reads it (six wrong), its own gradient and its bias's do not (identical); the weight written is listed."""
import torch

torch.manual_seed(0)
net = torch.nn.Sequential(
    torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8),
    torch.nn.Tanh(), torch.nn.Linear(8, 1),
)
x = torch.randn(16, 4)
loss = net(x).pow(2).mean()
net[6].weight.data.clamp_(-0.05, 0.05)  # expect: silently_corrupted_saved_tensor
loss.backward()
