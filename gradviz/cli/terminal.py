"""What the front ends print: progress on stderr, one-line messages, paths as the user typed them, output that
survives a closed stdout or an ASCII-only terminal (shared by cli.py and gallery.py)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..text import for_terminal, safe_str, type_name

if TYPE_CHECKING:
    from rich.console import Console

    from ..model import Trace, WindowRecord

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

#: The choices of --color: auto (colour on a terminal, none when NO_COLOR is set), always, never.
COLOR_CHOICES = ("auto", "always", "never")

#: Seconds between two progress lines of a long run (GRADVIZ_PROGRESS_INTERVAL changes it).
PROGRESS_INTERVAL = 5.0


def console_options(color: str = "auto") -> dict[str, Any]:
    """rich Console arguments for --color. `never`, or `auto` with NO_COLOR set (https://no-color.org: any
    non-empty value), means no escape sequence at all: no colour, and no bold or dim either."""
    if color not in COLOR_CHOICES:
        raise ValueError(f"--color must be one of {', '.join(COLOR_CHOICES)}, got {color!r}")
    if color == "never" or (color == "auto" and os.environ.get("NO_COLOR")):
        return {"color_system": None, "no_color": True}
    if color == "always":
        return {"force_terminal": True}
    return {}


def rank_prefix() -> str:
    """`[rank 1] ` under torchrun with more than one process (WORLD_SIZE > 1), else nothing."""
    from .ranks import current_rank

    rank = current_rank()
    return f"[rank {rank.rank}] " if rank is not None else ""


def error(message: str) -> None:
    """One line on stderr, `gradviz: ...`, never failing (a closed or ASCII-only stderr)."""
    write_line(sys.stderr, f"{rank_prefix()}gradviz: {message}")


def write_line(stream: TextIO | None, text: str) -> None:
    if stream is None:
        return
    with contextlib.suppress(Exception):
        stream.write(for_terminal(text) + "\n")
        stream.flush()


def internal_error(exc: BaseException) -> int:
    text = safe_str(exc)
    first = text.splitlines()[0] if text else ""
    error(f"internal error: {type_name(exc)}: {first}")
    if os.environ.get("GRADVIZ_DEBUG"):
        with contextlib.suppress(Exception):
            traceback.print_exception(exc, file=sys.stderr)
    else:
        error("this is a bug in gradviz: please report it with the command you ran (GRADVIZ_DEBUG=1 shows the traceback)")
    return EXIT_INTERNAL


def usable(stream: TextIO | None) -> bool:
    """False for a stream the program closed (`sys.stdout.close()`, `os.close(1)`): Python ends quietly then."""
    if stream is None or getattr(stream, "closed", False):
        return False
    try:
        descriptor = stream.fileno()
    except Exception:  # noqa: BLE001 - no descriptor (a StringIO, a stream the program made): still writable
        return True
    try:
        os.fstat(descriptor)
    except OSError:
        return False
    return True


def prepare_streams() -> None:
    """After the program ran: our own output escapes what the terminal's encoding cannot show (PYTHONIOENCODING=ascii
    and a non-ASCII path), and goes nowhere rather than failing when the program closed stdout."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if not usable(stream):
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - lives as long as we do
            continue
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", "strict") == "strict":
            with contextlib.suppress(Exception):
                reconfigure(errors="backslashreplace")


def can_encode(stream: TextIO, text: str) -> bool:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


class Progress:
    """What gradviz is doing, on stderr: only on a terminal (or with --progress) and without --quiet."""

    def __init__(self, *, quiet: bool, color: str = "auto", forced: bool = False) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False, **console_options(color))
        terminal = Console(stderr=True).is_terminal  # a real terminal (or FORCE_COLOR), whatever --color says
        self.enabled = forced or (not quiet and terminal)
        self.animated = self.enabled and terminal

    def watch(self, name: str, *, step: int | None = None) -> RunProgress | None:
        """A reporter of the run's progress (steps traced, elapsed time, the window's end), started by the runner
        with the live trace; None when progress is not shown and no `step` (--step K) is to be checked at the
        window's end."""
        return RunProgress(self, name, step=step) if self.enabled or step is not None else None

    def note(self, text: str, *, ongoing: bool = True) -> None:
        # a static line while the program runs: a live spinner would fight with the program's own output
        if self.enabled:
            line = f"{rank_prefix()}gradviz: {text}{'...' if ongoing else ''}"
            self.console.print(line, style="dim", markup=False, soft_wrap=True)

    @contextlib.contextmanager
    def spinner(self, text: str) -> Iterator[None]:
        if not self.animated:  # asked for with --progress where stderr is no terminal: plain lines
            if self.enabled:
                self.note(text)
            yield
            return
        from rich.live import Live
        from rich.spinner import Spinner

        with Live(
            Spinner("dots", text=f"gradviz: {text}..."),
            console=self.console,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
            refresh_per_second=12.5,
        ):
            yield


