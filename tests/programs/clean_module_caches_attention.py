"""Each attention block caches its last attention map on itself (`self.last_attn = attn`) and the loop variable
holds the last output: one forward's graph, over several modules, not many steps kept alive. No finding."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(8, 8)

    def forward(self, x):
        attn = torch.softmax(self.q(x) @ x.transpose(-1, -2), -1)
        self.last_attn = attn
        return attn @ x


model = nn.Sequential(*[Block() for _ in range(4)])
for _ in range(3):
    out = model(torch.randn(2, 5, 8))
print(out.shape, model[0].last_attn.shape)
