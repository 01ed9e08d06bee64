"""
A recurrent state carried without ``.detach()``
===============================================

Truncated backpropagation through time without the detach: ``hidden`` leaves
the first chunk still attached to that chunk's graph, which the first
``backward()`` freed. The second chunk builds on it, so the second backward
walks into freed buffers and raises *"Trying to backward through the graph a
second time"*. ``retain_graph=True`` is not the fix; ``hidden =
hidden.detach()`` at the start of each chunk is (see the TBPTT example).

Findings: backward_through_freed_graph
Raises: RuntimeError
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
rnn = nn.RNN(3, 8, batch_first=True)
head = nn.Linear(8, 1)
opt = torch.optim.SGD(list(rnn.parameters()) + list(head.parameters()), lr=0.1)
sequence, target = torch.randn(4, 12, 3), torch.randn(4, 12, 1)
hidden = torch.zeros(1, 4, 8)
for inputs, wanted in zip(sequence.split(4, dim=1), target.split(4, dim=1)):
    out, hidden = rnn(inputs, hidden)  # hidden still carries the previous chunk's graph
    loss = nn.functional.mse_loss(head(out), wanted)
    opt.zero_grad()
    loss.backward()
    opt.step()
