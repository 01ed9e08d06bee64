"""Options shared by `gradviz render`, `gradviz check` and the `%%gradviz` cell magic (argparse only, no torch)."""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: The suffix of the default output file where it is not .svg: the report is a page, not a picture.
DEFAULT_SUFFIX: dict[str, str] = {"report": ".html"}


class OptionsError(ValueError):
    """Bad options: raised instead of exiting, so the notebook magic can report it in the cell."""


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
