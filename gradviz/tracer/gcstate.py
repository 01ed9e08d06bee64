"""Lighter garbage collection while tracing, and the program's own GC state given back exactly at the end."""

from __future__ import annotations

import gc

# The records made per call would otherwise trigger a young-generation collection every few hundred calls
_TRACING_THRESHOLD0 = 20_000


class GcHold:
    """Holds the collector's settings while tracing: the program's thresholds and frozen objects come back as found."""

    def __init__(self) -> None:
        self._found: tuple[int, ...] | None = None  # the program's thresholds, while we hold them
        self._ours: tuple[int, ...] | None = None  # the thresholds we set
        self._froze = False

    def hold(self) -> None:
        self._found = gc.get_threshold()
        # Objects alive now (torch's own, the program's so far) move to the permanent generation while tracing, so
        # the collections our records trigger do not rescan them; they return to the oldest generation at release.
        # A program that froze objects itself keeps them frozen: `gc.unfreeze()` cannot tell ours from its own, so
        # we freeze nothing then (its frozen objects are out of the scans already).
        self._froze = gc.get_freeze_count() == 0
        if self._froze:
            gc.freeze()
        # collect less often while tracing (the program's cyclic garbage is still collected, a little later)
        self._ours = (max(self._found[0], _TRACING_THRESHOLD0), *self._found[1:])
        gc.set_threshold(*self._ours)

    def release(self) -> None:
        if self._found is None:
            return
        if gc.get_threshold() == self._ours:  # a program that set its own thresholds meanwhile keeps them
            gc.set_threshold(*self._found)
        if self._froze:
            gc.unfreeze()
        self._found = self._ours = None
        self._froze = False
