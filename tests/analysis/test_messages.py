"""Finding messages a person can read: who wrote in place, PyTorch's own version numbers, statements as written."""

from __future__ import annotations

import gradviz
from gradviz.analysis.findings import FindingKind


def test_the_module_that_wrote_in_place_is_named(trace_of) -> None:
    trace = trace_of(
        """
        import torch
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.ReLU(inplace=True)

            def forward(self, x):
                h = torch.sigmoid(x)
                return self.act(h)  # relu writes into sigmoid's saved output

        out = Block()(torch.randn(3, requires_grad=True))
        out.sum().backward()
        """
    )
    (finding,) = gradviz.diagnose(trace)
    assert finding.kind is FindingKind.POISONED_SAVED_TENSOR
    assert "written in place at line 11 inside `act.forward` (`nn.ReLU(inplace=True)`) through `h` itself" in finding.message
    assert "#" not in finding.message and "relu writes into" not in finding.message


def test_embedding_max_norm_renormalising_its_weight_is_named(trace_of) -> None:
    trace = trace_of(
        """
        import torch
        import torch.nn as nn

        emb = nn.Embedding(10, 3, max_norm=1.0)
        with torch.no_grad():
            emb.weight.mul_(5)
        squared = emb.weight * emb.weight
        out = emb(torch.tensor([1, 2]))
        (squared.sum() + out.sum()).backward()
        """
    )
    (finding,) = gradviz.diagnose(trace)
    assert "inside `emb.forward` (`nn.Embedding(10, 3, max_norm=1.0)`)" in finding.message
    # PyTorch's own numbers: the weight was at version 2 when saved (init and mul_), 3 after the renorm
    assert 'raised: "is at version 3; expected version 2"' in finding.message


def test_pytorch_version_numbers_are_quoted_in_a_loop(trace_of) -> None:
    trace = trace_of(
        """
        import torch
        x = torch.ones(3, requires_grad=True) * 2
        for i in range(9):
            x.add_(1)
        y = x * x
        x.add_(1)
        y.sum().backward()
        """
    )
    (finding,) = gradviz.diagnose(trace)
    assert 'raised: "is at version 10; expected version 9"' in finding.message
    assert trace.exception is not None and "is at version 10; expected version 9" in trace.exception.message
