"""Sine waves predicted one time step at a time by two stacked LSTM cells and a linear head, trained with L-BFGS
(full batch, the optimizer calls the closure several times a step). Each cell is called once per time step, so its
parameters feed every call: a rolled loop of 40 iterations whose edges fan out across boxes."""
import torch
import torch.nn as nn

torch.manual_seed(0)
TIME_STEPS = 40


class Predictor(nn.Module):
    def __init__(self, hidden: int = 16) -> None:
        super().__init__()
        self.hidden = hidden
        self.cell1 = nn.LSTMCell(1, hidden)
        self.cell2 = nn.LSTMCell(hidden, hidden)
        self.head = nn.Linear(hidden, 1)

    def forward(self, signal: torch.Tensor) -> torch.Tensor:
        h1 = c1 = torch.zeros(signal.size(0), self.hidden)
        h2 = c2 = torch.zeros(signal.size(0), self.hidden)
        predictions = []
        for value in signal.split(1, dim=1):
            h1, c1 = self.cell1(value, (h1, c1))
            h2, c2 = self.cell2(h1, (h2, c2))
            predictions.append(self.head(h2))
        return torch.cat(predictions, dim=1)


phase = torch.rand(8, 1) * 6.28
waves = torch.sin(torch.arange(TIME_STEPS + 1).float() / 4 + phase)
signal, target = waves[:, :-1], waves[:, 1:]
model = Predictor()
criterion = nn.MSELoss()
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=3)


def closure():
    optimizer.zero_grad()
    loss = criterion(model(signal), target)
    loss.backward()
    return loss


for epoch in range(2):
    loss = optimizer.step(closure)
print(f"loss {loss.item():.4f}")
