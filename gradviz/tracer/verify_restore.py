"""--verify's restore: for one measuring backward, each saved tensor it reads given the bytes it held at its own save.

A storage can hold bytes saved by several nodes at several times: `h = relu(a)` saves h, `h.data.clamp_()` writes it,
`fc2(h)` saves it again. Writing the kept bytes back over the whole storage would hand fc2 bytes it never saw. So a
tensor autograd reads through the storage (an output it saved, a tensor saved as itself after a `.data =` swap) gets
its bytes there, and a tensor saved as itself (the program's own, which the node holds) whose bytes differ from what
the storage then holds reads a private copy for the run instead (its `.data` swapped, and back)."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable, Iterator
from typing import Any, TypeAlias

import torch

from .tensors import _byte_span, _storage_key

# verify.py's records, read here by their fields (importing them would close a cycle): a saved tensor (`_Saved`:
# nid, tid, skey, lo, hi, seq, original, ref), bytes kept before a write (`_Kept`: lo, hi, data, seq, writes), a
# storage's kept bytes (`_Storage`: raw, items), a `.data =` swap (`_Swap`: target, old, seq, writes)
_Saved: TypeAlias = Any
_Kept: TypeAlias = Any
_Storage: TypeAlias = Any
_Swap: TypeAlias = Any

SAME_BYTES_TWICE = "the same memory was saved twice with a write between: no single set of values to put back"
OVERLAP = "the writes went over the same kept bytes: one cannot be undone without the other"


class Plan:
    """What to put back for one backward: byte ranges of storages (storage, lo, hi, kept item), data swaps (`x.data
    = y` undone), private copies (a tensor saved as itself, the bytes it was saved with), and which silent writes
    the measurement undoes."""

    def __init__(self) -> None:
        self.parts: list[tuple[_Storage, int, int, _Kept]] = []
        self.swaps: dict[str, _Swap] = {}
        self.private: list[tuple[weakref.ref[torch.Tensor], torch.Tensor]] = []
        self.writes: set[int] = set()
        self.conflict: str | None = None  # why no single set of values can be put back


def _minus(spans: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    out = []
    for a, b in spans:
        if hi <= a or b <= lo:
            out.append((a, b))
            continue
        if a < lo:
            out.append((a, lo))
        if hi < b:
            out.append((hi, b))
    return out


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


Want = list[tuple[int, int, Any]]  # (lo, hi, the kept copy holding them as saved; None: as they are now)


def _wants(entry: _Saved, store: _Storage | None, bounds: list[int]) -> Want:
    """What `entry` saw, piece by piece between `bounds`: the first copy kept after its save, or the bytes now."""
    cuts = [entry.lo] + [b for b in bounds if entry.lo < b < entry.hi] + [entry.hi]
    out: Want = []
    for a, b in zip(cuts, cuts[1:]):
        source = None
        for kept in store.items if store is not None else ():  # oldest first
            if kept.seq > entry.seq and kept.lo <= a and b <= kept.hi:
                source = kept
                break
        if out and out[-1][2] is source and out[-1][1] == a:
            out[-1] = (out[-1][0], b, source)
        else:
            out.append((a, b, source))
    return out


def _source_at(want: Want, a: int) -> tuple[bool, _Kept | None]:
    for lo, hi, source in want:
        if lo <= a < hi:
            return True, source
    return False, None


def plan(
    entries: Iterable[_Saved], kept: dict[int, _Storage], swaps: dict[str, list[_Swap]], only: set[int] | None = None
) -> Plan | None:
    """The restore for a backward through the saved tensors `entries`; None when no saved tensor's bytes changed.
    `only`: undo those silent writes alone (one line's), the others left in place (a conflict where another write
    went over the same bytes kept: no way to undo one without the other)."""
    out = Plan()
    by_storage: dict[int, list[_Saved]] = {}
    for e in entries:
        by_storage.setdefault(e.skey, []).append(e)
        if e.original:
            swap = next((s for s in swaps.get(e.tid, ()) if s.seq > e.seq), None)
            if swap is not None and only is not None and not only.issuperset(swap.writes):
                if only.intersection(swap.writes):
                    out.conflict = OVERLAP
                swap = None
            if swap is not None:
                if out.swaps.setdefault(e.tid, swap) is not swap:
                    out.conflict = SAME_BYTES_TWICE  # two saves of one tensor want two different data
                out.writes.update(swap.writes)
    for skey, group in by_storage.items():
        store = kept.get(skey)
        if store is None:
            continue
        _plan_storage(out, store, group, only)
    return out if out.parts or out.swaps or out.private or out.conflict else None


def _plan_storage(out: Plan, store: _Storage, group: list[_Saved], only: set[int] | None) -> None:
    """The bytes one storage holds for the run, and the private copies of tensors saved as themselves that saw
    other bytes there."""
    bounds = sorted({b for e in group for b in (e.lo, e.hi)} | {b for k in store.items for b in (k.lo, k.hi)})
    wants = {e: _wants(e, store, bounds) for e in group}
    if only is not None:  # some writes undone: bytes kept before the others stay as they are now
        for want in wants.values():
            if any(s is not None and only.intersection(s.writes) and not only.issuperset(s.writes) for _, _, s in want):
                out.conflict = OVERLAP  # those writes went over bytes kept for another write too
                return
            want[:] = [(a, b, s if s is not None and only.issuperset(s.writes) else None) for a, b, s in want]
    for want in wants.values():
        out.writes.update(w for _, _, source in want if source is not None for w in source.writes)
    # who reads the storage itself: an output saved (autograd holds its own alias), a tensor whose data was swapped
    direct = [e for e in group if not e.original or e.tid in out.swaps]
    movable = [e for e in group if e.original and e.tid not in out.swaps]
    target: dict[tuple[int, int], _Kept | None] = {}
    for a, b in zip(bounds, bounds[1:]):
        sources = {id(s[1]): s for s in (_source_at(wants[e], a) for e in direct) if s[0]}
        if len(sources) > 1:
            out.conflict = SAME_BYTES_TWICE  # two outputs saved at different times over the same bytes
            return
        if sources:
            target[(a, b)] = next(iter(sources.values()))[1]
        else:  # only tensors saved as themselves: put back what they agree on, copy the rest privately
            wanted = {id(s[1]): s for s in (_source_at(wants[e], a) for e in movable) if s[0]}
            target[(a, b)] = next(iter(wanted.values()))[1] if len(wanted) == 1 else None
    for (a, b), source in target.items():
        if source is not None:
            if out.parts and out.parts[-1][0] is store and out.parts[-1][3] is source and out.parts[-1][2] == a:
                out.parts[-1] = (store, out.parts[-1][1], b, source)
            else:
                out.parts.append((store, a, b, source))
    # a tensor saved as itself whose bytes the storage will not hold as it saw them: a private copy, one per tensor
    by_tensor: dict[int, list[_Saved]] = {}
    for e in movable:
        t = e.ref() if e.ref is not None else None
        if t is not None:
            by_tensor.setdefault(id(t), []).append(e)
        elif not _agrees(wants[e], target, bounds):
            out.conflict = "a tensor saved as itself could not be reached to give it the bytes it saw"
            return
    for same in by_tensor.values():
        first = same[0]
        if all(_agrees(wants[e], target, bounds) for e in same):
            continue
        if any(_flat(wants[e], bounds) != _flat(wants[first], bounds) for e in same[1:]):
            out.conflict = SAME_BYTES_TWICE  # one tensor saved twice with a write between
            return
        t = first.ref() if first.ref is not None else None
        copy = _private(t, store, wants[first], first) if t is not None else None
        if t is None or copy is None:
            out.conflict = "a tensor saved as itself has moved since it was saved"
            return
        out.private.append((weakref.ref(t), copy))


def _agrees(want: Want, target: dict[tuple[int, int], _Kept | None], bounds: list[int]) -> bool:
    """Whether the bytes the storage will hold are the ones `want` asks for."""
    return all(target.get(piece) is source for lo, hi, source in want for piece in _pieces(bounds, lo, hi))


def _pieces(bounds: list[int], lo: int, hi: int) -> list[tuple[int, int]]:
    inner = [b for b in bounds if lo <= b <= hi]
    return list(zip(inner, inner[1:]))


def _flat(want: Want, bounds: list[int]) -> list[tuple[int, int, int]]:
    return [(a, b, id(source)) for lo, hi, source in want for a, b in _pieces(bounds, lo, hi)]


def _private(t: torch.Tensor, store: _Storage, want: Want, entry: _Saved) -> torch.Tensor | None:
    """A tensor of t's layout on memory of its own, holding the bytes `entry` saw: now's, the kept ones patched in."""
    if _storage_key(t) != entry.skey or _byte_span(t) != (entry.lo, entry.hi):
        return None
    item = t.element_size()
    buffer = store.raw[entry.lo : entry.hi].clone()
    for a, b, source in want:
        if source is not None:
            buffer[a - entry.lo : b - entry.lo] = source.data[a - source.lo : b - source.lo]
    offset = (t.storage_offset() * item - entry.lo) // item
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(buffer.untyped_storage(), offset, t.size(), t.stride())


def _alias(t: torch.Tensor) -> torch.Tensor:
    """A plain tensor on t's memory as it is now, with a version counter of its own."""
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage(), t.storage_offset(), t.size(), t.stride())


@contextlib.contextmanager
def restored(plan: Plan | None) -> Iterator[None]:
    """The plan's bytes in place for the block; every byte and every tensor's data as they were after it."""
    now: list[tuple[torch.Tensor, torch.Tensor]] = []
    swapped: list[tuple[torch.Tensor, torch.Tensor]] = []
    try:
        if plan is not None:
            for store, lo, hi, kept in plan.parts:
                target = store.raw[lo:hi]
                now.append((target, target.clone()))
                target.copy_(kept.data[lo - kept.lo : hi - kept.lo])
            for swap in plan.swaps.values():
                t = swap.target()
                if t is not None:
                    swapped.append((t, _alias(t)))
                    t.data = swap.old
            for ref, copy in plan.private:
                t = ref()
                if t is not None:
                    swapped.append((t, _alias(t)))
                    t.data = copy
        yield
    finally:
        for target, data in reversed(now):
            target.copy_(data)
        for t, data in reversed(swapped):
            t.data = data

