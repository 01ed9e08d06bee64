"""The options shared by `gradviz render`, `gradviz check` and the `%%gradviz` cell magic (no torch)."""

from __future__ import annotations

import argparse
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

    def error(self, message: str) -> Any:
        raise OptionsError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        # `--help` inside a magic line: show it and stop, without killing the kernel
        raise OptionsError((message or self.format_help()).rstrip())


def module_depth(text: str) -> int | str:
    """argparse type for --depth: `all`, or a whole number of at least 0."""
    if text.strip().lower() == "all":
        return "all"
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or 'all', got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more (0: one box per model), got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type for --max-nodes: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_render_options(parser: argparse.ArgumentParser, *, output: bool = True, many_outputs: bool = False) -> None:
    """Add the options that shape a diagram: -o, --view, --max-nodes, --collapse-modules, --show-saved.
    With `many_outputs`, -o may be given several times (options.output is then a list)."""
    from ..render import VIEWS

    if output:
        _add_output_option(parser, many_outputs=many_outputs)
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
        "--depth",
        type=module_depth,
        metavar="N",
        help="graph view: draw nn.Module calls as boxes at depth N of the module tree (0: one box per model, "
        "1: its children, ...; `all`: every op). Default: the deepest depth that fits about 80 boxes",
    )
    parser.add_argument(
        "--collapse-modules",
        action="store_true",
        help="the same as --depth 1: one box per child of each model",
    )
    parser.add_argument(
        "--step",
        type=positive_int,
        metavar="K",
        help="graph view: draw the graph of the K-th backward call as it was (default: every step, steps that "
        "built the same graph drawn once with their count)",
    )
    parser.add_argument(
        "--show-all",
        action="store_true",
        help="memory view: draw every tensor, the data pipeline's too (default: the model's parameters, gradients "
        "and saved activations, and every tensor a finding involves)",
    )
    parser.add_argument(
        "--show-saved",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="draw the tensors each autograd node saved for backward, with their versions (default: on)",
    )


def _add_output_option(parser: argparse.ArgumentParser, *, many_outputs: bool) -> None:
    """-o: the file to write (with `many_outputs`, one of several)."""
    from ..render.diagram import SAVE_FORMATS

    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        action="append" if many_outputs else "store",
        help="file to write; the format follows its suffix (" + " ".join(SAVE_FORMATS) + ")"
        + ("; repeat -o to write several from one run (.json: the trace, for `gradviz render|check FILE.json`)"
           if many_outputs else "")
        + ". Default: <script stem>.gradviz.svg in the current folder (.html for --view report)"
        + ("; under torchrun {rank} is replaced by the rank, else .rank<N> goes before the suffix" if many_outputs else ""),
    )


def add_verify_option(parser: argparse.ArgumentParser) -> None:
    """--verify: measure how wrong the gradients of a silently corrupted saved tensor are, in the same run."""
    parser.add_argument(
        "--verify",
        action="store_true",
        help="where a saved tensor's bytes change without autograd noticing (a write through `.data`), keep the bytes "
        "it overwrites and, at that graph's backward, compute the gradients the intact values give: the finding says "
        "how wrong each gradient is (max abs and relative error, cosine, direction flipped), or that they are "
        "identical (then it is only info). Costs a second backward where such a write happened",
    )


def check_suffix(path: Path, *, shown: str | None = None) -> str:
    """The output format of `path`; raises OptionsError naming the valid suffixes for any other."""
    from ..render.diagram import SAVE_FORMATS

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
        allow_abbrev=False,  # `--col` is not silently `--collapse-modules`
        description="Trace the cell and display what autograd and memory did below it.",
        epilog="Examples: %%gradviz --view memory --max-nodes 50;  %%gradviz --steps 5 (trace the first 5 steps only);  "
        "%%gradviz --verify (measure how wrong silently corrupted gradients are)",
    )
    add_render_options(parser)
    from .window_options import add_window_options

    add_window_options(parser)
    add_verify_option(parser)
    return parser


def parse_magic_line(line: str) -> argparse.Namespace:
    """Parse the arguments after `%%gradviz`; raises OptionsError on bad input."""
    try:
        words: Sequence[str] = shlex.split(line)
    except ValueError as exc:
        raise OptionsError(f"%%gradviz: cannot parse {line!r}: {exc}") from None
    return magic_parser().parse_args(list(words))
