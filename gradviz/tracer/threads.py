"""Threads the program runs while tracing: torch's mode stack is per thread, so the recorder is entered in each thread
that starts while tracing, and in each work item of a thread pool made before (threads already running when tracing
began, and threads started outside `threading`, cannot be entered: README says so)."""

from __future__ import annotations

import _thread
import concurrent.futures.thread
import functools
import itertools
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol

import torch


class ThreadRecording(Protocol):
    def enter_thread(self, name: str | None = None, thread: Any = None) -> bool: ...

    def thread_name(self) -> str: ...

    def leave_thread(self) -> None: ...


def _on_stack(mode: Any) -> bool:
    return any(torch._C._get_function_stack_at(i) is mode for i in range(torch._C._len_torch_function_stack()))


def install(recorder: ThreadRecording) -> Callable[[], None]:
    """Enter `recorder` in every thread started from now on, and in every thread-pool work item run from now on in a
    thread it is not entered in (a pool whose threads started before tracing). Returns the function that undoes it.

    Thread._bootstrap_inner, not run(): a subclass's own run() is covered too; autograd's engine threads and other
    C++ threads never pass through it and are left alone.
    """
    bootstrap: Callable[[threading.Thread], None] = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]  # (private: not in the stubs)
    work_item_run = concurrent.futures.thread._WorkItem.run

    def traced_bootstrap(thread: threading.Thread) -> None:
        # (called before the thread is marked started: start() returns only after this, so threads are entered in
        # the order the program started them, and same-named ones numbered so: `worker`, `worker#2`)
        if not recorder.enter_thread(thread.name, thread):  # tracing ended between start() and here
            return bootstrap(thread)
        try:
            return bootstrap(thread)
        finally:
            recorder.leave_thread()

    def traced_work_item(item: Any) -> None:
        here = threading.current_thread()
        if _on_stack(recorder) or not recorder.enter_thread(here.name, here):
            return work_item_run(item)
        try:
            return work_item_run(item)
        finally:
            recorder.leave_thread()

    # `_thread.start_new` is the deprecated alias (a builtin of its own before Python 3.13)
    starts = {name: getattr(_thread, name) for name in ("start_new_thread", "start_new") if hasattr(_thread, name)}
    traced_starts = {name: _traced_start_new_thread(recorder, start) for name, start in starts.items()}

    # (private methods the stubs do not declare, or declare generic: ours take any instance)
    threading.Thread._bootstrap_inner = traced_bootstrap  # type: ignore[attr-defined]  # (see above)
    concurrent.futures.thread._WorkItem.run = traced_work_item  # type: ignore[method-assign,assignment]  # (see above)
    # (threading keeps its own reference: Thread.start does not come here)
    for name, traced in traced_starts.items():
        setattr(_thread, name, traced)

    def uninstall() -> None:
        # put back only what is still ours (a program that patched these itself meanwhile keeps its own)
        if threading.Thread._bootstrap_inner is traced_bootstrap:  # type: ignore[attr-defined]  # (not in the stubs)
            threading.Thread._bootstrap_inner = bootstrap  # type: ignore[attr-defined]  # (not in the stubs)
        if concurrent.futures.thread._WorkItem.run is traced_work_item:
            concurrent.futures.thread._WorkItem.run = work_item_run  # type: ignore[method-assign]  # (put back as found)
        for name, traced in traced_starts.items():
            if getattr(_thread, name, None) is traced:
                setattr(_thread, name, starts[name])

    return uninstall


def _traced_start_new_thread(recorder: ThreadRecording, start_new_thread: Callable[..., int]) -> Callable[..., int]:
    """`_thread.start_new_thread` entering `recorder` in the thread it starts. Whatever the builtin would refuse (a
    function not callable, args not a tuple, a keyword) goes to the builtin as it is, for its own error."""

    def start(*args: Any, **kwargs: Any) -> int:
        if kwargs or not 2 <= len(args) <= 3 or not callable(args[0]) or not isinstance(args[1], tuple):
            return start_new_thread(*args, **kwargs)
        function = args[0]
        name = recorder.thread_name()  # (numbered here, in the order the program starts them, not as they run)

        @functools.wraps(function)
        def run(*a: Any, **k: Any) -> Any:
            entered = recorder.enter_thread(name)  # (False: tracing ended between start and here)
            try:
                return function(*a, **k)
            except SystemExit:
                return None  # as `_thread` ends the thread: silently
            except BaseException as exc:  # reported as `_thread` reports it, without this frame in the traceback
                _unraisable(exc, function)
                return None
            finally:
                if entered:
                    recorder.leave_thread()

        return start_new_thread(run, *args[1:])

    return _LikeBuiltin(start, start_new_thread)  # (a callable standing in for it)


