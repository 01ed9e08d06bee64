"""LSTM language model trained by hand: clip the gradients, then `p.data.add_(p.grad, alpha=-lr)` for every
parameter (a correct program; the word-language-model example's loop). Random tokens, 12 steps, seconds on CPU."""
import torch
import torch.nn as nn

torch.manual_seed(0)
vocab, emb, hid, bptt, lr = 30, 8, 12, 4, 0.5


class RNNModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hid, 2)
        self.decoder = nn.Linear(hid, vocab)

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(output), hidden


model = RNNModel().to("cpu")
data = torch.randint(0, vocab, (12 * bptt + 1, 3))
hidden = (torch.zeros(2, 3, hid), torch.zeros(2, 3, hid))
for i in range(0, 12 * bptt, bptt):
    x, y = data[i:i + bptt], data[i + 1:i + 1 + bptt]
    hidden = tuple(h.detach() for h in hidden)
    model.zero_grad()
    output, hidden = model(x, hidden)
    loss = nn.functional.cross_entropy(output.view(-1, vocab), y.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
print(f"final loss {loss.item():.3f}")
