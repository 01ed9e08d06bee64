"""Loss history kept as tensors in a list and in a dict of lists: every step's graph stays alive."""
import torch
import torch.nn as nn

torch.manual_seed(0)
encoder, decoder = nn.Linear(6, 3), nn.Linear(3, 6)
opt = torch.optim.Adam(list(encoder.parameters()) + list(decoder.parameters()), lr=1e-3)
losses = []
history = {"recon": [], "reg": []}
for step in range(3):
    x = torch.randn(5, 6)
    z = torch.tanh(encoder(x))
    recon = (decoder(z) - x).pow(2).mean()
    reg = z.pow(2).mean()
    loss = recon + 0.1 * reg
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss)  # expect: graph_kept_alive
    history["recon"].append(recon)  # expect: graph_kept_alive
    history["reg"].append(reg.item())  # a number: no graph kept
print(len(losses), history["reg"][-1])
