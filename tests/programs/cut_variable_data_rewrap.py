"""Old-style GAN code: the critic's fake batch re-wrapped as `Variable(netG(noise).data)`; the generator trains
through its own step, so the cut is intended (info), and no parameter is dead."""
import torch
import torch.nn as nn
from torch.autograd import Variable

torch.manual_seed(0)
netG, netD = nn.Linear(4, 8), nn.Linear(8, 1)
optD = torch.optim.SGD(netD.parameters(), lr=0.1)
optG = torch.optim.SGD(netG.parameters(), lr=0.1)
for step in range(2):
    fake = Variable(netG(torch.randn(3, 4)).data)  # expect: cut_edge
    errD = netD(fake).mean()
    optD.zero_grad(); errD.backward(); optD.step()
    errG = -netD(netG(torch.randn(3, 4))).mean()
    optG.zero_grad(); errG.backward(); optG.step()
