"""The runner and the options shared by `gradviz render`, `gradviz check` and the `%%gradviz` cell magic (no torch)."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import tokenize
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .model import Trace

#: The suffix of the default output file where it is not .svg: the report is a page, not a picture.
DEFAULT_SUFFIX: dict[str, str] = {"report": ".html"}


class OptionsError(ValueError):
    """Bad options: raised instead of exiting, so the notebook magic can report it in the cell."""


class ScriptError(ValueError):
    """The script cannot be run: missing, not Python, or it does not compile."""


class OptionParser(argparse.ArgumentParser):
    """An ArgumentParser that raises OptionsError instead of printing usage and exiting (for the cell magic)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise OptionsError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:  # type: ignore[override]
        # `--help` inside a magic line: show it and stop, without killing the kernel
        raise OptionsError((message or self.format_help()).rstrip())


def positive_int(text: str) -> int:
    """argparse type for --max-nodes: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_render_options(parser: argparse.ArgumentParser, *, output: bool = True) -> None:
    """Add the options that shape a diagram: -o, --view, --max-nodes, --collapse-modules, --show-saved."""
    from .render import VIEWS
    from .render.diagram import SAVE_FORMATS

    if output:
        parser.add_argument(
            "-o",
            "--output",
            metavar="OUT",
            help="file to write; the format follows its suffix (" + " ".join(SAVE_FORMATS) + "). "
            "Default: <script stem>.gradviz.svg in the current folder (.html for --view report)",
        )
    parser.add_argument(
        "--view",
        choices=list(VIEWS),
        default="graph",
        help="what to draw (default: graph): " + "; ".join(f"{name} = {what}" for name, what in VIEWS.items()),
    )
    parser.add_argument(
        "--max-nodes",
        type=positive_int,
        metavar="N",
        help="draw at most N autograd nodes, summarising the rest (keeps layout of big graphs fast)",
    )
    parser.add_argument(
        "--collapse-modules",
        action="store_true",
        help="draw each nn.Module call as one box instead of its individual operations",
    )
    parser.add_argument(
        "--show-saved",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="draw the tensors each autograd node saved for backward, with their versions (default: on)",
    )


def render_kwargs(options: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments for `gradviz.render.render()` that the parsed options ask for."""
    return {
        "view": options.view,
        "max_nodes": options.max_nodes,
        "collapse_modules": options.collapse_modules,
        "show_saved": options.show_saved,
    }


def output_path(options: argparse.Namespace, script: str | Path) -> Path:
    """Where to write: -o as given, else `<script stem>.gradviz.<suffix>` in the current folder (absolute)."""
    if options.output:
        return Path(options.output).expanduser().absolute()
    suffix = DEFAULT_SUFFIX.get(options.view, ".svg")
    return (Path.cwd() / f"{Path(script).stem}.gradviz{suffix}").absolute()


def check_suffix(path: Path, *, shown: str | None = None) -> str:
    """The output format of `path`; raises OptionsError naming the valid suffixes for any other."""
    from .render.diagram import SAVE_FORMATS

    suffix = path.suffix.lower()
    if suffix not in SAVE_FORMATS:
        suffix_text = repr(path.suffix) if path.suffix else "no suffix"
        raise OptionsError(
            f"cannot tell the output format of {shown or str(path)!r} ({suffix_text}): use one of " + ", ".join(SAVE_FORMATS)
        )
    return suffix


def magic_parser() -> OptionParser:
    """The parser for the `%%gradviz` line: the render options, with errors raised instead of exiting."""
    parser = OptionParser(
        prog="%%gradviz",
        description="Trace the cell and display what autograd and memory did below it.",
        epilog="Example: %%gradviz --view memory --max-nodes 50",
    )
    add_render_options(parser)
    return parser


def parse_magic_line(line: str) -> argparse.Namespace:
    """Parse the arguments after `%%gradviz`; raises OptionsError on bad input."""
    try:
        words: Sequence[str] = shlex.split(line)
    except ValueError as exc:
        raise OptionsError(f"%%gradviz: cannot parse {line!r}: {exc}") from None
    return magic_parser().parse_args(list(words))


