"""An optimizer wrapper that decays every requires_grad parameter through p.data before the inner step: the
frozen backbone (cut by .detach()) keeps shrinking although no gradient ever reaches it."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class DecayWrapper:
    def __init__(self, optimizer, weight_decay):
        self.optimizer, self.weight_decay = optimizer, weight_decay

    def step(self):
        for group in self.optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    p.data.mul_(1 - group["lr"] * self.weight_decay)  # expect: update_without_gradient param=backbone.weight; expect: update_without_gradient param=backbone.bias
        self.optimizer.step()

    def zero_grad(self):
        self.optimizer.zero_grad()


backbone, head = nn.Linear(4, 8), nn.Linear(8, 1)
opt = DecayWrapper(torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.1), 0.01)
for step in range(3):
    feats = backbone(torch.randn(8, 4)).detach()  # expect: cut_edge; expect: dead_parameter params=backbone.weight,backbone.bias
    loss = head(feats).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
