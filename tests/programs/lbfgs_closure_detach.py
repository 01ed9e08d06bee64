"""A detach inside an LBFGS closure: the closure runs inside optimizer.step(), and is traced like any other code."""
import torch
import torch.nn as nn

torch.manual_seed(0)

encoder, head = nn.Linear(3, 4), nn.Linear(4, 1)
optimizer = torch.optim.LBFGS([*encoder.parameters(), *head.parameters()], lr=0.5, max_iter=2)
x, y = torch.randn(16, 3), torch.randn(16, 1)


def closure():
    optimizer.zero_grad()
    features = encoder(x).detach()  # expect: cut_edge; expect: dead_parameter params=encoder.weight,encoder.bias
    loss = nn.functional.mse_loss(head(features), y)
    loss.backward()
    return loss


optimizer.step(closure)
