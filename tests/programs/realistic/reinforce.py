"""REINFORCE on a toy environment: 16 episodes of 5 moves, one backward per episode, returns computed in Python."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Policy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.affine1 = nn.Linear(4, 16)
        self.affine2 = nn.Linear(16, 2)

    def forward(self, x):
        return torch.softmax(self.affine2(torch.relu(self.affine1(x))), dim=-1)


policy = Policy()
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
for episode in range(16):
    state, log_probs, rewards = torch.randn(4), [], []
    for t in range(5):
        probs = policy(state)
        action = torch.distributions.Categorical(probs).sample()
        log_probs.append(torch.log(probs[action]))
        state = state * 0.9 + torch.randn(4) * 0.1
        rewards.append(float(action.item() == 1))
    returns, R = [], 0.0
    for r in reversed(rewards):
        R = r + 0.99 * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + 1e-6)
    loss = torch.stack([-lp * R for lp, R in zip(log_probs, returns)]).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"last loss {loss.item():.3f}")
