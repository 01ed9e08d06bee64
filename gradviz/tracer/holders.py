"""Where the program holds a model: variables, small dicts and lists, objects' attributes; wrappers seen through.

The tracer names a module from the variable (or entry, or attribute) holding it or a model it belongs to
(`model.layers.0`, `models["G"]`, `trainer.model`), leaving out what wrappers add (`_orig_mod`, DDP's `module`).
"""

from __future__ import annotations

import types
from typing import Any

import torch

__all__ = ["holders_in", "is_self", "shown_path", "unwrapped"]

#: How far naming looks into a dict, list or tuple for a model (`models["G"]`, `nets[0]`): one level, small ones only,
#: so a program's big table (a vocabulary, a dataset's list) never makes naming slow
_CONTAINER_LIMIT = 64
#: The attribute under which a wrapper keeps the model it wraps (torch.compile, FSDP1, activation checkpointing,
#: Lightning's strategy wrappers): not part of a name, so names read the same with and without the wrapper
_WRAPPED_ATTRIBUTES = frozenset({"_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_forward_module"})
_DATA_PARALLEL = frozenset({"DistributedDataParallel", "DataParallel"})  # they keep the model as `module`


def _is_wrapper_part(parent: torch.nn.Module, attribute: str) -> bool:
    if attribute in _WRAPPED_ATTRIBUTES:
        return True
    return attribute == "module" and type(parent).__name__ in _DATA_PARALLEL


def shown_path(root: torch.nn.Module, path: str) -> str:
    """`path` (a submodule's or parameter's, from `root`) without the wrappers' own parts: `_orig_mod.h.0` and
    `module.h.0` (DDP) read `h.0`, as the unwrapped model names it."""
    if not path:
        return path
    parts = path.split(".")
    kept = []
    node: Any = root
    for part in parts:
        children = getattr(node, "_modules", None) if node is not None else None
        if isinstance(children, dict) and part in children and _is_wrapper_part(node, part):
            node = children[part]
            continue
        kept.append(part)
        node = children.get(part) if isinstance(children, dict) else None
    return ".".join(kept)


def unwrapped(value: Any) -> Any:
    """The model a wrapper (or wrappers: DDP around torch.compile) keeps; anything else as it is."""
    for _ in range(8):
        children = getattr(value, "_modules", None)
        if not isinstance(children, dict) or len(children) != 1:
            break
        (attribute, inner), = children.items()
        if not _is_wrapper_part(value, attribute):
            break
        value = inner
    return value


def _subscript(key: Any) -> str | None:
    """How the program reads an entry: `["G"]`, `[0]`; None for a key that would not read as one name part."""
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return f"[{key}]"
    if isinstance(key, str) and key and "." not in key and '"' not in key and "\\" not in key and key.isprintable():
        return f'["{key}"]'
    return None


def _entries(value: Any) -> list[tuple[str, Any]]:
    """A small dict's, list's or tuple's models as (subscript, model); none for anything else or a big one."""
    module = torch.nn.Module
    try:
        if isinstance(value, dict) and len(value) <= _CONTAINER_LIMIT:
            entries = [(_subscript(key), held) for key, held in list(value.items()) if isinstance(held, module)]
        elif isinstance(value, (list, tuple)) and len(value) <= _CONTAINER_LIMIT:
            entries = [(f"[{index}]", held) for index, held in enumerate(value) if isinstance(held, module)]
        else:
            return []
    except Exception:  # noqa: BLE001 - a dict subclass with odd iteration: not a holder
        return []
    return [(key, held) for key, held in entries if key is not None]


def _path_in(model: torch.nn.Module, module: torch.nn.Module) -> str | None:
    """The shown attribute path from `model` to `module` (`""` for the model itself), None when not in it."""
    if model is module:
        return ""
    for path, sub in model.named_modules():
        if sub is module:
            return shown_path(model, path)
    return None


def holders_in(namespace: dict[str, Any], module: torch.nn.Module) -> list[tuple[str, str]]:
    """Every way `namespace` holds `module`, in the order bound, as (holder, shown path from it): a variable holding it
    or a model containing it (`model`), an entry of a small dict, list or tuple (`models["G"]`, `nets[0]`), an object's
    attribute holding such a model or container (`trainer.model`, `self.models["G"]`)."""
    found: list[tuple[str, str]] = []

    def look(holder: str, value: Any) -> None:
        if isinstance(value, torch.nn.Module):
            path = _path_in(value, module)
            if path is not None:
                found.append((holder, path))
            return
        for key, held in _entries(value):
            path = _path_in(held, module)
            if path is not None:
                found.append((holder + key, path))

    for name, value in list(namespace.items()):
        if name.startswith("_"):
            continue
        if isinstance(value, (torch.nn.Module, dict, list, tuple)):
            look(name, value)
        elif not isinstance(value, (type, types.ModuleType)):
            try:
                held_attributes = getattr(value, "__dict__", None)
                attributes = list(held_attributes.items()) if isinstance(held_attributes, dict) else []
            except Exception:  # noqa: BLE001 - an object with odd attribute access (a proxy): not a holder
                attributes = []
            for attribute, held in attributes:
                if not attribute.startswith("_") and isinstance(held, (torch.nn.Module, dict, list, tuple)):
                    look(f"{name}.{attribute}", held)
    return found


def is_self(holder: str) -> bool:
    """A method's `self` (`self`, `self.models["G"]`): a name only where the program has no other."""
    return holder == "self" or holder.startswith(("self.", "self["))
