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
    assert "written in place at line 11 inside `nn.ReLU.forward` (module `act`, built as `nn.ReLU(inplace=True)`) through `h` itself" in finding.message
    assert "#" not in finding.message and "relu writes into" not in finding.message


def test_a_write_in_a_models_own_forward_names_its_class_and_module(trace_of) -> None:
    trace = trace_of(
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 3)

            def forward(self, x):
                h = torch.sigmoid(self.fc(x))
                h.mul_(2)  # writes sigmoid's saved output
                return h

        model = Net()
        model(torch.randn(2, 3)).sum().backward()
        """
    )
    (finding,) = gradviz.diagnose(trace)
    assert finding.kind is FindingKind.POISONED_SAVED_TENSOR and finding.line == 11
    # the class whose forward ran the line, then which module it was: not "inside `model.forward` (`Net()`)"
    assert "written in place at line 11 inside `Net.forward` (module `model`) through `h` itself" in finding.message
    assert "Net()" not in finding.message


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
    assert "inside `nn.Embedding.forward` (module `emb`, built as `nn.Embedding(10, 3, max_norm=1.0)`)" in finding.message
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


def test_a_frozen_backbone_is_one_finding_naming_its_parameters_by_module(trace_of) -> None:
    from gradviz.picture.annotate import annotate

    trace = trace_of(
        """
        import torch
        import torch.nn as nn

        backbone = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
        head = nn.Linear(8, 2)
        opt = torch.optim.SGD([*backbone.parameters(), *head.parameters()], lr=0.1)
        feat = backbone(torch.randn(3, 4)).detach()
        loss = head(feat).sum()
        opt.zero_grad(); loss.backward(); opt.step()
        """
    )
    findings = gradviz.diagnose(trace)
    (dead,) = [f for f in findings if f.kind is FindingKind.DEAD_PARAMETER]
    assert dead.line == 7 and dead.parameter == "backbone.0: weight, bias; backbone.2: weight, bias"
    assert dead.parameters == ["backbone.0.weight", "backbone.0.bias", "backbone.2.weight", "backbone.2.bias"]
    assert dead.message.startswith("4 parameters (`backbone.0: weight, bias`; `backbone.2: weight, bias`) take part")
    assert "passes through the cut at line 7" in dead.message
    # the graph view still marks each starved parameter, under its own name
    marked = {note.name for note in annotate(trace, findings).leaves.values() if note.style == "dead"}
    assert marked == set(dead.parameters)
