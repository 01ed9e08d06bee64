"""Front doors to the recorder: `with trace()` for a block of code, `trace_script()` / `trace_module()` for a
program run as `python script.py` / `python -m module` would run it."""

from __future__ import annotations

import builtins
import contextlib
import os
import runpy
import sys
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from ..model import Event, EventData, EventKind, ExceptionRecord, Trace
from . import source
from .exceptions import record_exception
from .recorder import Recorder
from .window import WindowStop
from .windows import StepWindow


class trace:  # noqa: N801 - used as `with gradviz.trace() as t`, like a function
    """Record everything torch does inside a `with` block.

    >>> with gradviz.trace() as t:
    ...     out = a.tanh()
    >>> t.tensor("out").version
    0

    The block's exception, if any, is recorded (as data) in ``t.exception`` and propagates unchanged.

    With ``steps=N`` only the first N optimizer steps (or N backward() calls where no optimizer steps) are
    recorded; the rest of the block runs untraced at full speed, and ``t.window`` says what was traced. With
    ``stop_after=True`` the block ends there too (execution goes on after the `with` statement). After the window
    the recorder stays on as a sentinel (``sentinel=False``: off): a later step that runs code the window never saw
    is recorded again, whole, and listed in ``t.window.rearmed``.

    With ``verify=True`` a silent write to a saved tensor (through `.data`) has its effect measured at the graph's
    backward: the backward event's ``data["verify"]`` holds, per tensor given a gradient, how far the program's
    gradient is from the one the intact saved values give (tracer/verify.py).
    """

    def __init__(
        self, *, steps: int | None = None, stop_after: bool = False, sentinel: bool = True, verify: bool = False
    ) -> None:
        self._recorder = Recorder(_window(steps, stop_after, sentinel), verify=verify)
        self.trace: Trace = self._recorder.trace

    def __enter__(self) -> Trace:
        self._recorder.start(outside=sys._getframe(1))
        return self.trace

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        self._recorder.stop()
        caller = sys._getframe(1)
        self._recorder.name_locals(source.frame_variables(caller), modules=True)
        del caller
        stopped = isinstance(exc, WindowStop)
        if exc is not None and not stopped:
            _add_exception(self._recorder, record_exception(exc, tb))
        self._recorder.finish()
        # False lets the block's own exception propagate, the one object Python raised; the window's own stop
        # (stop_after) ends the block quietly
        return stopped


def _window(steps: int | None, stop_after: bool, sentinel: bool = True) -> StepWindow | None:
    if steps is None:
        if stop_after:
            raise ValueError("stop_after needs steps=N: the number of steps to trace before stopping")
        return None
    return StepWindow(steps, stop_after=stop_after, sentinel=sentinel)


@dataclass
class ProgramRun:
    """A program run under the tracer, for front ends: the trace, and the live exception only until the front
    end has reported it (a `sys.excepthook` the program installed is called with it, as Python would)."""

    trace: Trace
    error: BaseException | None = None
    excepthook: Callable[..., Any] | None = None


#: Called when the program calls os._exit(code) while traced, with the trace finished: returns the status to exit
#: with (the process ends right after, as the program asked).
HardExitHandler = Callable[[Trace, int], int]

#: Called as tracing begins with the trace being recorded and the step window's record (None without a window),
#: for a front end's progress display; it may read them from another thread and must not change them.
StartHandler = Callable[[Trace, Any], None]


def trace_script(
    path: str | os.PathLike[str],
    argv: tuple[str, ...] | list[str] = (),
    *,
    steps: int | None = None,
    stop_after: bool = False,
    sentinel: bool = True,
    verify: bool = False,
) -> Trace:
    """Run a script as `python path argv...` would and return its trace.

    The script's exception (including SystemExit) is not raised here: it is recorded, as data, in
    ``trace.exception``; ``trace.reraise()`` raises it again, rebuilt from that record.
    ``steps``/``stop_after``/``sentinel``: the step window, as for :class:`trace`; a script stopped there ends
    without error. ``verify``: measure the gradient error of silent writes to saved tensors, as for :class:`trace`.
    """
    return run_script(path, argv, steps=steps, stop_after=stop_after, sentinel=sentinel, verify=verify).trace


def trace_module(
    module: str,
    argv: tuple[str, ...] | list[str] = (),
    *,
    steps: int | None = None,
    stop_after: bool = False,
    sentinel: bool = True,
    verify: bool = False,
) -> Trace:
    """Run a module as `python -m module argv...` would and return its trace (see trace_script)."""
    return run_module(module, argv, steps=steps, stop_after=stop_after, sentinel=sentinel, verify=verify).trace


