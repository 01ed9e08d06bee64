"""Reading what an autograd node saved for backward, without autograd's version check, on each supported torch.

From torch 2.11 a saved-tensor handle (`grad_fn._raw_saved_<name>`) has `.data`: the saved tensor (or what a
saved_tensors_hooks pack hook made of it), read without the check. Before (2.8-2.10) the handle has only
`register_hooks`, which switches the check off for good, so it is never called. There the checked getter
`grad_fn._saved_<name>` is read instead: it gives the same tensor (a saved output as a new tensor object on the same
memory and version counter) and raises exactly when the version has moved since the save, which is never the
case for a node the tracer meets as the program makes it. Two things it cannot do without running the program's
code: read a tensor a pack hook packed (the getter would run the unpack hook: a checkpoint would recompute), and a
node made before the trace began (it may have been packed; nothing says). Those are read as None (no tensor, no
version, as a checkpoint's recipe is), and a packed one is counted among the recording failures the summary names.
"""

from __future__ import annotations

from typing import Any

import torch

#: torch >= 2.11: saved-tensor handles read without the version check
HANDLE_DATA = hasattr(torch._C._autograd.SavedTensor, "data")


def saved_contents(node: Any, name: str, raw: Any, packed: bool, made_before: bool) -> list[tuple[str, Any]]:
    """(label, what was saved) for each handle of `raw` (`node._raw_saved_<name>`): a tensor, a pack hook's object
    or None (nothing saved, or not readable on this torch)."""
    if isinstance(raw, (list, tuple)):
        handles = [(f"{name}[{i}]", handle) for i, handle in enumerate(raw)]
    else:
        handles = [(name, raw)]
    if HANDLE_DATA:
        return [(label, getattr(handle, "data", None)) for label, handle in handles]
    return contents_without_data(node, name, handles, packed, made_before)


def contents_without_data(
    node: Any, name: str, handles: list[tuple[str, Any]], packed: bool, made_before: bool
) -> list[tuple[str, Any]]:
    """Before torch 2.11: (label, saved tensor or None) for the handles of `node._raw_saved_<name>`, through the
    checked getter `node._saved_<name>`; None where reading it would run the program's code or the check fails."""
    if packed or made_before:
        return [(label, None) for label, _ in handles]
    # a custom autograd.Function's node has `_raw_saved_tensors`, and `saved_tensors` as its checked getter
    getter = "saved_tensors" if name == "tensors" and hasattr(node, "_forward_cls") else "_saved_" + name
    try:
        value = getattr(node, getter)
    except (RuntimeError, AttributeError):  # the version moved since the save, or backward freed it
        return [(label, None) for label, _ in handles]
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(values) != len(handles):
        return [(label, None) for label, _ in handles]
    return [(label, tensor) for (label, _), tensor in zip(handles, values)]


def keeps_tensors(pack_hook: Any) -> bool:
    """Whether tensors packed by `pack_hook` could be read on torch >= 2.11: not a checkpoint's (it keeps a recipe
    to recompute them, on every torch), any other (save_on_cpu keeps a CPU tensor itself)."""
    return getattr(pack_hook, "__module__", None) != "torch.utils.checkpoint"


class UnreadableSaved(Exception):
    """A saved tensor this torch does not let the tracer read: counted with gradviz's recording failures, so the
    summary never says "no problems" about it silently."""


UNREADABLE_EARLIER = (
    f"torch {torch.__version__} cannot show what a node made before recording (before the trace began, or between "
    "the window and a step traced again) saved without possibly running a pack hook (torch >= 2.11 can): writes to it "
    "are not checked"
)

UNREADABLE_PACKED = (
    f"torch {torch.__version__} cannot show a tensor saved through a saved_tensors_hooks pack hook without running "
    "the unpack hook (torch >= 2.11 can): writes to it are not checked"
)
