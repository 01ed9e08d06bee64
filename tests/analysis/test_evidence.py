"""Each finding carries its evidence as typed data, and the evidence agrees with PyTorch run on the same program."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import gradviz
from gradviz.analysis import diagnose
from gradviz.analysis.findings import (
    CutEvidence,
    Finding,
    FindingKind,
    LifetimeEvidence,
    SavedTensorEvidence,
    version_text,
)
from gradviz.cli.sarif import sarif_results
from gradviz.model import Trace

torch = pytest.importorskip("torch")

ALIAS_WRITE = """
import torch
a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.tanh()
c = out.{alias}
c.zero_()
try:
    out.sum().backward()
except RuntimeError:
    pass
"""


def _only(trace: Trace, kind: FindingKind) -> Finding:
    found = [f for f in diagnose(trace) if f.kind is kind]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(
    ("alias", "kind", "shared"),
    [("detach()", FindingKind.POISONED_SAVED_TENSOR, True), ("data", FindingKind.SILENTLY_CORRUPTED_SAVED_TENSOR, False)],
)
def test_saved_tensor_evidence_matches_pytorch(
    trace_of: Callable[..., Trace], line_of: Callable[[str, str], int], alias: str, kind: FindingKind, shared: bool
) -> None:
    source = ALIAS_WRITE.format(alias=alias)
    trace = trace_of(source)
    finding = _only(trace, kind)
    (evidence,) = finding.evidence
    assert isinstance(evidence, SavedTensorEvidence)
    # PyTorch itself: the same steps, reading the versions autograd compares
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = a.tanh()
    saved_at = out._version
    c = out.detach() if alias == "detach()" else out.data
    c.zero_()
    assert (evidence.saved_version, evidence.version_now) == (saved_at, out._version)
    assert (out._version != saved_at) is shared  # a `.data` alias has its own counter: out's version stays
    assert evidence.shared_counter is shared
    assert trace.nodes[evidence.node].name == type(out.grad_fn).__name__ == "TanhBackward0"
    assert evidence.saved_name == "result" and trace.tensors[evidence.tensor].names == ["out"]
    assert evidence.write_line == line_of(source, "c.zero_()") == finding.line
    assert trace.tensors[evidence.writer].names == ["c"]  # type: ignore[index]
    assert evidence.writer_alias == f"c = out.{alias}"


def test_cut_evidence_names_the_source_the_alias_and_the_use(trace_of: Callable[..., Trace]) -> None:
    trace = trace_of("""
        import torch
        enc = torch.nn.Linear(3, 3)
        head = torch.nn.Linear(3, 1)
        h = enc(torch.randn(2, 3))
        z = h.detach()
        head(z).sum().backward()
    """)
    (evidence,) = _only(trace, FindingKind.CUT_EDGE).evidence
    assert isinstance(evidence, CutEvidence)
    assert evidence.alias_expression == "h.detach()" and evidence.line == 5
    assert trace.nodes[evidence.source_node].name == "AddmmBackward0"  # type: ignore[index]
    assert evidence.source_node == trace.tensor("h").grad_fn
    # the first op downstream that used the alias with grad: head's addmm
    assert trace.nodes[evidence.use].name == "AddmmBackward0" and evidence.use != evidence.source_node  # type: ignore[index]
    assert trace.tensors[evidence.alias].names == ["z"]  # type: ignore[index]


def test_lifetime_evidence_names_the_holder_and_the_steps(gallery) -> None:  # type: ignore[no-untyped-def]
    trace = gradviz.trace_script(gallery / "plot_22_total_loss_kept_alive.py")
    finding = _only(trace, FindingKind.GRAPH_KEPT_ALIVE)
    (evidence,) = finding.evidence
    assert isinstance(evidence, LifetimeEvidence)
    assert evidence.holder_name == "total_loss" and evidence.steps == finding.count == 6
    assert evidence.holder in finding.tensors and evidence.node in finding.nodes


def test_evidence_survives_json_and_older_files_still_load(trace_of: Callable[..., Trace]) -> None:
    trace = trace_of(ALIAS_WRITE.format(alias="detach()"))
    finding = _only(trace, FindingKind.POISONED_SAVED_TENSOR)
    data = finding.to_dict()
    assert data["evidence"][0]["type"] == "saved_tensor" and data["evidence"][0]["version_now"] == 1
    assert Finding.from_dict(data) == finding
    del data["evidence"]  # a findings file written before evidence was kept
    assert Finding.from_dict(data).evidence == []


def test_one_spelling_of_an_unknown_version(trace_of: Callable[..., Trace]) -> None:
    assert version_text(None) == "v?" and version_text(0) == "v0"
    trace = trace_of(ALIAS_WRITE.format(alias="detach()"))
    finding = _only(trace, FindingKind.POISONED_SAVED_TENSOR)
    unknown = SavedTensorEvidence(**{**vars_of(finding.evidence[0]), "saved_version": None})
    finding.evidence = [unknown]
    (result,) = sarif_results([finding], trace)
    evidence = result["properties"]["evidence"]
    assert evidence["saved_version"] == "v?" and evidence["version_now"] == "v1"
    assert evidence["tensor"] == "out" and evidence["writer_alias"] == "c = out.detach()"
    label = [line for line in gradviz.render(trace, findings=[finding]).source.splitlines() if "_s_result" in line]
    assert label and "saved v?, now v1," in label[0]


def vars_of(evidence: object) -> dict[str, object]:
    from dataclasses import fields

    return {f.name: getattr(evidence, f.name) for f in fields(evidence)}  # type: ignore[arg-type]
