"""Tables keyed by `id(obj)` for objects the program may free while the trace runs (its models, its optimizers).

CPython reuses a freed object's address at once: a model built after another was freed (a second thread's model
made after the first thread ended, a fresh model per fold) often has the same `id` as one the tracer named. A plain
`dict[id, name]` then gives the new model the old one's name and never names its parameters. A `LiveIds` entry goes
when its object is freed (a weak reference's callback, which CPython runs before the address can be reused)."""

from __future__ import annotations

import contextlib
import functools
import weakref
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class LiveIds(dict[int, V], Generic[V]):
    """`id(obj) -> value`, read as a dict (`table.get(id(obj))`, `id(obj) in table`), written with `put` so the entry
    leaves with its object. An object no weak reference can follow keeps its entry for the whole run."""

    def __init__(self) -> None:
        super().__init__()
        self._refs: dict[int, weakref.ref[Any]] = {}

    def put(self, obj: object, value: V) -> None:
        key = id(obj)
        self[key] = value
        if key not in self._refs:
            # an object no weak reference can follow (an int, a class with __slots__ and no __weakref__): kept
            with contextlib.suppress(TypeError):
                self._refs[key] = weakref.ref(obj, functools.partial(self._drop, key))

    def _drop(self, key: int, _ref: weakref.ref[Any]) -> None:
        self.pop(key, None)
        self._refs.pop(key, None)
