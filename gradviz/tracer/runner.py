"""Front doors to the recorder: `with trace()` for a block of code, `trace_script()` for a whole script."""

from __future__ import annotations

import os
import builtins
import types
import sys
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

from ..model import Event, EventKind, ExceptionRecord, Trace
from . import source
from .recorder import Recorder


class trace:  # noqa: N801 - used as `with gradviz.trace() as t`, like a function
    """Record everything torch does inside a `with` block.

    >>> with gradviz.trace() as t:
    ...     out = a.tanh()
    >>> t.tensor("out").version
    0

    The block's exception, if any, is recorded in ``t.exception`` and propagates unchanged.
    """

    def __init__(self) -> None:
        self._recorder = Recorder()
        self.trace: Trace = self._recorder.trace

    def __enter__(self) -> Trace:
        self._recorder.start()
        return self.trace

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._recorder.stop()
        caller = sys._getframe(1)
        self._recorder.name_locals(source.frame_variables(caller), modules=True)
        del caller
        if exc is not None:
            self.trace.error = exc
            _record_exception(self._recorder, exc, tb)
        self._recorder.finish()


def trace_script(path: str | os.PathLike[str], argv: tuple[str, ...] | list[str] = ()) -> Trace:
    """Run a script as `python path argv...` would and return its trace.

    The script's exception (including SystemExit) is not raised here: it is recorded in ``trace.exception``
    and kept in ``trace.error`` so the caller can re-raise it with ``trace.reraise()``.
    """
    script = Path(path)
    if not script.is_file():
        raise FileNotFoundError(f"no such script: {str(script)!r}")
    script_path = str(script.resolve())
    recorder = Recorder()
    recorder.trace.script = script_path
    saved_argv, saved_path0 = sys.argv, sys.path[0] if sys.path else None
    sys.argv = [str(path), *map(str, argv)]
    if sys.path:
        sys.path[0] = str(script.resolve().parent)
    else:
        sys.path.insert(0, str(script.resolve().parent))
    namespace: dict[str, Any] | None = None
    try:
        recorder.start()
        try:
            namespace = _run_as_main(script_path)
        finally:
            recorder.stop()
    except BaseException as exc:  # the script's error belongs to the trace, not to us
        recorder.trace.error = exc
        frames = [f for f, _ in traceback.walk_tb(exc.__traceback__)]
        for frame in frames:
            if frame.f_code.co_filename == script_path:
                recorder.name_locals(frame.f_globals, modules=True)
        for frame in frames:
            if source.is_user_file(frame.f_code.co_filename):
                recorder.name_locals(source.frame_variables(frame))
        del frames
        _record_exception(recorder, exc, exc.__traceback__, prefer=script_path)
        # keep the exception (callers may re-raise it) but not the script's tensors in its frames' locals
        traceback.clear_frames(exc.__traceback__)
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
    if namespace is not None:
        recorder.name_locals(namespace, modules=True)
    return recorder.finish()


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


def _record_exception(
    recorder: Recorder, exc: BaseException, tb: TracebackType | None, *, prefer: str | None = None
) -> None:
    frames = list(traceback.walk_tb(tb))
    # where it surfaced in the user's code: the innermost frame of the script, else of any user file
    chosen = None
    for frame, lineno in reversed(frames):
        if prefer is not None and frame.f_code.co_filename == prefer:
            chosen = (frame.f_code.co_filename, lineno)
            break
    if chosen is None:
        for frame, lineno in reversed(frames):
            if source.is_user_file(frame.f_code.co_filename):
                chosen = (frame.f_code.co_filename, lineno)
                break
    location = source.make_location(*chosen) if chosen else None
    message = str(exc) if not isinstance(exc, SystemExit) else str(exc.code if exc.code is not None else 0)
    trace = recorder.trace
    trace.exception = ExceptionRecord(type(exc).__name__, message, location)
    trace.events.append(
        Event(
            seq=next(recorder._seq),
            kind=EventKind.EXCEPTION,
            location=location,
            data={"type": type(exc).__name__, "message": message},
        )
    )