def run_script(
    path: str | os.PathLike[str],
    argv: tuple[str, ...] | list[str] = (),
    *,
    on_hard_exit: HardExitHandler | None = None,
    on_start: StartHandler | None = None,
    steps: int | None = None,
    stop_after: bool = False,
    sentinel: bool = True,
    verify: bool = False,
) -> ProgramRun:
    """trace_script, for front ends: also returns the live exception for a program-installed excepthook."""
    script = Path(path)
    if not script.is_file():
        raise FileNotFoundError(f"no such script: {str(script)!r}")
    script_path = str(script.resolve())
    return _run(
        lambda: _run_as_main(script_path),
        script_path=script_path,
        argv0=str(path),
        path0=str(script.resolve().parent),
        argv=argv,
        on_hard_exit=on_hard_exit,
        on_start=on_start,
        window=_window(steps, stop_after, sentinel),
        verify=verify,
    )


def run_module(
    module: str,
    argv: tuple[str, ...] | list[str] = (),
    *,
    on_hard_exit: HardExitHandler | None = None,
    on_start: StartHandler | None = None,
    steps: int | None = None,
    stop_after: bool = False,
    sentinel: bool = True,
    verify: bool = False,
) -> ProgramRun:
    """trace_module, for front ends. `python -m` puts the current folder first on sys.path, sets sys.argv[0] to the
    module's file and runs it as `__main__` with its `__spec__`: runpy.run_module(alter_sys=True) does the same."""

    cwd = os.getcwd()
    saved_path = list(sys.path)
    sys.path.insert(0, cwd)
    try:
        # found without importing the parent packages: their __init__ is the program's code, run under the tracer
        # (an error there is the program's error, with its traceback, as `python -m` shows it)
        origin = module_origin(module)
    finally:
        sys.path[:] = saved_path
    return _run(
        lambda: runpy.run_module(module, run_name="__main__", alter_sys=True),
        script_path=os.path.abspath(origin),
        argv0="-m",
        path0=cwd,
        argv=argv,
        on_hard_exit=on_hard_exit,
        on_start=on_start,
        window=_window(steps, stop_after, sentinel),
        verify=verify,
    )


def module_origin(module: str) -> str:
    """The file `python -m module` runs (a package's `__main__.py`), found on sys.path without importing anything
    already not imported; ModuleNotFoundError with Python's own words otherwise."""
    import importlib.machinery
    import importlib.util

    parts = module.split(".")
    spec = None
    path: list[str] | None = None
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        try:
            if name in sys.modules or depth == 1:  # imported already, or a top-level name: find_spec imports nothing
                spec = importlib.util.find_spec(name)
            else:
                spec = importlib.machinery.PathFinder.find_spec(name, path)
        except (ImportError, ValueError) as exc:
            raise ModuleNotFoundError(f"Error while finding module specification for {module!r} ({exc})") from None
        if spec is None:  # Python's words, as `python -m` prints them
            if depth == len(parts):
                raise ModuleNotFoundError(f"No module named {module}")
            raise ModuleNotFoundError(
                f"Error while finding module specification for {module!r} (ModuleNotFoundError: No module named {name!r})"
            )
        if depth < len(parts):
            if spec.submodule_search_locations is None:
                raise ModuleNotFoundError(
                    f"Error while finding module specification for {module!r} (ModuleNotFoundError: __path__ attribute "
                    f"not found on {name!r} while trying to find {'.'.join(parts[: depth + 1])!r})"
                )
            path = list(spec.submodule_search_locations)
    assert spec is not None
    if spec.submodule_search_locations is not None:  # a package: python runs its __main__
        main = importlib.machinery.PathFinder.find_spec(module + ".__main__", list(spec.submodule_search_locations))
        if main is None or main.origin is None:
            raise ModuleNotFoundError(
                f"No module named {module}.__main__; {module!r} is a package and cannot be directly executed"
            )
        spec = main
    if spec.origin is None or spec.origin in ("built-in", "frozen"):
        raise ModuleNotFoundError(f"No code object available for {module}")
    return spec.origin


def _run(
    body: Callable[[], dict[str, Any]],
    *,
    script_path: str,
    argv0: str,
    path0: str,
    argv: tuple[str, ...] | list[str],
    on_hard_exit: HardExitHandler | None,
    on_start: StartHandler | None = None,
    window: StepWindow | None = None,
    verify: bool = False,
) -> ProgramRun:
    # the program's lines as they are before it runs: one that deletes or rewrites its own file is still quoted
    with source.pinned(script_path):
        return _run_pinned(body, script_path=script_path, argv0=argv0, path0=path0, argv=argv,
                           on_hard_exit=on_hard_exit, on_start=on_start, window=window, verify=verify)


