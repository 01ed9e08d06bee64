"""
Truncated backpropagation through time
======================================

An RNN processes a 12-step sequence in three chunks of four steps. Before each
chunk the hidden state is detached, so each ``backward()`` reaches back only to
the start of its chunk; the hidden state's values still carry over. Without
the detach the second backward would walk into the first chunk's freed graph.

Findings: cut_edge
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)

cell = nn.RNNCell(3, 5)
head = nn.Linear(5, 1)
optimizer = torch.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.1)
inputs, targets = torch.randn(12, 2, 3), torch.randn(12, 2, 1)

h = torch.zeros(2, 5)
for chunk in range(3):
    h = h.detach()
    loss = torch.zeros(())
    for t in range(4 * chunk, 4 * chunk + 4):
        h = cell(inputs[t], h)
        loss = loss + ((head(h) - targets[t]) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"chunk {chunk}: loss {loss.item():.4f}")
