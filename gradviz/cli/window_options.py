"""The step-window options shared by `gradviz render`, `gradviz check` and `%%gradviz`: --steps, --stop-after,
--no-sentinel."""

from __future__ import annotations

import argparse
from typing import Any

#: What `gradviz check` traces when --steps is not given: the first 100 optimizer steps (or backward calls).
#: Mistakes with detach, .data and in-place writes show in the first steps of a training loop and repeat every
#: step; tracing a 6,000-step run in full costs minutes and memory for no new finding.
DEFAULT_CHECK_STEPS = 100


class WindowOptionsError(ValueError):
    """A bad --steps or --stop-after value (the front ends turn it into one line and exit status 2)."""


def add_window_options(parser: argparse.ArgumentParser, *, default: int | None = None) -> None:
    """Add --steps N and --stop-after N; `default` is the window when --steps is not given (None: whole run)."""
    whole = "the whole run" if default is None else f"{default}; `all` traces the whole run"
    parser.add_argument(
        "--steps",
        metavar="N",
        default=None,
        help="trace only the first N optimizer steps (N backward() calls where no optimizer steps), then stop "
        f"recording and let the program run on at full speed; findings and diagrams cover those steps (default: {whole})",
    )
    parser.add_argument(
        "--stop-after",
        metavar="N",
        default=None,
        help="like --steps N, then end the program there: a quick check (exit status as if it had ended normally)",
    )
    parser.add_argument(
        "--no-sentinel",
        dest="no_sentinel",
        action="store_true",
        help="after the window, stop recording for good; by default gradviz keeps watching at the cost of a "
        "pass-through mode and traces again, whole, any later step that runs code the window never saw "
        "(a validation pass, unfreezing layers)",
    )
    parser.set_defaults(default_steps=default)


def window_kwargs(
    *, steps: str | None, stop_after: str | None, default: int | None = None, sentinel: bool = True
) -> dict[str, Any]:
    """`steps` and `stop_after` for `trace_script` / `trace`, from --steps and --stop-after as typed (`default`: the
    window when --steps is not given; `sentinel` False: --no-sentinel); WindowOptionsError on a bad value."""
    counted = _count(steps, "--steps", allow_all=True) if steps is not None else None
    stop = _count(stop_after, "--stop-after", allow_all=False) if stop_after is not None else None
    if stop is not None:
        if steps is not None and counted != stop:
            raise WindowOptionsError(f"--steps {steps} and --stop-after {stop} disagree: give one of them")
        return {"steps": stop, "stop_after": True}
    if steps is None:
        counted = default
    if counted is None:
        return {}
    return {"steps": counted, "stop_after": False, **({} if sentinel else {"sentinel": False})}


def _count(text: Any, option: str, *, allow_all: bool) -> int | None:
    if allow_all and str(text).strip().lower() == "all":
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        valid = "a whole number of steps, or `all`" if allow_all else "a whole number of steps"
        raise WindowOptionsError(f"{option} expects {valid}, got {text!r}") from None
    if value < 1:
        raise WindowOptionsError(f"{option} must be at least 1 step, got {value}")
    return value
