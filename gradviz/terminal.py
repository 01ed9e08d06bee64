"""What the front ends print: progress on stderr, one-line messages, paths as the user typed them, output that
survives a closed stdout or an ASCII-only terminal (shared by cli.py and gallery.py)."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .text import for_terminal, safe_str, type_name

if TYPE_CHECKING:
    from rich.console import Console

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


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
    except Exception:  # no descriptor (a StringIO): still writable
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
    """What gradviz is doing, on stderr: only on a terminal and without --quiet."""

    def __init__(self, *, quiet: bool) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)
        self.enabled = not quiet and self.console.is_terminal

    def note(self, text: str) -> None:
        # a static line while the program runs: a live spinner would fight with the program's own output
        if self.enabled:
            self.console.print(f"{rank_prefix()}gradviz: {text}...", style="dim", markup=False, soft_wrap=True)

    @contextlib.contextmanager
    def spinner(self, text: str) -> Iterator[None]:
        if not self.enabled:
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


def stdout_console(file: TextIO | None = None) -> Console:
    from rich.console import Console

    return Console(file=file, highlight=False, soft_wrap=True)


def shown(path: str | os.PathLike[str]) -> str:
    """A path relative to the current folder when it is inside it, else absolute; undecodable bytes and control
    characters escaped (for_terminal)."""
    path = Path(path)
    with contextlib.suppress(ValueError, OSError):
        return for_terminal(str(path.absolute().relative_to(Path.cwd())))
    return for_terminal(str(path))
