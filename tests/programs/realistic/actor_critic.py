"""Advantage actor-critic on a toy environment: one backward per episode, the critic's value detached in the advantage."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Actor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.fc2 = nn.Linear(16, 2)

    def forward(self, s):
        return torch.distributions.Categorical(logits=self.fc2(torch.relu(self.fc1(s))))


class Critic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 16)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, s):
        return self.fc2(torch.relu(self.fc1(s)))


def env_step(state, action):
    nxt = state * 0.9 + (action.float() - 0.5) * 0.1
    return nxt, float(nxt.sum() > 0)


actor, critic = Actor(), Critic()
optimizer = torch.optim.Adam(list(actor.parameters()) + list(critic.parameters()), lr=1e-2)
for episode in range(8):
    state = torch.randn(4)
    log_probs, values, rewards = [], [], []
    for t in range(6):
        dist = actor(state)
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        values.append(critic(state).squeeze())
        state, reward = env_step(state, action)
        rewards.append(reward)
    returns = torch.tensor([sum(rewards[k:]) for k in range(len(rewards))])
    values_t = torch.stack(values)
    advantage = returns - values_t.detach()  # the actor's loss must not train the critic
    loss = -(torch.stack(log_probs) * advantage).mean() + (returns - values_t).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"last episode loss {loss.item():.3f}")
