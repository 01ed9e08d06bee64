"""Tables keyed by `id(obj)` for objects the program may free while the trace runs (its models, its optimizers).

CPython reuses a freed object's address at once: a model built after another was freed (a second thread's model
made after the first thread ended, a fresh model per fold) often has the same `id` as one the tracer named. A plain
`dict[id, name]` then gives the new model the old one's name and never names its parameters. Entries written
through a `LiveIds` leave when their object is freed (a weak reference's callback, which CPython runs before the
address can be reused). The table itself stays a plain dict: the recorder reads it on every recorded op, and a
dict subclass's `get` and `in` cost twice a dict's there."""

from __future__ import annotations

import contextlib
import functools
import weakref
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class LiveIds(Generic[V]):
    """Writes `id(obj) -> value` into `table` (a plain dict, read as such) so that the entry leaves with its object.
    An object no weak reference can follow keeps its entry for the whole run."""

    __slots__ = ("_refs", "table")

    def __init__(self, table: dict[int, V] | None = None) -> None:
        self.table: dict[int, V] = {} if table is None else table
        self._refs: dict[int, weakref.ref[Any]] = {}

    def put(self, obj: object, value: V) -> None:
        key = id(obj)
        self.table[key] = value
        if key not in self._refs:
            # an object no weak reference can follow (an int, a class with __slots__ and no __weakref__): kept
            with contextlib.suppress(TypeError):
                self._refs[key] = weakref.ref(obj, functools.partial(self._drop, key))

    def _drop(self, key: int, _ref: weakref.ref[Any]) -> None:
        self.table.pop(key, None)
        self._refs.pop(key, None)
