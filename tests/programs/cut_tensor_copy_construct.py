"""`torch.tensor(h)` and `h.new_tensor(h)` copy values without their history: the encoder, which the optimizer
trains, gets no gradient (PyTorch itself warns to use `sourceTensor.detach().clone()`)."""
import torch
import torch.nn as nn

torch.manual_seed(0)
enc, head = nn.Linear(4, 8), nn.Linear(8, 1)
opt = torch.optim.SGD([*enc.parameters(), *head.parameters()], lr=0.1)
for step in range(2):
    h = enc(torch.randn(3, 4))
    z = torch.tensor(h)  # expect: cut_edge; expect: dead_parameter params=enc.weight,enc.bias
    w = h.new_tensor(h)  # expect: cut_edge
    loss = head(z).mean() + head(w).mean()
    opt.zero_grad(); loss.backward(); opt.step()