# ---------------------------------------------------------------------------------------------- tracebacks
_GRADVIZ_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def script_frames(frames: Sequence[tuple[str, str]]) -> list[bool]:
    """Which frames (filename, function name) of a traced program's traceback Python alone would show:
    not gradviz's own, not runpy's, and not torch's detour through the tracer's TorchFunctionMode."""
    keep = [not _added_by_gradviz(filename) for filename, _ in frames]
    for i, (filename, name) in enumerate(frames):
        # torch calls handle_torch_function, which enters our mode, which calls the same torch function
        # again: Python alone shows only that second call
        if name == "handle_torch_function" and os.path.basename(filename) == "overrides.py":
            if i + 1 < len(frames) and _added_by_gradviz(frames[i + 1][0]):
                keep[i] = False
                if i > 0 and keep[i - 1] and f"{os.sep}torch{os.sep}" in frames[i - 1][0]:
                    keep[i - 1] = False
    return keep


def _added_by_gradviz(filename: str) -> bool:
    return filename.startswith(_GRADVIZ_DIR) or filename == "<frozen runpy>" or os.path.basename(filename) == "runpy.py"


# ---------------------------------------------------------------------------------------------- the script
def check_script(name: str) -> Path:
    """The script as a path, after making sure it exists and is Python that compiles; ScriptError otherwise."""
    path = Path(name).expanduser()
    if not path.exists():
        raise ScriptError(f"no such script: {name!r}")
    if path.is_dir():
        raise ScriptError(f"{name!r} is a folder, not a Python script")
    if path.suffix.lower() not in (".py", ".pyw", ""):
        raise ScriptError(f"{name!r} is not a Python file (expected a .py script)")
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
    return path


def syntax_message(exc: SyntaxError, name: str) -> str:
    where = f"{exc.filename or name}:{exc.lineno}" if exc.lineno else (exc.filename or name)
    return f"syntax error in {where}: {exc.msg}"


def run_script(script: Path, argv: list[str]) -> Trace:
    """Trace `script` as `python script argv...` would run it, putting back what the script may change in this
    process (stdout, stderr, working folder). ScriptError when it cannot be run at all."""
    from .tracer import trace_script

    stdout, stderr, cwd = sys.stdout, sys.stderr, os.getcwd()
    try:
        trace = trace_script(script, argv)
    except FileNotFoundError as exc:  # it vanished since we looked
        raise ScriptError(str(exc)) from None
    finally:
        for stream in (sys.stdout, sys.stderr):  # what the script printed comes before what we print
            with contextlib.suppress(Exception):
                stream.flush()
        # undo what the script may have changed in this process, so our messages and files are where we said
        sys.stdout, sys.stderr = stdout, stderr
        with contextlib.suppress(OSError):
            os.chdir(cwd)
    error = trace.error
    if isinstance(error, SyntaxError) and never_ran(error, trace):
        raise ScriptError(syntax_message(error, str(script)))
    return trace


def never_ran(error: SyntaxError, trace: Trace) -> bool:
    """A SyntaxError raised while compiling the script itself, not one the script raised while running."""
    script = trace.script or ""
    ran = any(frame.f_code.co_filename == script for frame, _ in traceback.walk_tb(error.__traceback__))
    return not ran and os.path.abspath(error.filename or "") == os.path.abspath(script)


def exit_code(error: BaseException | None) -> int:
    """The status `python script.py` would exit with."""
    if error is None:
        return 0
    if isinstance(error, SystemExit):
        code = error.code
        if code is None:
            return 0
        return code if isinstance(code, int) else 1
    if isinstance(error, KeyboardInterrupt):
        return 130
    return 1


def format_script_error(error: BaseException) -> str:
    """The script's traceback as Python prints it, without the frames gradviz added (its own, runpy's, and
    torch's detour through the tracer's TorchFunctionMode)."""
    te = traceback.TracebackException(type(error), error, error.__traceback__)
    seen: set[int] = set()
    stack = [te]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        frames = list(current.stack)
        keep = script_frames([(f.filename, f.name) for f in frames])
        current.stack = traceback.StackSummary.from_list([f for f, kept in zip(frames, keep) if kept])
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return "".join(te.format())


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send the script's output to stderr, at the Python and the file-descriptor level, so stdout stays ours."""
    sys.stdout.flush()
    saved_fd = None
    with contextlib.suppress(OSError, ValueError, AttributeError):
        saved_fd = os.dup(sys.__stdout__.fileno())  # type: ignore[union-attr]
        os.dup2(sys.__stderr__.fileno(), sys.__stdout__.fileno())  # type: ignore[union-attr]
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        if saved_fd is not None:
            os.dup2(saved_fd, sys.__stdout__.fileno())  # type: ignore[union-attr]
            os.close(saved_fd)
