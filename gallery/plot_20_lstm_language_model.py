"""
A word-level LSTM language model, 48 chunks of truncated BPTT
=============================================================

A language model reads its corpus in 48 chunks of five tokens. Between chunks
the LSTM's state ``(h, c)`` is detached: each ``backward()`` reaches back only
to the start of its chunk while the values carry over. The graph view draws
the 48 training steps once, marked ``step ×48``, with the cut of the detached
state at line 40 drawn on it; ``--step 7`` draws the seventh step as it was.

Findings: cut_edge
Raises: none
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
vocab, emb, hid, bptt = 40, 8, 16, 5


class LanguageModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hid, batch_first=True)
        self.decoder = nn.Linear(hid, vocab)

    def forward(self, x, state):
        out, state = self.lstm(self.embed(x), state)
        return self.decoder(out), state


model = LanguageModel()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
corpus = torch.randint(0, vocab, (2, 48 * bptt + 1))
state = None
for i in range(0, 48 * bptt, bptt):
    x, y = corpus[:, i:i + bptt], corpus[:, i + 1:i + 1 + bptt]
    if state is not None:
        state = tuple(s.detach() for s in state)  # truncated BPTT: gradients stop at the chunk boundary
    logits, state = model(x, state)
    loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    optimizer.step()
print(f"final loss {loss.item():.3f}")
