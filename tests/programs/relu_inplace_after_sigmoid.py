# raises: RuntimeError
"""nn.ReLU(inplace=True) writes into sigmoid's saved output, so backward raises."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        h = torch.sigmoid(self.fc(x))
        h = self.act(h)  # expect: poisoned_saved_tensor
        return h


model = Block()
out = model(torch.randn(8, 4))
out.sum().backward()
