"""A CNN with BatchNorm trained for 40 steps (`python cnn_late_validation.py STEPS VALIDATE_AT`), with a validation
pass after step 25 that keeps every batch's graph alive: `val_loss += loss` without `.item()` or `no_grad`. Traced
with a window shorter than 25 steps (`--steps 10`), the sentinel traces the validation and the steps after it again."""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
validate_at = int(sys.argv[2]) if len(sys.argv) > 2 else 25


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
xs, ys = torch.randn(64, 1, 8, 8), torch.randint(0, 10, (64,))
val_batches = [(torch.randn(4, 1, 8, 8), torch.randint(0, 10, (4,))) for _ in range(6)]
for step in range(1, steps + 1):
    model.train()
    i = (step * 8) % 64
    loss = F.cross_entropy(model(xs[i:i + 8]), ys[i:i + 8])
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == validate_at:
        model.eval()
        val_loss = 0.0
        for vx, vy in val_batches:
            out = model(vx)
            loss = F.cross_entropy(out, vy)
            val_loss += loss  # the leak: every validation batch's graph stays alive
        print(f"step {step}: val loss {val_loss.item() / len(val_batches):.3f}")
