"""What the tracer works with: views, no_grad, inference mode, modules, optimizers, meta, complex, CUDA."""

from __future__ import annotations

import pytest
import torch

import gradviz
from gradviz import EventKind
from gradviz.model import VersionChange


def test_views_share_their_base_counter_and_storage() -> None:
    with gradviz.trace() as t:
        base = torch.zeros(4, 3)
        row = base[1]
        col = base[:, 2]
        flat = base.view(-1)
        tail = flat[6:]
        transposed = base.t()
        row.add_(1)
    b = t.tensor("base")
    for name, byte_range in (
        ("row", (12, 24)),
        ("col", (8, 48)),
        ("flat", (0, 48)),
        ("tail", (24, 48)),
        ("transposed", (0, 48)),
    ):
        view = t.tensor(name)
        assert view.version_counter == b.version_counter, name
        assert view.storage == b.storage, name
        assert view.origin == "view", name
        assert view.byte_range == byte_range, name
    assert t.tensor("row").source == b.id
    assert t.tensor("tail").source in (t.tensor("flat").id, b.id)
    write = t.events_of(EventKind.INPLACE_WRITE)[0]
    assert write.versions[0] == VersionChange(t.tensor("row").id, 0, 1)
    changed = {v.tensor: (v.before, v.after) for v in write.versions}
    # every live alias whose bytes overlap row's bytes [12, 24) moved with it
    for name in ("base", "flat", "transposed"):
        assert changed[t.tensor(name).id] == (0, 1), name
    assert changed[t.tensor("col").id] == (0, 1)  # col's span [8, 48) overlaps [12, 24)
    assert t.tensor("tail").id not in changed  # tail is [24, 48): no overlap
    assert write.data["byte_range"] == [12, 24]


def test_no_grad() -> None:
    with gradviz.trace() as t:
        w = torch.ones(3, requires_grad=True)
        with torch.no_grad():
            y = w * 2
            w.sub_(0.5)
        z = w * w
    assert t.tensor("y").requires_grad is False and t.tensor("y").grad_fn is None
    assert t.tensor("z").grad_fn is not None
    write = t.events_of(EventKind.INPLACE_WRITE)[0]
    assert write.tensor == t.tensor("w").id
    assert write.versions[0] == VersionChange(t.tensor("w").id, 0, 1)
    assert "grad_fn" not in write.data  # a leaf stays a leaf
    saved = {s.name: s for s in t.nodes[t.tensor("z").grad_fn].saved}
    assert saved["self"].tensor == t.tensor("w").id and saved["self"].saved_version == 1


class TwoLayers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer1 = torch.nn.Linear(3, 4)
        self.layer2 = torch.nn.Linear(4, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer2(self.layer1(x))


def test_inference_mode_has_no_version_counter() -> None:
    tracer = gradviz.trace()
    with tracer as t:
        with torch.inference_mode():
            i = torch.ones(3)
            j = i * 2
            j.add_(1)  # inference tensors have no counter: nothing to see, nothing to crash on
            k = j[1:]
        normal = torch.ones(3)
        mixed = normal * j
    assert tracer._recorder.internal_errors == []
    for name in ("i", "j", "k"):
        record = t.tensor(name)
        assert record.is_inference, name
        assert record.version_counter is None and record.version is None, name
    assert t.tensor("normal").version_counter is not None
    assert t.tensor("mixed").is_inference is False
    assert all(e.tensor not in {t.tensor("j").id} for e in t.events_of(EventKind.INPLACE_WRITE))
    assert gradviz.Trace.loads(t.to_json()).to_dict() == t.to_dict()


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
        self.head = torch.nn.Linear(2, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(x).detach())


def test_module_parameters_have_qualified_names() -> None:
    torch.manual_seed(0)
    with gradviz.trace() as t:
        model = Block()
        model(torch.randn(5, 3)).sum().backward()
    for name, shape in (("model.block.0.weight", [4, 3]), ("model.block.0.bias", [4]), ("model.block.2.weight", [2, 4]),
                        ("model.head.weight", [1, 2])):
        record = t.tensor(name)
        assert record.parameter == name
        assert record.shape == shape
        assert record.origin == "parameter"
        assert record.label == name
    backward = t.events_of(EventKind.BACKWARD)[0]
    assert backward.data["reached_leaves"] == [t.tensor("head.weight").id]
    modules = {n.module for n in t.nodes.values() if n.name == "MmBackward0" or n.name == "AddmmBackward0"}
    assert {"model.block.0", "model.block.2", "model.head"} <= modules


@pytest.mark.parametrize(
    ("make", "changed_when_grad_zero"),
    [
        pytest.param(lambda ps: torch.optim.SGD(ps, lr=0.1), False, id="sgd"),
        pytest.param(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=True), True, id="sgd-momentum-foreach"),
        pytest.param(lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=False), True, id="sgd-momentum-loop"),
        pytest.param(lambda ps: torch.optim.Adam(ps, lr=0.1, foreach=True), True, id="adam-foreach"),
        pytest.param(lambda ps: torch.optim.Adam(ps, lr=0.1, foreach=False), True, id="adam-loop"),
    ],
)
def test_optimizer_steps(make, changed_when_grad_zero: bool) -> None:
    """Step 1: both layers get gradients. Step 2: layer2's gradient is zeroed by hand, so only a stateful
    optimizer (momentum, Adam's moments) still moves it. `frozen` is in the optimizer but never used."""
    torch.manual_seed(0)
    with gradviz.trace() as t:
        model = TwoLayers()
        frozen = torch.nn.Parameter(torch.ones(2))
        opt = make([*model.parameters(), frozen])
        x = torch.randn(6, 3)
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
        model(x).sum().backward()
        model.layer2.weight.grad.zero_()
        opt.step()
    first, second = t.events_of(EventKind.OPTIMIZER_STEP)
    w1, b1, w2 = (t.tensor(f"{n}") for n in ("layer1.weight", "layer1.bias", "layer2.weight"))
    fz = t.tensor("frozen")
    name = type(make([torch.zeros(1, requires_grad=True)])).__name__
    assert first.op == f"{name}.step" and first.data["optimizer"] == name
    assert first.location.code.strip() == "opt.step()"
    assert first.data["changed"] == [w1.id, b1.id, w2.id]
    assert first.data["grads"] == {w1.id: "fresh", b1.id: "fresh", w2.id: "fresh", fz.id: "none"}
    assert second.data["grads"][w2.id] == "zero"
    assert (w2.id in second.data["changed"]) is changed_when_grad_zero
    assert w1.id in second.data["changed"] and fz.id not in second.data["changed"]
    versions = {v.tensor: (v.before, v.after) for v in first.versions}
    assert versions[fz.id][0] == versions[fz.id][1]  # no grad: not touched at all
    assert versions[w1.id][1] > versions[w1.id][0]


