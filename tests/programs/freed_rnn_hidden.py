# raises: RuntimeError
"""A recurrent state carried across chunks without .detach(): the second chunk's backward raises."""
import torch
import torch.nn as nn

torch.manual_seed(0)
rnn = nn.RNN(3, 5, batch_first=True)
head = nn.Linear(5, 1)
opt = torch.optim.SGD(list(rnn.parameters()) + list(head.parameters()), lr=0.1)
data = torch.randn(2, 12, 3)
hidden = torch.zeros(1, 2, 5)
for chunk in data.split(4, dim=1):
    out, hidden = rnn(chunk, hidden)  # expect: backward_through_freed_graph
    loss = head(out).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
