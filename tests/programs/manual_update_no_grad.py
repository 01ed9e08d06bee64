"""A hand-written step: `p.mul_` under no_grad and `p.copy_` on every parameter, also on the one no gradient
reached (its input was detached); an EMA target network updated the same way stays silent."""
import copy

import torch
import torch.nn as nn

torch.manual_seed(0)
stem, head = nn.Linear(3, 4), nn.Linear(4, 1)
target = copy.deepcopy(head)
for step in range(2):
    loss = head(stem(torch.randn(5, 3)).detach()).pow(2).mean()  # expect: cut_edge; expect: dead_parameter params=stem.weight,stem.bias
    loss.backward()
    with torch.no_grad():
        for p in list(stem.parameters()) + list(head.parameters()):
            p.mul_(0.999)  # expect: update_without_gradient param=stem.weight; expect: update_without_gradient param=stem.bias
            if p.grad is not None:
                p.sub_(0.1 * p.grad)
                p.grad = None
        stem.weight.copy_(stem.weight.clamp(-1, 1))  # expect: update_without_gradient param=stem.weight
        for pt, ps in zip(target.parameters(), head.parameters()):
            pt.mul_(0.99).add_(0.01 * ps)
