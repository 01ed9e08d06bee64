"""An LSTM language model with truncated BPTT (the state detached between chunks) and gradient clipping."""
import torch, torch.nn as nn
torch.manual_seed(0)
vocab, emb, hid = 50, 16, 32
class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb); self.lstm = nn.LSTM(emb, hid, batch_first=True); self.out = nn.Linear(hid, vocab)
    def forward(self, x, state=None):
        h, state = self.lstm(self.emb(x), state)
        return self.out(h), state
model = LM(); opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
data = torch.randint(0, vocab, (4, 41))
state = None
for i in range(0, 40, 10):
    x, y = data[:, i:i+10], data[:, i+1:i+11]
    if state is not None:
        state = tuple(s.detach() for s in state)  # expect: cut_edge
    logits, state = model(x, state)
    loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
    opt.zero_grad(); loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    print(loss.item())
