"""Run a program like Python does, for the front ends: a script, `-m module`, or a saved trace (no torch here)."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..text import safe_str

if TYPE_CHECKING:
    from ..model import Trace
    from ..tracer.runner import HardExitHandler, ProgramRun, StartHandler

#: Suffixes read as a saved trace rather than run as a script.
TRACE_SUFFIXES = (".json",)


class ScriptError(ValueError):
    """The program cannot be run (missing script or module, not Python, does not compile) or the saved trace
    cannot be read: one line for the user, exit status 2."""


@dataclass(frozen=True)
class Program:
    """What to run: `script` (a path), `module` (`-m pkg.train`) or `trace` (a saved trace file, nothing runs)."""

    kind: str
    target: str
    args: list[str] = field(default_factory=list)

    @property
    def stem(self) -> str:
        """The base of default output names: `train` for train.py, -m pkg.train and train.json."""
        if self.kind == "module":
            return self.target.rsplit(".", 1)[-1]
        name = Path(self.target).name
        for suffix in (".gradviz.json", ".trace.json", ".json"):
            if self.kind == "trace" and name.lower().endswith(suffix):
                return name[: -len(suffix)] or name
        return Path(self.target).stem

    @property
    def shown(self) -> str:
        """How messages name it: the path, or `-m pkg.train`."""
        return f"-m {self.target}" if self.kind == "module" else self.target


def program_of(target: str | None, module: str | None, args: list[str]) -> Program:
    """The program the command line names: SCRIPT, TRACE.json or -m MODULE (exactly one)."""
    if module is not None and target is not None:
        raise ScriptError(f"give either a script or -m MODULE, not both ({target!r} and -m {module})")
    if module is not None:
        return Program("module", module, args)
    if target is None:
        raise ScriptError("no program given: name a script (train.py), a module (-m pkg.train) or a saved trace (run.json)")
    if Path(target).suffix.lower() in TRACE_SUFFIXES:
        if args:
            raise ScriptError(f"{target!r} is a saved trace: nothing runs, so it takes no script arguments")
        return Program("trace", target)
    return Program("script", target, args)


def check_program(program: Program) -> None:
    """Make sure the program can run (or the trace file exists), before any output is touched."""
    if program.kind == "script":
        check_script(program.target)
    elif program.kind == "module":
        check_module(program.target)
    else:
        path = Path(program.target).expanduser()
        if not path.exists():
            raise ScriptError(f"no such trace file: {program.target!r}")
        if path.is_dir():
            raise ScriptError(f"{program.target!r} is a folder, not a trace file")
        _regular(path, program.target, "trace file")


def check_script(name: str) -> Path:
    """The script as a path, after making sure it exists and is Python that compiles; ScriptError otherwise."""
    path = Path(name).expanduser()
    if not path.exists():
        raise ScriptError(f"no such script: {name!r}")
    if path.is_dir():
        raise ScriptError(f"{name!r} is a folder, not a Python script")
    if path.suffix.lower() not in (".py", ".pyw", ""):
        raise ScriptError(f"{name!r} is not a Python file (expected a .py script, or a saved trace .json)")
    _regular(path, name, "Python script")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ScriptError(f"cannot read {name!r}: {exc.strerror or exc}") from None
    try:
        encoding, _ = tokenize.detect_encoding(iter(raw.splitlines(keepends=True)).__next__)
        text = raw.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        raise ScriptError(f"{name!r} is not a Python file (it is not text)") from None
    if "\0" in text:
        raise ScriptError(f"{name!r} is not a Python file (it contains binary data)")
    try:
        compile(raw, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise ScriptError(syntax_message(exc, name)) from None
    except ValueError as exc:
        raise ScriptError(f"{name!r} is not a Python file ({exc})") from None
    except (RecursionError, MemoryError) as exc:  # nested too deeply for the compiler: Python fails the same way
        raise ScriptError(f"cannot compile {name}: {type(exc).__name__}: {safe_str(exc)}") from None
    return path


def input_file(program: Program) -> Path | None:
    """The file the program is read from: the script, the saved trace, or the module's file (None if not found)."""
    if program.kind != "module":
        return Path(program.target).expanduser()
    from ..tracer.runner import module_origin

    saved = list(sys.path)
    sys.path.insert(0, os.getcwd())
    try:
        return Path(module_origin(program.target))
    except ModuleNotFoundError:
        return None
    finally:
        sys.path[:] = saved


