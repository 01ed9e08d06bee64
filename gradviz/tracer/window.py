"""The step window: trace the first N optimizer steps (or backward calls), then stop recording (or, with the
sentinel, watch for steps that run something new: sentinel.py)."""

from __future__ import annotations

import contextlib
import threading
import warnings
from typing import Any, Callable

import torch

from ..model import WindowRecord
from . import callsite, chains, source
from .lifetime import watch_stored
from .state import RecorderState
from .windows import StepWindow, ThreadWindow

# Added to the recorder's pause count when the window closes: every torch call then goes straight through, until
# the mode can be taken off the stack (see _pop_mode)
_CLOSED = 1 << 40



def _warning_filters() -> list[Any]:
    """The list the warnings module reads (typeshed declares `warnings.filters` a Sequence)."""
    return warnings.filters  # type: ignore[return-value]  # (it is a list)

class WindowStop(BaseException):
    """Raised into the program where the window ends under `stop_after`: it ends the program as if it had finished.

    A BaseException, like SystemExit, so that the program's own `except Exception:` does not swallow it.
    """


class WindowRecording(RecorderState):
    """The window half of the Recorder (mixed into it): counts, closes the window, and takes the recorder off."""

    # the Recorder's state and methods this half uses (recorder.py owns them)
    _steps_open_here: Callable[[], bool]
    _warning_filters: list[Any]
    _gc: Any
    _step_post: Callable[[Any, Any, Any], None]
    name_locals: Callable[..., None]
    # the sentinel's (sentinel.py)
    _to_sentinel: Callable[[], None]
    _sentinel_step: Callable[[Any, bool], None]
    _rearmed_step_done: Callable[[], None]

    def _window_step_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """The global optimizer post-hook: the recorder's own while the window is open, a counter afterwards.

        It stays registered after the window closes (torch iterates the hook dict while calling it, so it cannot
        remove itself) and counts the first optimizer's steps for "steps 1-10 of 6,000": one call per step.
        """
        window = self._window
        if window is not None and window.record.closed:
            if not self._rearm_left and threading.get_ident() != self._thread:
                self._thread_step_after(window, optimizer)
                return
            first = id(optimizer) == window.first_optimizer
            if first:
                window.after += 1
            if self._sentinel:
                self._sentinel_step(optimizer, first)
            elif self._rearm_left:
                self._step_post(optimizer, args, kwargs)
                if first and id(optimizer) not in self._steps:
                    self._rearmed_step_done()
            elif self._mode_on and not window.sentinel:
                self._pop_mode()
            return
        key = id(optimizer)
        if window is not None and threading.get_ident() != self._thread:
            self._thread_step_post(window, optimizer, args, kwargs)
            return
        was_open = key in self._steps
        self._step_post(optimizer, args, kwargs)
        if window is None or not was_open or key in self._steps:  # not the end of an outermost step of ours
            return
        self._optimizer_groups[key] = len(optimizer.param_groups)
        window.count_step(key)
        # with several optimizers (a GAN's D and G) the window ends once each has made N steps
        if min(window.steps.values()) >= window.limit:
            self._close_window("step", safe=True)

    def _thread_step_post(self, window: StepWindow, optimizer: Any, args: Any, kwargs: Any) -> None:
        """The optimizer post-hook in another thread of the program: its own steps, its own window."""
        key = id(optimizer)
        here = threading.get_ident()
        own = window.threads.get(here)
        if own is not None and own.closed:
            if key == next(iter(own.steps), None):
                own.after += 1
            return
        was_open = key in self._steps
        self._step_post(optimizer, args, kwargs)
        if not was_open or key in self._steps or here not in self._thread_names:
            return
        with self._lock:
            own = window.threads.setdefault(here, ThreadWindow(self._thread_names.get(here)))
            self._optimizer_groups[key] = len(optimizer.param_groups)
            own.steps[key] = own.steps.get(key, 0) + 1
            if min(own.steps.values()) >= window.limit:
                self._close_thread_window(own)

    def _thread_step_after(self, window: StepWindow, optimizer: Any) -> None:
        """A step of another thread of the program after recording stopped (the tracing thread's window closed, or
        this thread's own): counted as a step after its window, never recorded nor watched (coverage() says so)."""
        here = threading.get_ident()
        with self._lock:
            own = window.threads.get(here)
            if own is None:
                own = window.threads[here] = ThreadWindow(self._thread_names.get(here))
            own.closed = True
            first = own.steps.setdefault(id(optimizer), 0) if not own.steps else None
            if first is not None or id(optimizer) == next(iter(own.steps)):
                own.after += 1

    def _close_thread_window(self, own: ThreadWindow) -> None:
        """This thread's window is over: its calls pass straight through from now (the mode stays on its stack, as a
        closed window's does until it can come off; what it recorded stays in the trace)."""
        own.closed = True
        here = threading.get_ident()
        self._thread_paused[here] = self._thread_paused.get(here, 0) + _CLOSED

    def _thread_left(self) -> None:
        """The calling thread (another of the program's) ends: its window is kept, its thread id may be reused."""
        window = self._window
        if window is not None:
            own = window.threads.pop(threading.get_ident(), None)
            if own is not None:
                window.ended.append(own)

    def _window_before_backward(self) -> bool:
        """Called as a backward() starts; True when the window has just closed and the call must not be recorded.

        Without an optimizer the window counts backward() calls; that no optimizer is used is known only when the
        next backward starts with no step since, so the window ends just before backward call N + 1.
        """
        window = self._window
        if window is None:
            return False
        if threading.get_ident() != self._thread and not window.record.closed:
            with self._lock:
                here = threading.get_ident()
                own = window.threads.setdefault(here, ThreadWindow(self._thread_names.get(here)))
                if not own.steps and own.backwards >= window.limit and not self._steps_open_here():
                    own.backwards += 1
                    self._close_thread_window(own)
                    return True
                own.backwards += 1
            return False
        if window.record.closed:  # a re-armed recording (sentinel.py): it counts backward calls where no optimizer steps
            window.backwards_after += 1
            if window.first_optimizer is None and not self._sentinel:
                if self._rearm_left <= 0:
                    self._to_sentinel()  # (the step after the last one recorded)
                    return True
                self._rearm_left -= 1
            return False
        if not window.steps and not self._steps_open_here() and window.backwards >= window.limit:
            window.backwards += 1  # the call that closes it: the run has at least this many
            self._close_window("backward", safe=False)
            return True
        window.backwards += 1
        return False

    def _close_window(self, unit: str, *, safe: bool) -> None:
        """Stop recording: the trace keeps what it holds; the program runs on at full speed.

        `safe`: called where no torch function is being handled (an optimizer hook), so the mode can come off the
        stack now; otherwise (inside our own `__torch_function__`, where torch pushes the mode back on return) it
        comes off at the next module call or optimizer step, and passes calls straight through until then.
        """
        window = self._window
        assert window is not None  # (only called with a window)
        record = window.record
        record.unit = unit
        first = window.first_optimizer
        record.traced = window.steps[first] if unit == "step" and first is not None else window.limit
        record.closed = True
        record.closed_at = next(self._seq)
        if window.sentinel:
            # the recorder stays on, passing calls through, and records again a step that runs something new
            with self._lock:  # (the program's other threads may be recording)
                self._gc.release()
                self._to_sentinel()
            return
        with self._lock:  # (the program's other threads may be recording)
            self._paused += _CLOSED
            if self._check is not None:
                self._check.close()  # --verify: the kept bytes go with the window
            try:
                with torch._C.DisableTorchFunction():
                    self._name_stack_variables()
            except Exception as exc:  # noqa: BLE001 - naming is a courtesy; never break the program for it
                self._internal(exc)
            self._release()
        # hook dicts are never being iterated here (torch walks copies of the module hook dicts, and the step hooks
        # ran already): every hook but the step counter can go now
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if safe:
            self._pop_mode()
        else:
            from torch.nn.modules.module import register_module_forward_pre_hook

            self._handles.append(register_module_forward_pre_hook(self._pop_mode_at_module))
        if window.stop_after:
            record.stopped = True
            raise WindowStop(f"gradviz: the program was stopped after {record.describe()}")

    def _name_stack_variables(self) -> None:
        """Name tensors from the program's frames now: after the window the recorder no longer sees them."""
        frame = source.user_frame(2)
        frames = []
        while frame is not None:
            if source.is_user_file(frame.f_code.co_filename):
                frames.append(frame)
            frame = frame.f_back
        for frame in frames:
            self.name_locals(source.frame_variables(frame), modules=True)
        del frames, frame

    def _release(self) -> None:
        """Let go of every tensor (no weak-reference callbacks after this) and give back GC and warning settings."""
        window = self._window
        at = window.record.closed_at if window is not None else None
        watch_stored(self, list(self._live.values()), at if at is not None else next(self._seq))
        self._live.clear()
        self._by_tid.clear()
        self._by_storage.clear()
        self._storage_ids.clear()
        self._layout.clear()
        self._layouts_of.clear()
        self._fresh_grads.clear()
        for entry in self._warning_filters:
            with contextlib.suppress(ValueError):
                _warning_filters().remove(entry)
        self._warning_filters = []  # (no registry reset: an ignore filter adds nothing to the once-per-place registries)
        self._gc.release()
        chains.sweep()  # deep graphs dropped while tracing: let them go, a segment at a time
        callsite.forget()  # the call stand-ins hold the callers' globals

    def _pop_mode(self) -> None:
        """Take the mode off torch's stack, where no torch function is being handled (torch would push it back)."""
        if self._mode_on and _on_top(self):
            self.__exit__(None, None, None)
            self._mode_on = False
        # (a mode the program pushed above ours: ours stays below it, passing calls through, until stop())

    def _pop_mode_at_module(self, module: Any, args: Any) -> None:
        # module hooks are called from a copy of the hook dict: removing this one from inside it is safe
        self._pop_mode()
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _window_record(self) -> WindowRecord | None:
        """The window as it stands when tracing ends."""
        window = self._window
        if window is None:
            return None
        record = window.record
        record.unwatched = window.unwatched()
        threads = window.thread_record()
        if threads is not None and not window.steps and not window.backwards and not record.closed:
            # only the program's other threads trained: the window as each of them counted it
            unit, traced, closed, total = threads
            record.unit, record.traced, record.closed = unit, traced, closed
            if closed:
                record.closed_at = next(self._seq)
                if unit == "step":
                    record.total = total
                else:
                    record.at_least = traced + 1
            else:
                record.total = traced
            return record
        if not record.closed:
            first = window.first_optimizer
            if first is not None:
                record.unit, record.traced = "step", window.steps[first]
            else:
                record.unit, record.traced = "backward", window.backwards
            record.total = record.traced
        elif record.unit == "step" and not record.stopped:
            record.total = record.traced + window.after
        elif record.unit == "backward" and not record.stopped:
            record.at_least = window.backwards
        return record


def _on_top(mode: Any) -> bool:
    depth = torch._C._len_torch_function_stack()
    return depth > 0 and torch._C._get_function_stack_at(depth - 1) is mode

