"""A word-level LSTM language model trained with truncated BPTT on synthetic text: `python lstm_lm.py BATCHES`.

Shaped like PyTorch's word_language_model example: embedding, 2-layer nn.LSTM, decoder, the hidden state detached
between chunks, gradient clipping and a manual SGD update through `p.data` (no optimizer: the window counts
backward() calls).
"""

import sys

import torch
from torch import nn

torch.manual_seed(0)
batches = int(sys.argv[1]) if len(sys.argv) > 1 else 600
vocab, emsize, nhid, bptt, batch = 2000, 64, 64, 20, 16
corpus = torch.randint(0, vocab, (batch, bptt * 50 + 1)).t().contiguous()  # 50 chunks, reused round-robin


class LM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(vocab, emsize)
        self.rnn = nn.LSTM(emsize, nhid, 2, dropout=0.2)
        self.decoder = nn.Linear(nhid, vocab)

    def forward(self, tokens, hidden):
        output, hidden = self.rnn(self.encoder(tokens), hidden)
        return self.decoder(output).view(-1, vocab), hidden


def repackage(hidden):
    return tuple(h.detach() for h in hidden)


model = LM()
lr = 5.0
hidden = (torch.zeros(2, batch, nhid), torch.zeros(2, batch, nhid))
total = 0.0
for i in range(batches):
    start = (i % 50) * bptt
    data, targets = corpus[start : start + bptt], corpus[start + 1 : start + 1 + bptt].reshape(-1)
    hidden = repackage(hidden)
    model.zero_grad()
    output, hidden = model(data, hidden)
    loss = nn.functional.cross_entropy(output, targets)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    total += loss.item()
    if (i + 1) % 50 == 0:
        print(f"batch {i + 1}: loss {total / 50:.5f}")
        total = 0.0
print(f"final loss {loss.item():.8f}")
