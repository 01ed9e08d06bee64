"""The `gradviz` command: `render` draws what a script did, `check` reports what went wrong."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..text import safe_str
from ..version import __version__
from .config import ConfigError, add_config_options
from .errors import UsageError
from .formats import FORMATS
from .options import Options
from .run import ScriptError
from .runner_options import OptionsError, add_render_options, add_verify_option
from .terminal import (
    COLOR_CHOICES,
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    error as _error,
    internal_error as _internal_error,
)
from .window_options import DEFAULT_CHECK_STEPS, WindowOptionsError, add_window_options

__all__ = ["COMMANDS", "EXIT_FINDINGS", "EXIT_INTERNAL", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]


#: The choices of --fail-on: the least severe finding that makes the exit status 1.
FAIL_ON = ("error", "warning", "never")


class _Parser(argparse.ArgumentParser):
    """argparse without silent abbreviations (`--col` is not `--collapse-modules`); `children` are the
    subcommands' parsers, so a misspelt option is reported with its subcommand's usage."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.children: dict[str, argparse.ArgumentParser] = {}


# ---------------------------------------------------------------------------------------------- commands
@dataclass(frozen=True)
class Command:
    """One subcommand: how to add its arguments and how to run it (returns the exit status)."""

    help: str
    description: str
    epilog: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _add_script(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "script",
        nargs="?",
        metavar="SCRIPT|TRACE.json",
        help="the Python script to run, as `python SCRIPT ARGS...` would; or a trace saved with -o FILE.json, "
        "read without running anything",
    )
    parser.add_argument(
        "-m",
        dest="module",
        metavar="MODULE",
        help="run a module as `python -m MODULE ARGS...` would (sys.argv[0], __main__, __spec__, relative imports)",
    )
    parser.add_argument(
        "--quiet", "-q", action="store_true",
        help="no progress display and no informational lines (files written, the tally); findings and errors still print",
    )
    parser.add_argument(
        "--color", choices=COLOR_CHOICES, default="auto",
        help="colour in the findings and messages: auto (default: on a terminal, unless NO_COLOR is set), always, never",
    )
    parser.add_argument(
        "--progress", action="store_true",
        help="show progress on stderr (steps traced, time elapsed) even when stderr is not a terminal",
    )


def _add_fail_on(parser: argparse.ArgumentParser, *, default: str, strict: bool = False) -> None:
    parser.add_argument(
        "--fail-on", choices=FAIL_ON, default=None,
        help=f"exit 1 when a finding is at least this severe (default: {default}); never: the exit status is the "
        "script's own (0 for a saved trace)" + ("; --strict is --fail-on warning" if strict else ""),
    )
    parser.set_defaults(default_fail_on=default)


def _add_render_arguments(parser: argparse.ArgumentParser) -> None:
    _add_script(parser)
    add_render_options(parser, many_outputs=True)
    add_window_options(parser)
    add_verify_option(parser)
    add_config_options(parser)
    _add_fail_on(parser, default="never")


def _add_check_arguments(parser: argparse.ArgumentParser) -> None:
    _add_script(parser)
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default); json: one JSON document; sarif: a SARIF 2.1.0 log for code scanning; github: workflow "
        "commands that annotate a pull request. Except for text, stdout holds only that output and the script's own "
        "output goes to stderr",
    )
    parser.add_argument("--json", action="store_true", help="short for --format json")
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too, not only on errors")
    _add_fail_on(parser, default="error", strict=True)
    add_window_options(parser, default=DEFAULT_CHECK_STEPS)
    add_verify_option(parser)
    add_config_options(parser)