class _LikeBuiltin:
    """A stand-in for a builtin function (`_thread.start_new_thread`) that the program sees as the builtin wherever
    Python lets an object say what it is: its name, qualified name, module, doc, `__self__`, `__text_signature__`,
    repr, `__class__` (so `isinstance(f, types.BuiltinFunctionType)` and `inspect.isbuiltin` hold), what
    `inspect.signature` says (no signature, as for the builtin), how it pickles. Only `type(f)` and identity tell it
    apart: a builtin function object is made only by C code, and its type cannot be subclassed."""

    __slots__ = ("_builtin", "_call")

    def __init__(self, call: Callable[..., Any], builtin: Any) -> None:
        object.__setattr__(self, "_call", call)
        object.__setattr__(self, "_builtin", builtin)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # __name__, __qualname__, __module__, __doc__, __self__, ...
        return getattr(self._builtin, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._builtin, name, value)  # (raises as the builtin does: its attributes are read-only)

    def __dir__(self) -> list[str]:
        return dir(self._builtin)

    def __repr__(self) -> str:
        return repr(self._builtin)

    def __reduce__(self) -> Any:
        return self._builtin.__reduce__()

    @property  # type: ignore[misc]  # (a builtin's class, as isinstance reads it)
    def __class__(self) -> type:
        return type(self._builtin)

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]  # (the builtin's)
        doc: str | None = self._builtin.__doc__
        return doc

    @property
    def __module__(self) -> str:  # type: ignore[override]  # (the builtin's)
        module: str = self._builtin.__module__
        return module

    @property
    def __signature__(self) -> Any:
        """What inspect.signature finds for the builtin: its signature, or its own error (none recorded)."""
        import inspect

        return inspect.signature(self._builtin)


def leave(mode: Any) -> None:
    """Take `mode` off this thread's stack, where it is on top (a thread ending with modes of its own above ours
    leaves them: its stack goes with it)."""
    depth = torch._C._len_torch_function_stack()
    if depth > 0 and torch._C._get_function_stack_at(depth - 1) is mode:
        torch._C._pop_torch_function_stack()



class _Numbers:
    """One thread's autograd node numbers: torch numbers the nodes each thread makes on its own, from 0 in a new
    thread (`sequence_nr`), and does not say which thread made a node."""

    __slots__ = ("first", "mark", "token")

    def __init__(self, token: int | None, first: int) -> None:
        self.token = token  # None: the tracing thread, whose nodes are known by their number alone
        self.first = first  # the thread's next number when the recorder entered it: nodes below were made before
        self.mark = first  # its next number when it last asked for a node: nodes from here on are its own new ones

    def key(self, number: int) -> Any:
        return number if self.token is None else (self.token, number)