class RunProgress:
    """Lines on stderr while the program runs: steps traced and time elapsed every few seconds, and the moment the
    step window closes ("running untraced"). Whole lines, never a line rewritten in place: the program's own output
    shares the terminal, and gradviz must not redirect it. A daemon thread reads the trace as it grows (list
    lengths and new events only); it never touches torch or the program's objects."""

    def __init__(self, progress: Progress, name: str, *, step: int | None = None) -> None:
        self.progress = progress
        self.name = name
        self.step = step  # --step K: said at once when the window closes before backward call K
        self.started = time.monotonic()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._seen = 0
        self._steps = 0
        self._backwards = 0
        try:
            self.interval = float(os.environ.get("GRADVIZ_PROGRESS_INTERVAL") or PROGRESS_INTERVAL)
        except ValueError:
            self.interval = PROGRESS_INTERVAL

    def start(self, trace: Trace, window: WindowRecord | None) -> None:
        """Called by the runner as tracing begins."""
        self._thread = threading.Thread(target=self._loop, args=(trace, window), name="gradviz-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _count(self, trace: Trace) -> None:
        from ..model import EventKind

        events = trace.events
        end = len(events)
        for event in events[self._seen : end]:
            if event.kind is EventKind.OPTIMIZER_STEP:
                self._steps += 1
            elif event.kind is EventKind.BACKWARD:
                self._backwards += 1
        self._seen = end

    def _traced(self) -> str:
        if not self._steps and not self._backwards:
            return "no step"
        if self._steps:
            return _count_of(self._steps, "step")
        return _count_of(self._backwards, "backward call")

    def _loop(self, trace: Trace, window: WindowRecord | None) -> None:
        told_closed = False
        next_line = self.started + self.interval
        while not self._done.wait(0.2):
            with contextlib.suppress(Exception):  # a progress line is a courtesy: it never breaks the run
                now = time.monotonic()
                if window is not None and window.closed:
                    if not told_closed:
                        told_closed = True
                        self._count(trace)  # nothing is recorded after the window: these are all the steps drawn
                        if self.step is not None and self.step > self._backwards:
                            error(f"--step {self.step} is beyond the {_count_of(self._backwards, 'backward call')} "
                                  f"traced: the window closed ({_count_of(window.traced, 'step' if window.unit == 'step' else 'backward call')}). "
                                  "The program runs on; nothing can be drawn for that step (Ctrl-C ends it now)")
                        traced = _count_of(window.traced, "step" if window.unit == "step" else "backward call")
                        self.progress.note(f"{traced} traced in {_elapsed(now - self.started)}; running untraced "
                                           "from here (the rest of the run is counted, not recorded)", ongoing=False)
                        next_line = now + self.interval
                    elif now >= next_line and self.progress.enabled:
                        self.progress.note(f"running untraced, {_elapsed(now - self.started)} elapsed", ongoing=False)
                        next_line = now + self.interval
                    continue
                self._count(trace)
                if now >= next_line and self.progress.enabled:
                    self.progress.note(f"{self._traced()} traced, {_elapsed(now - self.started)} elapsed", ongoing=False)
                    next_line = now + self.interval


def _count_of(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def stdout_console(file: TextIO | None = None, *, color: str = "auto") -> Console:
    from rich.console import Console

    return Console(file=file, highlight=False, soft_wrap=True, **console_options(color))


def shown(path: str | os.PathLike[str]) -> str:
    """A path relative to the current folder when it is inside it, else absolute; undecodable bytes and control
    characters escaped (for_terminal)."""
    path = Path(path)
    with contextlib.suppress(ValueError, OSError):
        return for_terminal(str(path.absolute().relative_to(Path.cwd())))
    return for_terminal(str(path))
