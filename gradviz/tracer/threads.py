"""Threads the program runs while tracing: torch's mode stack is per thread, so the recorder is entered in each thread
that starts while tracing, and in each work item of a thread pool made before (threads already running when tracing
began, and threads started outside `threading`, cannot be entered: README says so)."""

from __future__ import annotations

import concurrent.futures.thread
import threading
from collections.abc import Callable
from typing import Any, Protocol

import torch


class ThreadRecording(Protocol):
    def enter_thread(self) -> bool: ...

    def leave_thread(self) -> None: ...


def _on_stack(mode: Any) -> bool:
    return any(torch._C._get_function_stack_at(i) is mode for i in range(torch._C._len_torch_function_stack()))


def install(recorder: ThreadRecording) -> Callable[[], None]:
    """Enter `recorder` in every thread started from now on, and in every thread-pool work item run from now on in a
    thread it is not entered in (a pool whose threads started before tracing). Returns the function that undoes it.

    Thread._bootstrap_inner, not run(): a subclass's own run() is covered too; autograd's engine threads and other
    C++ threads never pass through it and are left alone.
    """
    bootstrap = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]  # (private: not in the stubs)
    work_item_run = concurrent.futures.thread._WorkItem.run

    def traced_bootstrap(thread: threading.Thread) -> None:
        if not recorder.enter_thread():  # tracing ended between start() and here
            return bootstrap(thread)
        try:
            return bootstrap(thread)
        finally:
            recorder.leave_thread()

    def traced_work_item(item: Any) -> None:
        if _on_stack(recorder) or not recorder.enter_thread():
            return work_item_run(item)
        try:
            return work_item_run(item)
        finally:
            recorder.leave_thread()

    # (private methods the stubs do not declare, or declare generic: ours take any instance)
    threading.Thread._bootstrap_inner = traced_bootstrap  # type: ignore[attr-defined]  # (see above)
    concurrent.futures.thread._WorkItem.run = traced_work_item  # type: ignore[method-assign,assignment]  # (see above)

    def uninstall() -> None:
        # put back only what is still ours (a program that patched these itself meanwhile keeps its own)
        if threading.Thread._bootstrap_inner is traced_bootstrap:  # type: ignore[attr-defined]  # (not in the stubs)
            threading.Thread._bootstrap_inner = bootstrap  # type: ignore[attr-defined]  # (not in the stubs)
        if concurrent.futures.thread._WorkItem.run is traced_work_item:
            concurrent.futures.thread._WorkItem.run = work_item_run  # type: ignore[method-assign]  # (put back as found)

    return uninstall


def leave(mode: Any) -> None:
    """Take `mode` off this thread's stack, where it is on top (a thread ending with modes of its own above ours
    leaves them: its stack goes with it)."""
    depth = torch._C._len_torch_function_stack()
    if depth > 0 and torch._C._get_function_stack_at(depth - 1) is mode:
        torch._C._pop_torch_function_stack()