class NodeNumbers:
    """Which node a `sequence_nr` names, once the program's other threads record too.

    Until then a node is known by its number (the tracing thread's numbers never repeat). Afterwards each thread's
    nodes are known by (thread, number): a number from the thread's mark up to its next number is a node the asking
    thread made since it last asked. An older number is a node recorded earlier, by this thread or another (a tensor
    passed between threads), or one made unrecorded (before tracing, inside an optimizer step). Among the recorded
    nodes of that number and type, the node is told by its `metadata` dict, which autograd keeps with the node for
    its whole life and gives back unchanged: noted as each node is recorded (what the program reads there is the
    same empty dict it would get without gradviz), it tells the node from another thread's of the same number.
    """

    def __init__(self, ids: dict[Any, str], nodes: dict[str, Any]) -> None:
        self.on = False
        self._ids = ids  # the recorder's node keys -> node ids
        self._nodes = nodes  # node id -> record
        self._local = threading.local()
        self._tokens = itertools.count(1)
        self._firsts: dict[int, int] = {}  # thread token -> its first number
        self._by_number: dict[int, list[Any]] = {}  # number -> keys of the recorded nodes with it
        self._metadata: dict[Any, int] = {}  # key -> id() of its node's metadata dict, for nodes recorded since `on`
        self._tracing = _Numbers(None, 0)

    def tracing_thread(self) -> None:
        """Called in the thread that starts tracing: its nodes keep their plain numbers."""
        self._tracing = self._local.numbers = _Numbers(None, _next_number())

    def entered(self) -> None:
        """Called (under the recorder's lock) in another thread as the recorder is entered there."""
        if getattr(self._local, "numbers", None) is None:
            self._local.numbers = self._new()
        if not self.on:  # from now on numbers are told apart by thread
            self.on = True
            numbers = [key for key in self._ids if type(key) is int]
            for key in numbers:
                self._by_number.setdefault(key, []).append(key)
            # the tracing thread made the nodes it recorded, and any after them
            self._tracing.mark = max(numbers, default=self._tracing.mark - 1) + 1

    def _new(self) -> _Numbers:
        numbers = _Numbers(next(self._tokens), _next_number())
        self._firsts[numbers.token] = numbers.first  # type: ignore[index]  # (a new thread's token is an int)
        return numbers

    def here(self) -> tuple[_Numbers, int, int]:
        """The calling thread's numbers, its mark and its next number; the mark moves there (what the thread made
        until now is recorded by this call, or was made unrecorded)."""
        numbers: _Numbers | None = getattr(self._local, "numbers", None)
        if numbers is None:  # a thread the recorder was never entered in (autograd's own, a hook's)
            numbers = self._local.numbers = self._new()
        mark, now = numbers.mark, _next_number()
        numbers.mark = now
        return numbers, mark, now

    def key(self, fn: Any, number: int, name: Callable[[], str], numbers: _Numbers, mark: int, now: int) -> Any:
        """The key of node `fn`, numbered `number`, met in the calling thread (see the class); `name`: its type's."""
        own = numbers.key(number)
        if mark <= number < now:
            return own
        keys = self._by_number.get(number)
        if not keys:
            return own
        kind = name()
        same = [key for key in keys if self._nodes[self._ids[key]].name == kind]
        if not same:
            return own
        metadata = id(fn.metadata)
        known = [key for key in same if self._metadata.get(key) == metadata]
        if known:
            return known[-1]  # (an address reused after an earlier node died: the latest is the live one)
        # a node recorded before other threads did (its metadata not noted): the one of its number and type
        unnoted = [key for key in same if key not in self._metadata]
        if unnoted:
            return own if own in unnoted else unnoted[0]
        # none of them: a node made unrecorded (by this thread, or another); its number taken, a key of its own
        return own if own not in self._ids else (None, number, len(self._metadata))

    def added(self, key: Any, number: int, fn: Any) -> None:
        self._by_number.setdefault(number, []).append(key)
        self._metadata[key] = id(fn.metadata)

    def first(self, key: Any, tracing_first: int) -> int:
        """The first number of the thread that made the node `key`: numbers below it were made before tracing."""
        if type(key) is int:
            return tracing_first
        return self._firsts[key[0]] if key[0] is not None else 0


def _next_number() -> int:
    return torch._C._autograd._get_sequence_nr()


