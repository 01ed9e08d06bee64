"""Deep autograd graphs read from Python are freed in short segments, never by one recursion as deep as the graph.

An autograd node that Python has seen (`t.grad_fn`, `next_functions`) keeps its Python object for as long as it
lives, and freeing such a node frees the next one through that object's destructor: dropping a chain of 60,000 seen
nodes (`y = y * 1.00001` in a loop) recurses 60,000 levels deep in C++ and overflows the stack (exit 139), where
the same program untraced, whose nodes autograd frees iteratively, ends normally. Reading the graph is what the
tracer is for, so it holds one node every `SEGMENT` levels of depth instead: the program's drop then frees at most
`SEGMENT` levels before it reaches a held node, and the held nodes are let go one at a time, newest first, each
freeing its own segment, once nothing but us owns them (checked at every garbage collection, and when tracing
stops). Graphs less deep than `SEGMENT`, almost every real model's, are never held.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import sys
from typing import Any

# levels of nodes freed by one recursion at most: far below the ~20,000 that overflow an 8 MB stack
SEGMENT = 2000

# held nodes, oldest first; a node is ours alone when its only references are this list's and the sweep's own
_held: list[Any] = []
_OURS_ALONE = 2  # the list's reference and getrefcount's argument


def hold(node: Any) -> int:
    """Keep `node` alive so that freeing the graph above it stops here; its height becomes 0."""
    if not _held:
        gc.callbacks.append(_on_collection)
    _held.append(node)
    return 0


def sweep() -> None:
    """Let go of every held node nothing else owns any more, newest first, one segment at a time."""
    progress = True
    while progress and _held:
        progress = False
        for i in range(len(_held) - 1, -1, -1):
            if sys.getrefcount(_held[i]) <= _OURS_ALONE:
                # freeing it frees its segment, down to the held nodes below (still ours, so not freed now)
                del _held[i]
                progress = True
    if not _held:
        _stop_watching()


def _on_collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop":
        sweep()


def _stop_watching() -> None:
    if _on_collection in gc.callbacks:
        gc.callbacks.remove(_on_collection)


@atexit.register
def _keep_at_exit() -> None:
    """At interpreter exit, modules are torn down in no fixed order: if the held nodes went first, the program's
    globals would free the whole chain in one recursion. The process is ending: the held nodes simply stay."""
    _stop_watching()
    sweep()
    if _held:
        # one reference more than anyone will ever drop: neither module teardown nor the last collection frees them
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(_held))