_RENDER_EPILOG = """\
examples:
  gradviz render train.py                      writes train.gradviz.svg here
  gradviz render train.py -o graph.png         the format follows the suffix: .svg .png .pdf .dot .json .html
  gradviz render train.py --view memory        storages, aliases and version counters
  gradviz render train.py --view report        an HTML page with every view and the findings (train.gradviz.html)
  gradviz render train.py --view graph-memory -o mem.png   bytes held by live autograd graphs, step by step
  gradviz render train.py --max-nodes 200      summarise beyond 200 nodes, for big graphs
  gradviz render train.py --depth 1            one box per child module of each model (--depth all: every op)
  gradviz render train.py --no-show-saved      hide saved tensors
  gradviz render train.py --steps 3            trace the first 3 optimizer steps, run the rest untraced
  gradviz render train.py --stop-after 3       trace 3 steps, then end the script there
  gradviz render train.py --verify             measure how wrong silently corrupted gradients are (shown in the note)
  gradviz render train.py -q -- --epochs 1     arguments after -- go to the script
  gradviz render train.py -o a.svg -o b.html -o run.json   several outputs from one run (.json: the trace)
  gradviz render run.json --view memory        draw a saved trace again, without running anything
  gradviz render train.py --fail-on error      exit 1 when there is an error finding (default: never)
  gradviz render -m pkg.train -- --epochs 1    run a module as `python -m pkg.train --epochs 1` would
  torchrun --nproc_per_node=2 -m gradviz render train.py
                                               every rank writes train.rank<N>.gradviz.svg; rank 0 prints
                                               a summary of all ranks ({rank} in -o places the number)

The script runs as `python train.py --epochs 1` would. If it raises, the diagram is still written
(showing the state at the failure) and the script's error is printed; the exit status is then 1
(a SystemExit keeps the script's code). A saved trace's recorded error is described in one line and
not raised again (exit status 0). --fail-on error|warning: exit 1 on such a finding too.
Exit status 2: the script cannot be run or an option is wrong.
"""

_CHECK_EPILOG = """\
examples:
  gradviz check train.py                       findings with severity, file:line, source line, message, fix
  gradviz check train.py --json > found.json   one JSON document: {"gradviz", "script", "exception", "findings"}
  gradviz check train.py --format sarif        a SARIF 2.1.0 log on stdout, for code scanning (GitHub, GitLab...)
  gradviz check train.py --format github       GitHub workflow commands: annotations on the pull request
  gradviz check train.py --strict              fail on warnings (dead parameters...) too
  gradviz check train.py --steps 10            trace the first 10 optimizer steps, run the rest at full speed
  gradviz check train.py --stop-after 10       a quick check: end the script after 10 steps
  gradviz check train.py --steps all           trace the whole run (default: the first 100 steps)
  gradviz check train.py --verify              measure how wrong silently corrupted gradients are
  gradviz check train.py -- --epochs 1         arguments after -- go to the script
  gradviz check -m pkg.train -- --epochs 1     run a module as `python -m pkg.train` would
  gradviz check run.json                       check a trace saved with `gradviz render ... -o run.json`
  torchrun --nproc_per_node=2 -m gradviz check train.py --json
                                               rank 0 prints one document with every rank's findings

If the script ends with os._exit(), the findings are still printed before the process ends.

The step window: after N optimizer steps (N backward() calls where no optimizer steps) gradviz stops
recording and takes its hooks off; the script runs on unchanged and its later steps are only counted
("steps 1-100 of 6,000 traced"). With --stop-after the script ends there, with exit status 0.
exit status: 0 no error finding and the script ran clean; 1 an error finding (--strict, --fail-on warning:
or a warning) or the script raised; 2 the script cannot be run (missing, not Python, syntax error, bad options).
A saved trace's recorded error is described in one line, not raised again: only the findings set the status.
"""

#: The subcommands, in the order `gradviz --help` lists them. Another front end adds itself with one entry.
COMMANDS: dict[str, Command] = {
    "render": Command(
        help="run a script under the tracer and draw what autograd and memory did",
        description="Run SCRIPT (or -m MODULE) under the tracer, or read a saved TRACE.json, and write an annotated "
        "diagram of its autograd graph and memory.",
        epilog=_RENDER_EPILOG,
        add_arguments=_add_render_arguments,
        run=lambda parsed: _run_command(parsed),
    ),
    "check": Command(
        help="run a script under the tracer and report cut edges, dead parameters and corrupted saved tensors",
        description="Run SCRIPT (or -m MODULE) under the tracer, or read a saved TRACE.json, and print what went wrong "
        "(or will) with its gradients.",
        epilog=_CHECK_EPILOG,
        add_arguments=_add_check_arguments,
        run=lambda parsed: _run_command(parsed),
    ),
    "gallery": Command(
        help="build the example gallery: trace every plot_*.py, check its declared findings, draw it",
        description="Trace every SRC/plot_*.py, check the findings and exception its docstring declares, and write "
        "SVG/PNG diagrams, a page per example, OUT/index.html and SRC/README.md.",
        epilog="examples:\n  gradviz gallery\n  gradviz gallery gallery -o gallery/_build --force\n",
        add_arguments=lambda parser: _gallery().add_arguments(parser),
        run=lambda options: _gallery().run(options),
    ),
}