def refuse_input_as_output(program: Program, outputs: list[Path]) -> None:
    """ScriptError for an output that is the program's own file (by name, through a symbolic link, or a hard link
    to it), checked before anything runs: writing it would destroy the user's script or trace."""
    source = input_file(program)
    if source is None or not source.exists():
        return
    what = {"script": "the script", "module": f"the file of -m {program.target}", "trace": "the trace file read"}[program.kind]
    for out in outputs:
        same = out.resolve() == source.resolve()
        with contextlib.suppress(OSError):
            same = same or (out.exists() and os.path.samefile(out, source))
        if same:
            how = " (through a link)" if out.is_symlink() or out.absolute() != source.absolute() else ""
            raise ScriptError(f"refusing to write {str(out)!r}: it is {what}, {str(source)!r}{how}; choose another -o")


def _regular(path: Path, name: str, what: str) -> None:
    """Refuse a FIFO, a device or a socket by its type, before opening it (a FIFO would block the open)."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise ScriptError(f"cannot read {name!r}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else (
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket or other special file")
        raise ScriptError(f"{name!r} is not a regular file ({kind}), so it is not a {what}")


def check_module(name: str) -> None:
    """Fail early, as `python -m` would, on a module name that is not importable from here."""
    parts = name.split(".")
    if not name or not all(part.isidentifier() for part in parts):
        raise ScriptError(f"-m {name!r}: not a module name (expected dotted names like pkg.train)")
    from ..tracer.runner import module_origin

    # `python -m` looks in the current folder first; parent packages are found without importing them (their
    # __init__ is the program's code: it runs under the tracer)
    saved = list(sys.path)
    sys.path.insert(0, os.getcwd())
    try:
        module_origin(name)
    except ModuleNotFoundError as exc:
        raise ScriptError(f"-m {name}: {safe_str(exc)}") from None
    finally:
        sys.path[:] = saved


def syntax_message(exc: SyntaxError, name: str) -> str:
    where = f"{exc.filename or name}:{exc.lineno}" if exc.lineno else (exc.filename or name)
    return f"syntax error in {where}: {exc.msg}"


def load_trace(program: Program) -> Trace:
    """A saved trace, read without running anything; ScriptError naming what is wrong with the file."""
    from ..model import Trace

    try:
        # reads every version gradviz wrote, the {view, trace, findings} of older `render -o x.json` included, and
        # refuses a file over the size limit (GRADVIZ_MAX_TRACE_SIZE) before reading it
        return Trace.load(program.target)
    except ValueError as exc:
        raise ScriptError(safe_str(exc).splitlines()[0]) from None
    except (OSError, RecursionError, MemoryError) as exc:
        raise ScriptError(f"cannot read trace file {program.target!r}: {safe_str(exc)}") from None


def run_program(
    program: Program, *, on_hard_exit: HardExitHandler | None = None, on_start: StartHandler | None = None, **window: Any
) -> ProgramRun:
    """Trace `program` as `python script args...` / `python -m module args...` would run it, putting back what it
    may change in this process (stdout, stderr, working folder). ScriptError when it cannot be run at all.
    `on_start`: called with the live trace as tracing begins (a progress display).
    `window`: `steps` and `stop_after` (the step window), as `window_options.window_kwargs` gives them."""
    from ..tracer.runner import run_module, run_script

    stdout, stderr, cwd = sys.stdout, sys.stderr, os.getcwd()

    def restore() -> None:
        for stream in (sys.stdout, sys.stderr):  # what the program printed comes before what we print
            with contextlib.suppress(Exception):
                stream.flush()
        # undo what the program may have changed in this process, so our messages and files are where we said
        sys.stdout, sys.stderr = stdout, stderr
        with contextlib.suppress(OSError):
            os.chdir(cwd)

    handler = None
    if on_hard_exit is not None:
        front_end = on_hard_exit

        def handler(trace: Trace, code: int) -> int:
            restore()
            return front_end(trace, code)

    try:
        if program.kind == "module":
            run = run_module(program.target, program.args, on_hard_exit=handler, on_start=on_start, **window)
        else:
            run = run_script(
                Path(program.target).expanduser(), program.args, on_hard_exit=handler, on_start=on_start, **window
            )
    except ModuleNotFoundError as exc:
        raise ScriptError(f"-m {program.target}: {safe_str(exc)}") from None
    except FileNotFoundError as exc:  # it vanished since we looked
        raise ScriptError(safe_str(exc)) from None
    finally:
        restore()
    error = run.error
    if isinstance(error, SyntaxError) and _never_ran(error, run.trace):
        raise ScriptError(syntax_message(error, program.target))
    return run


def _never_ran(error: SyntaxError, trace: Trace) -> bool:
    """A SyntaxError raised while compiling the script itself, not one the script raised while running."""
    import traceback

    script = trace.script or ""
    ran = any(frame.f_code.co_filename == script for frame, _ in traceback.walk_tb(error.__traceback__))
    return not ran and os.path.abspath(error.filename or "") == os.path.abspath(script)


def exit_status(trace: Trace) -> int:
    """The status `python script.py` would have exited with."""
    return trace.exception.exit_code if trace.exception is not None else 0


def report_program_error(run: ProgramRun | None, trace: Trace) -> None:
    """Print the program's error as Python would at its end: its own sys.excepthook if it set one, else the
    traceback (or sys.exit's message) on stderr."""
    record = trace.exception
    if record is None:
        return
    if run is not None and run.excepthook is not None and run.error is not None:
        error, hook = run.error, run.excepthook
        run.error = run.excepthook = None  # the hook gets it once; then nothing keeps the frames
        try:
            hook(type(error), error, error.__traceback__)
            return
        except Exception as exc:  # noqa: BLE001 - Python reports a failing hook, then prints the original traceback
            print(f"Error in sys.excepthook:\n{type(exc).__name__}: {safe_str(exc)}\n\nOriginal exception was:", file=sys.stderr)
        finally:
            del error
    if record.traceback:
        with contextlib.suppress(Exception):
            sys.stderr.write(record.traceback)
            sys.stderr.flush()


class stdout_to_stderr:  # noqa: N801 - a context manager used like a function
    """Send the program's output to stderr, at the Python and the file-descriptor level, so stdout stays ours.
    `restore()` ends it early (the program called os._exit and we must print our document now). `documents()` is a
    stream to the real stdout meanwhile, and `end()` keeps the program's output on stderr to the end of the process
    where the program left something that may still print: a thread, an atexit handler."""

    def __enter__(self) -> stdout_to_stderr:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        self._threads = set(threading.enumerate())
        self._exit_handlers = _exit_handlers()
        self._saved_fd: int | None = None
        with contextlib.suppress(OSError, ValueError, AttributeError):
            # (sys.__stdout__ is None without a console: the AttributeError is suppressed)
            self._saved_fd = os.dup(sys.__stdout__.fileno())  # type: ignore[union-attr]
            os.dup2(sys.__stderr__.fileno(), sys.__stdout__.fileno())  # type: ignore[union-attr]
        self._redirect: contextlib.redirect_stdout[Any] | None = contextlib.redirect_stdout(sys.stderr)
        self._redirect.__enter__()
        return self

    def documents(self) -> TextIO | None:
        """A stream to the real stdout (None when it could not be kept): gradviz's document, while what the program
        prints still goes to stderr."""
        if self._saved_fd is None:
            return None
        original = sys.__stdout__
        try:
            return os.fdopen(
                os.dup(self._saved_fd), "w", encoding=getattr(original, "encoding", None) or "utf-8",
                errors=getattr(original, "errors", None) or "strict",
            )  # fmt: skip
        except OSError:
            return None

    def program_may_print(self) -> bool:
        """Whether the program left a thread running or registered an atexit handler since `__enter__`: either may
        print after its main code, after gradviz printed its document (unknown: yes)."""
        if any(thread not in self._threads and thread.is_alive() for thread in threading.enumerate()):
            return True
        now = _exit_handlers()
        return now is None or self._exit_handlers is None or now > self._exit_handlers

    def end(self) -> None:
        """Restore stdout unless the program may still print (`program_may_print`): then its output stays on
        stderr until the process ends, as its main code's did, and stdout holds the document alone."""
        if not self.program_may_print():
            self.restore()

    def restore(self) -> None:
        if self._redirect is None:
            return
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        self._redirect.__exit__(None, None, None)
        self._redirect = None
        if self._saved_fd is not None:
            with contextlib.suppress(OSError):
                os.dup2(self._saved_fd, sys.__stdout__.fileno())  # type: ignore[union-attr]  # (as above)
            os.close(self._saved_fd)
            self._saved_fd = None

    def __exit__(self, *exc_info: object) -> None:
        self.restore()


def _exit_handlers() -> int | None:
    """How many atexit handlers are registered (CPython's count; None where it cannot tell)."""
    count = getattr(atexit, "_ncallbacks", None)
    return count() if callable(count) else None