def test_meta_tensors() -> None:
    tracer = gradviz.trace()
    with tracer as t:
        m = torch.ones(2, 3, device="meta", requires_grad=True)
        out = (m * 2).tanh()
        alias = out.detach()
        alias.mul_(0)
        with pytest.raises(RuntimeError, match=r"is at version 1; expected version 0"):
            out.sum().backward()
    assert tracer._recorder.internal_errors == []
    record = t.tensor("m")
    assert record.device == "meta" and record.shape == [2, 3]
    assert t.storages[record.storage].device == "meta"
    assert t.tensor("alias").version_counter == t.tensor("out").version_counter
    write = t.events_of(EventKind.INPLACE_WRITE)[0]
    assert VersionChange(t.tensor("out").id, 0, 1) in write.versions
    saved = {s.name: s for s in t.nodes[t.tensor("out").grad_fn].saved}
    assert saved["result"].saved_version == 0


def test_complex_tensors() -> None:
    with gradviz.trace() as t:
        z = torch.tensor([1 + 2j, 3 - 1j, 0.5j], dtype=torch.complex64, requires_grad=True)
        w = z * 2
        re = w.real  # a float32 view of the complex storage
        re.add_(1)
        loss = (w * w.conj()).real.sum()
        loss.backward()
    assert t.tensor("z").dtype == "complex64" and t.tensor("re").dtype == "float32"
    assert t.tensor("re").version_counter == t.tensor("w").version_counter
    assert t.tensor("re").storage == t.tensor("w").storage
    assert t.tensor("re").byte_range == (0, 20)  # elements 0, 2, 4 of 4-byte floats
    write = t.events_of(EventKind.INPLACE_WRITE)[0]
    assert VersionChange(t.tensor("w").id, 0, 1) in write.versions
    assert t.events_of(EventKind.BACKWARD)[0].data["outcome"] == "ok"
    assert z.grad is not None and z.grad.dtype == torch.complex64


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors() -> None:
    with gradviz.trace() as t:
        a = torch.tensor([1.0, 2.0, 3.0], device="cuda", requires_grad=True)
        out = a.tanh()
        c = out.data
        c.zero_()
        out.sum().backward()
        host = a.grad.cpu()
    assert t.tensor("a").device.startswith("cuda")
    assert t.storages[t.tensor("out").storage].device.startswith("cuda")
    assert t.tensor("c").storage == t.tensor("out").storage
    assert t.tensor("c").version_counter != t.tensor("out").version_counter
    write = t.events_of(EventKind.INPLACE_WRITE)[0]
    assert VersionChange(t.tensor("out").id, 0, 0) in write.versions
    assert t.tensor("host").device == "cpu"
    assert torch.equal(host, torch.ones(3))
