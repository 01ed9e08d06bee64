"""Findings for a graph walked from a tensor without tracing (`gradviz.draw`): only what the nodes themselves show."""

from __future__ import annotations

from ..model import Trace
from .findings import Finding, FindingKind, SavedTensorEvidence, version_text

__all__ = ["walked_graph_findings"]


def walked_graph_findings(trace: Trace) -> list[Finding]:
    """What a walked graph shows without events: saved tensors whose version moved since they were saved."""
    found = []
    for node in trace.nodes.values():
        for saved in node.saved:
            tensor = trace.tensors.get(saved.tensor) if saved.tensor else None
            if tensor is None or saved.saved_version is None or tensor.version in (None, saved.saved_version):
                continue
            found.append(
                Finding(
                    kind=FindingKind.POISONED_SAVED_TENSOR,
                    file=None,
                    line=None,
                    message=(
                        f"{node.name} saved {saved.name!r} at {version_text(saved.saved_version)}; it is now at "
                        f"{version_text(tensor.version)}, so backward will raise"
                    ),
                    fix="write to a copy (x.clone()) instead of the saved tensor, or do the in-place write after backward",
                    tensors=[tensor.id],
                    nodes=[node.id],
                    evidence=[
                        SavedTensorEvidence(
                            node=node.id, saved_name=saved.name, tensor=tensor.id, saved_version=saved.saved_version,
                            version_now=tensor.version, write_event=None, write_line=None, shared_counter=True,
                        )
                    ],
                )
            )
    return found
