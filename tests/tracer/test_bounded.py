"""The recorder's own state is bounded by what the program holds, not by how long it has run."""

from __future__ import annotations

import torch

import gradviz


def _recorder_sizes(steps: int) -> tuple[dict[str, int], int, int]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters())
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    context = gradviz.trace()
    with context as trace:
        for _ in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        recorder = context._recorder
        sizes = {
            name: len(value)
            for name, value in vars(recorder).items()
            if isinstance(value, (dict, list, set)) and not name.startswith("_special")
        }
    return sizes, len(trace.nodes), len(trace.events)


def test_recorder_state_is_the_same_after_20_and_200_steps():
    small, nodes_small, events_small = _recorder_sizes(20)
    large, nodes_large, events_large = _recorder_sizes(200)
    # one id and one height (deep chains, chains.py) per autograd node is all that grows: the trace holds a record
    # for each of them anyway
    assert large.pop("_node_ids") - small.pop("_node_ids") == nodes_large - nodes_small
    assert large.pop("_heights") - small.pop("_heights") == nodes_large - nodes_small
    assert large == small
    assert (nodes_large - nodes_small) % 180 == 0 and events_large / events_small < 10.5