def _run_command(parsed: argparse.Namespace) -> int:
    """render and check: one typed options object, one pipeline (loaded only for them: it pulls in the analysis)."""
    from .pipeline import run_command

    return run_command(Options.from_namespace(parsed))


def _gallery() -> Any:
    from ..integrations import gallery  # the builder pulls in rendering: load it only for this command

    return gallery


def build_parser(prog: str = "gradviz") -> _Parser:
    parser = _Parser(
        prog=prog,
        description="See what autograd and memory are really doing in a PyTorch program: "
        ".data vs .detach(), version counters, saved tensors, cut gradient paths.",
        epilog="examples:\n  gradviz render train.py -o graph.svg\n  gradviz check train.py --json\n\n"
        "Run `gradviz COMMAND --help` for a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gradviz {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        child = sub.add_parser(
            name,
            help=command.help,
            description=command.description,
            epilog=command.epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            usage="%(prog)s (SCRIPT | -m MODULE | TRACE.json) [options] [-- ARGS...]" if name in ("render", "check") else None,
            allow_abbrev=False,
        )
        command.add_arguments(child)
        parser.children[name] = child
    return parser


def _parse(parser: _Parser, argv: list[str]) -> argparse.Namespace:
    """Parse the command line; an unknown option is reported with its subcommand's usage and the closest options."""
    first = argv[0] if argv and not argv[0].startswith("-") else None
    if first is not None and first not in parser.children:
        close = difflib.get_close_matches(first, list(parser.children), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        parser.error(f"argument COMMAND: invalid choice: {first!r} (choose from {', '.join(map(repr, parser.children))}){hint}")
    options, extras = parser.parse_known_args(argv)
    if extras:
        child = parser.children.get(getattr(options, "command", None) or "", parser)
        child.error(_unknown_arguments(child, extras))
    return options


def _unknown_arguments(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """`unrecognized argument: --colapse-modules (did you mean --collapse-modules?)`, or where script arguments go."""
    known = [o for action in parser._actions for o in action.option_strings]
    parts = []
    for word in extras:
        if word.startswith("-") and len(word) > 1:
            name = word.split("=", 1)[0]
            candidates = [o for o in known if o.startswith(name) and o.startswith("--") and len(name) > 2]
            candidates += [o for o in difflib.get_close_matches(name, known, n=3, cutoff=0.6) if o not in candidates]
            hint = f" (did you mean {' or '.join(candidates[:3])}?)" if candidates else ""
            parts.append(f"{word}{hint}")
        else:
            parts.append(f"{word} (arguments for the script go after `--`: gradviz COMMAND SCRIPT -- ARGS...)")
    return f"unrecognized argument{'s' if len(parts) > 1 else ''}: " + "; ".join(parts)


def main(argv: list[str] | None = None, *, prog: str = "gradviz") -> int:
    """Entry point of `gradviz` and `python -m gradviz`; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # everything after the first `--` belongs to the script, whatever it looks like
    script_args: list[str] = []
    if "--" in argv[1:]:
        cut = argv.index("--", 1)
        argv, script_args = argv[:cut], argv[cut + 1 :]
    options = _parse(build_parser(prog), argv)
    options.script_args = script_args
    try:
        return COMMANDS[options.command].run(options)
    except (UsageError, OptionsError, ScriptError, WindowOptionsError, ConfigError) as exc:
        _error(safe_str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug in gradviz: one line, not a traceback
        return _internal_error(exc)
