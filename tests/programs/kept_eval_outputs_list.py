"""Predictions collected straight from the model in an evaluation loop without torch.no_grad(): every batch's
graph, made inside the model's forward, stays alive in the list."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.out = nn.Linear(8, 16), nn.Linear(16, 2)

    def forward(self, x):
        return self.out(torch.relu(self.body(x)))


model = Head().eval()
outputs = []
for batch in torch.randn(4, 3, 8):
    outputs.append(model(batch))  # expect: graph_kept_alive
print(torch.cat(outputs).shape)