class Bystanders:
    """The program's threads the recorder is not entered in (running when tracing began, started in C or through a
    reference to `_thread` taken before): whether they ran the program's code while tracing.

    Looked at when tracing starts, at each backward and when it stops: a thread whose innermost frame of the
    program's code moved since the last look (or that appeared, or ended, meanwhile) ran, unrecorded. Its torch
    calls are not in the trace, and the output says so instead of a silent "no problems found". A thread that ran
    and ended between two looks is not seen.
    """

    def __init__(self, is_user_file: Callable[[str], bool]) -> None:
        self.entered: set[int] = set()  # threads the recorder is entered in now
        self._is_user_file = is_user_file
        self._tracing = 0
        self._before: set[int] = set()  # threads running when tracing began
        self._last: dict[int, tuple[int, int] | None] = {}  # thread -> where its program code was at the last look
        self._names: dict[int, str] = {}
        self.ran: dict[int, str] = {}  # thread -> how the output names it, in order of discovery

    def start(self) -> None:
        self._tracing = threading.get_ident()
        if _python_threads() or self._tracing != threading.main_thread().ident:  # (else: no other thread to see)
            self._before = set(sys._current_frames())
            self.look(first=True)

    def look(self, *, first: bool = False) -> None:
        if not _python_threads() and not self._last and self._tracing == threading.main_thread().ident:
            return  # no other thread of Python's making, and none seen before (a program without threads)
        frames = sys._current_frames()
        frame = None
        try:
            names = {thread.ident: thread for thread in threading.enumerate()}
            for ident, frame in frames.items():
                if ident == self._tracing or ident in self.entered:
                    self._last.pop(ident, None)  # (a pool thread between work items runs no program code)
                    continue
                where = self._program_code(frame)
                known = ident in self._last
                before = self._last.get(ident)
                self._last[ident] = where
                thread = names.get(ident)
                if thread is not None:
                    self._names[ident] = _describe(thread, ident in self._before)
                if not first and ident not in self.ran and where != before and (known or where is not None):
                    self.ran[ident] = self._names.get(ident) or _describe(None, ident in self._before)
            for ident, where in list(self._last.items()):
                if ident not in frames:  # ended since the last look: it ran its program code to the end
                    del self._last[ident]
                    if where is not None and ident not in self.ran:
                        self.ran[ident] = self._names.get(ident) or _describe(None, ident in self._before)
        finally:
            # this thread's own frame is among them: kept by a local, it would keep the frames below it (and the
            # program's tensors in them) alive after they return
            frames = frame = {}  # type: ignore[assignment]  # (dropped)

    def _program_code(self, frame: FrameType | None) -> tuple[int, int] | None:
        while frame is not None:
            if self._is_user_file(frame.f_code.co_filename):
                return id(frame), frame.f_lasti
            frame = frame.f_back
        return None


def _unraisable(exc: BaseException, function: Any) -> None:
    """`Exception ignored in thread started by: <function worker ...>` and the traceback from `function` on, through
    `sys.unraisablehook`, as `_thread` reports an error that ends a thread it started: from Python 3.13 the function
    is part of the message (`... started by <function worker ...>:`, no object), as `_thread` there passes it."""
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    args = _UNRAISABLE_ARGS or _unraisable_args()
    if sys.version_info >= (3, 13):
        message, obj = f"Exception ignored in thread started by {function!r}", None
    else:
        message, obj = "Exception ignored in thread started by", function
    sys.unraisablehook(args((type(exc), exc.with_traceback(tb), tb, message, obj)))


_UNRAISABLE_ARGS: Any = None


def _unraisable_args() -> Any:
    """The type `sys.unraisablehook` takes (Python does not name it): from one unraisable error of our own, caught."""
    global _UNRAISABLE_ARGS
    caught: list[Any] = []
    hook = sys.unraisablehook
    sys.unraisablehook = caught.append
    try:
        _Unraisable()
    finally:
        sys.unraisablehook = hook
    _UNRAISABLE_ARGS = type(caught[0])
    return _UNRAISABLE_ARGS


class _Unraisable:
    def __del__(self) -> None:
        raise RuntimeError("(gradviz: the type of sys.unraisablehook's argument)")


def _python_threads() -> int:
    """Threads started by Python (`threading`, `_thread`), the main one left out."""
    count = getattr(_thread, "_count", None)
    return count() if count is not None else 1


def _describe(thread: threading.Thread | None, before: bool) -> str:
    """`thread 'loader' (started before tracing)`, `a thread started outside threading`."""
    if thread is None or isinstance(thread, threading._DummyThread):  # (a `_thread` thread that asked threading)
        return "a thread started before tracing" if before else "a thread started outside `threading`"
    return f"thread {thread.name!r}" + (" (started before tracing)" if before else "")
