"""A feature extractor 'frozen' by detaching its output before the head: all four of its parameters are dead."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.extractor = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 6))
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        features = self.extractor(x)
        features = features.detach()  # expect: cut_edge; expect: dead_parameter params=model.extractor.0.weight,model.extractor.0.bias,model.extractor.2.weight,model.extractor.2.bias
        return self.head(features)


model = Model()
optimizer = torch.optim.SGD(model.head.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
for step in range(3):
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
assert all(p.grad is None for p in model.extractor.parameters())
