"""The step window's counts: the tracing thread's (`StepWindow`) and each other thread's (`ThreadWindow`), kept by
window.py while recording and by the sentinel after it."""

from __future__ import annotations

from ..model import WindowRecord


class StepWindow:
    """What the window counts while it is open, and after it closed (steps of the first optimizer only)."""

    def __init__(self, limit: int, *, stop_after: bool = False, sentinel: bool = True) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"steps must be a whole number of at least 1, got {limit!r}")
        self.limit = limit
        self.stop_after = stop_after
        self.sentinel = sentinel and not stop_after  # after the window: watch for new code (sentinel.py)
        self.steps: dict[int, int] = {}  # id(optimizer) -> steps completed, in order of first step
        # the first of them (its steps are the window's): read per step after the window, so kept, not derived
        self.first_optimizer: int | None = None
        self.backwards = 0  # backward() calls started inside the window
        self.after = 0  # steps of the first optimizer after the window closed
        self.backwards_after = 0  # backward() calls the sentinel saw after the window closed
        self.record = WindowRecord(unit="step", limit=limit, traced=0)
        # the program's other threads recording count their own steps, and stop recording after N of them (a thread's
        # steps are its own: what is traced does not depend on how the threads were scheduled)
        self.threads: dict[int, ThreadWindow] = {}  # thread running now -> its window
        self.ended: list[ThreadWindow] = []  # those of threads that ended

    def count_step(self, optimizer: int) -> None:
        """A step of the optimizer `id` ended while the window is open."""
        if self.first_optimizer is None:
            self.first_optimizer = optimizer
        self.steps[optimizer] = self.steps.get(optimizer, 0) + 1

    def unwatched(self) -> dict[str, int]:
        """The other threads whose recording stopped -> their steps after that (0: backward calls, not counted)."""
        return {
            w.name: w.after if w.steps else 0
            for w in [*self.ended, *self.threads.values()]
            if w.closed and w.name is not None and (w.after or not w.steps)
        }

    def thread_record(self) -> tuple[str, int, bool, int | None] | None:
        """(unit, traced, closed, total or None) of the other threads' windows, the longest of each, or None when no
        other thread made a step or a backward call."""
        windows = [w for w in [*self.ended, *self.threads.values()] if w.steps or w.backwards]
        if not windows:
            return None
        unit = "step" if any(w.steps for w in windows) else "backward"
        counted = [w for w in windows if bool(w.steps) == (unit == "step")]
        traced = max(w.traced() for w in counted)
        closed = any(w.closed for w in counted)
        total = max(w.traced() + w.after for w in counted) if unit == "step" else None
        return unit, traced, closed, total


class ThreadWindow:
    """One of the program's other threads' share of the step window: its steps, counted as the window counts the
    tracing thread's (its first optimizer's; backward calls where it steps none)."""

    def __init__(self, name: str | None) -> None:
        self.name = name  # the thread's name in the trace
        self.steps: dict[int, int] = {}  # id(optimizer) -> steps completed, in order of first step
        self.backwards = 0
        self.after = 0  # steps of its first optimizer after its window closed
        self.closed = False

    def traced(self) -> int:
        first = next(iter(self.steps), None)
        return self.steps[first] if first is not None else self.backwards
