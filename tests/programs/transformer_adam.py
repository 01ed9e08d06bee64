"""A TransformerEncoder regressor trained with Adam, logging through .detach().cpu().numpy(): clean."""
import torch, torch.nn as nn
torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True, dropout=0.1)
enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
head = nn.Linear(16, 1)
params = list(enc.parameters()) + list(head.parameters())
opt = torch.optim.Adam(params, lr=1e-3)
x, y = torch.randn(8, 5, 16), torch.randn(8, 1)
for step in range(3):
    pred = head(enc(x).mean(1))
    loss = nn.functional.mse_loss(pred, y)
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    print(step, round(loss.item(), 4), pred.detach().cpu().numpy().shape)
