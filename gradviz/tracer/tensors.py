"""Cheap facts about one tensor, read without ever keeping it: version, grad_fn, storage, byte range."""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

_Tensor = torch.Tensor


def _version(t: torch.Tensor) -> int | None:
    try:
        return t._version
    except RuntimeError:  # inference tensors have no version counter
        return None


def _grad_fn(t: torch.Tensor) -> Any:
    """t.grad_fn, or None where reading it raises (a no_grad view whose base was later written in place)."""
    try:
        return t.grad_fn
    except RuntimeError:
        return None


_dtype_names: dict[torch.dtype, str] = {}
_device_names: dict[torch.device, str] = {}


def _dtype_name(dtype: torch.dtype) -> str:
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).removeprefix("torch.")
    return name


def _device_name(device: torch.device) -> str:
    name = _device_names.get(device)
    if name is None:
        name = _device_names[device] = str(device)
    return name


def _flatten(args: Any, kwargs: dict[str, Any] | None, out: list[torch.Tensor]) -> list[torch.Tensor]:
    for a in args:
        if isinstance(a, _Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            _flatten(a, None, out)
    if kwargs:
        _flatten(kwargs.values(), None, out)
    return out


def _byte_span(t: torch.Tensor) -> tuple[int, int]:
    item = t.element_size()
    # (torch types sizes `int | SymInt`: symbolic only while dynamo traces, when the recorder steps aside)
    start: int = t.storage_offset() * item  # type: ignore[assignment]  # (SymInt: see above)
    numel = t.numel()
    if numel == 0:
        return (start, start)
    if t.is_contiguous():
        return (start, start + numel * item)
    span = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return (start, start + span * item)


def _storage_key(t: torch.Tensor) -> int | None:
    try:
        key: int = t.untyped_storage()._cdata
        return key
    except (RuntimeError, NotImplementedError, TypeError):  # sparse, nested, functional wrappers
        return None


def local_parts(t: torch.Tensor) -> list[torch.Tensor]:
    """The plain tensors holding `t`'s values in this process: a DTensor's local shard, never the whole.

    Reading a DTensor's values as a whole (`torch.equal`, `bool(g.any())`) is a collective; issued by the tracer on
    one rank only, it hangs the program (the other ranks wait in their next all-gather).
    """
    if not is_traceable_wrapper_subclass(t):
        return [t]
    inner, _ = t.__tensor_flatten__()
    parts = (getattr(t, name) for name in inner)  # (a DTensor lists its device mesh among them too)
    return [plain for part in parts if isinstance(part, torch.Tensor) for plain in local_parts(part)]


#: A `.grad` as it stood: a weak reference to that very tensor (not its id: a gradient made after it was freed often
#: sits at its address) and how often it (or, for a DTensor, its local shard) had been written
GradKey = tuple[weakref.ref[torch.Tensor], tuple[int | None, ...]]


def _grad_key(g: torch.Tensor) -> GradKey:
    return weakref.ref(g), _grad_versions(g)


def _grad_versions(g: torch.Tensor) -> tuple[int | None, ...]:
    return (_version(g), *(_version(part) for part in local_parts(g) if part is not g))


def _same_grad(key: GradKey | None, g: torch.Tensor) -> bool:
    """Whether `g` is the gradient `key` was taken of, unwritten since (the same object: compared by identity, never
    by `==`, which a tensor answers element by element)."""
    return key is not None and key[0]() is g and key[1] == _grad_versions(g)
