"""Word-level LSTM language model trained with truncated BPTT: 48 chunks, the state detached between chunks."""
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