def _run_pinned(
    body: Callable[[], dict[str, Any]],
    *,
    script_path: str,
    argv0: str,
    path0: str,
    argv: tuple[str, ...] | list[str],
    on_hard_exit: HardExitHandler | None,
    on_start: StartHandler | None,
    window: StepWindow | None,
    verify: bool,
) -> ProgramRun:
    recorder = Recorder(window, verify=verify)
    recorder.trace.script = script_path
    # the program may empty or reorder sys.path: put back the list we found (our own imports come later)
    saved_argv, saved_path, saved_hook, saved_exit = sys.argv, list(sys.path), sys.excepthook, os._exit
    sys.argv = [argv0, *map(str, argv)]
    if sys.path:
        sys.path[0] = path0
    else:
        sys.path.insert(0, path0)
    namespace: dict[str, Any] | None = None
    run = ProgramRun(recorder.trace)
    if on_hard_exit is not None:

        def restore() -> None:  # what the front end needs to write its files: our own sys.path
            sys.argv, sys.excepthook = saved_argv, saved_hook
            sys.path[:] = saved_path

        os._exit = _hard_exit(recorder, script_path, on_hard_exit, saved_exit, restore)
    try:
        if on_start is not None:
            on_start(recorder.trace, window.record if window is not None else None)
        recorder.start(outside=sys._getframe(0))
        try:
            namespace = body()
        finally:
            recorder.stop()
            os._exit = saved_exit
    except WindowStop:
        pass  # the program was stopped at the end of the step window, as asked: it ends as if it had finished
    except BaseException as exc:  # the program's error belongs to the trace, not to us
        _program_error(recorder, run, exc, script_path, saved_hook)
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
        sys.excepthook = saved_hook
    if namespace is not None:
        recorder.name_locals(namespace, modules=True)
        namespace = None
    recorder.finish()
    return run


def _program_error(recorder: Recorder, run: ProgramRun, exc: BaseException, script_path: str, saved_hook: Any) -> None:
    """The program raised: name what its frames held, record the exception and keep it for the front end."""
    frames = [f for f, _ in traceback.walk_tb(exc.__traceback__)]
    for frame in frames:
        if frame.f_code.co_filename == script_path:
            recorder.name_locals(frame.f_globals, modules=True)
    for frame in frames:
        if source.is_user_file(frame.f_code.co_filename):
            recorder.name_locals(source.frame_variables(frame))
    del frames
    _add_exception(recorder, record_exception(exc, exc.__traceback__, prefer=script_path))
    if sys.excepthook is not saved_hook and not isinstance(exc, SystemExit):
        run.excepthook = sys.excepthook  # Python calls the program's own hook for an uncaught exception
    # the front end may hand the exception to that hook; the frames' locals (the program's tensors) go now
    traceback.clear_frames(exc.__traceback__)
    run.error = exc


def _hard_exit(
    recorder: Recorder,
    script_path: str,
    handler: HardExitHandler,
    real_exit: Callable[[int], Any],
    restore: Callable[[], None],
) -> Any:
    """A stand-in for os._exit while the program runs: finish the trace, let the front end write and print what it
    has, then end the process as the program asked. A forked child (a DataLoader worker) exits untouched."""
    pid = os.getpid()

    def _exit(code: int) -> None:
        if os.getpid() != pid:
            real_exit(code)
        status = code
        try:
            recorder.stop()
            caller: FrameType | None = sys._getframe(1)
            location = None
            while caller is not None:
                if caller.f_code.co_filename == script_path:
                    recorder.name_locals(caller.f_globals, modules=True)
                    if location is None:
                        location = source.make_location(script_path, caller.f_lineno)
                if source.is_user_file(caller.f_code.co_filename):
                    recorder.name_locals(source.frame_variables(caller))
                caller = caller.f_back
            del caller
            restore()
            code_value = code if isinstance(code, int) else 1
            _add_exception(
                recorder, ExceptionRecord("os._exit", str(code_value), location, module=None, exit_code=code_value)
            )
            status = handler(recorder.finish(), code_value)
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):  # a closed or broken stream: nothing more can be said on it
                    stream.flush()
            real_exit(status)

    return _exit


def _run_as_main(script_path: str) -> dict[str, Any]:
    """Execute a script as `python script.py` does: a fresh `__main__` module, sys.argv left as the caller set it.

    (runpy.run_path would overwrite sys.argv[0] with the absolute path.)
    """
    code = compile(Path(script_path).read_bytes(), script_path, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=script_path, __builtins__=builtins, __spec__=None, __loader__=None, __cached__=None)
    saved_main = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
    return main.__dict__


def _add_exception(recorder: Recorder, record: ExceptionRecord) -> None:
    trace = recorder.trace
    trace.exception = record
    trace.events.append(
        Event(
            seq=next(recorder._seq),
            kind=EventKind.EXCEPTION,
            location=record.location,
            data=EventData(type=record.type, message=record.message),
        )
    )
