"""The options of one `gradviz render`/`check` run or `%%gradviz` cell as one typed object, built once from argparse or
from the magic's line (no torch)."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .runner_options import DEFAULT_SUFFIX, OptionsError, parse_magic_line
from .window_options import window_kwargs

if TYPE_CHECKING:
    from .config import Config

__all__ = ["MAGIC", "Options"]

#: `Options.command` of a notebook cell.
MAGIC = "%%gradviz"


@dataclass(frozen=True)
class Options:
    """What was asked, whichever front end asked it; options a front end lacks keep their defaults (the cell magic
    has no SCRIPT, --format or --fail-on; `gradviz check` draws nothing)."""

    command: str  # "render", "check", or MAGIC
    # the program
    script: str | None = None
    module: str | None = None
    script_args: tuple[str, ...] = ()
    # the diagram: -o (each as given; render may repeat it) and what render() is asked for
    output: tuple[str, ...] = ()
    view: str = "graph"
    max_nodes: int | None = None
    depth: int | str | None = None
    collapse_modules: bool = False
    step: int | None = None
    show_all: bool = False
    show_saved: bool = True
    # the step window (--steps and --stop-after as typed: checked when the window is asked for) and --verify
    steps: str | None = None
    stop_after: str | None = None
    no_sentinel: bool = False
    default_steps: int | None = None
    verify: bool = False
    # accepting findings, failing, printing
    allow: tuple[str, ...] = ()
    show_suppressed: bool = False
    strict: bool = False
    fail_on: str | None = None
    default_fail_on: str = "never"
    format: str = "text"
    json: bool = False  # --json, or --format json
    quiet: bool = False
    color: str = "auto"
    progress: bool = False

    @classmethod
    def from_namespace(cls, parsed: argparse.Namespace) -> Options:
        """The options argparse parsed for `gradviz render` or `gradviz check` (`script_args`: what followed `--`)."""
        given = vars(parsed)
        fields = {field.name for field in dataclasses.fields(cls)}
        values = {name: value for name, value in given.items() if name in fields and value is not None}
        output = given.get("output")
        values["output"] = (output,) if isinstance(output, str) else tuple(output or ())
        values["script_args"] = tuple(given.get("script_args") or ())
        values["allow"] = tuple(given.get("allow") or ())
        values["json"] = bool(given.get("json")) or given.get("format") == "json"  # --json: short for --format json
        for name in ("script", "module", "max_nodes", "depth", "step", "steps", "stop_after", "default_steps", "fail_on"):
            values[name] = given.get(name)
        return cls(**values)

    @classmethod
    def from_magic_line(cls, line: str) -> Options:
        """The options of a `%%gradviz` line; OptionsError on bad input, as the command line would refuse it."""
        parsed = parse_magic_line(line)
        parsed.command = MAGIC
        return cls.from_namespace(parsed)

    def replace(self, **changes: Any) -> Options:
        return dataclasses.replace(self, **changes)

    def configured(self, config: Config) -> Options:
        """With `[tool.gradviz]` merged in: its `strict` where the command has --strict, its `steps` as the default
        window when --steps is not given."""
        changes: dict[str, Any] = {}
        if config.strict and self.command == "check":
            changes["strict"] = True
        if config.steps is not None and self.steps is None:
            changes["default_steps"] = None if config.steps == "all" else config.steps
        return self.replace(**changes)

    @property
    def machine(self) -> bool:
        """stdout holds only a document for a machine (JSON, SARIF, workflow commands): the script's output goes
        to stderr and no progress is shown."""
        return self.json or self.format in ("sarif", "github")

    def render_kwargs(self) -> dict[str, Any]:
        """The keyword arguments for `gradviz.render.render()`."""
        return {
            "view": self.view,
            "max_nodes": self.max_nodes,
            "collapse_modules": self.collapse_modules,
            "depth": self.depth,
            "show_saved": self.show_saved,
            "step": self.step,
            "show_all": self.show_all,
        }

    def window(self) -> dict[str, Any]:
        """`steps`, `stop_after` and `sentinel` for the tracer (WindowOptionsError on a bad value); {}: the whole run."""
        return window_kwargs(steps=self.steps, stop_after=self.stop_after, default=self.default_steps,
                             sentinel=not self.no_sentinel)

    def tracer_kwargs(self) -> dict[str, Any]:
        """The window, and `verify=True` for --verify: what the tracer's front doors are given."""
        return {**self.window(), **({"verify": True} if self.verify else {})}

    def fail_level(self) -> str:
        """--fail-on, or the command's default; --strict (check) is --fail-on warning. OptionsError when they
        disagree."""
        if self.strict and self.fail_on not in (None, "warning"):
            raise OptionsError(f"--strict and --fail-on {self.fail_on} disagree: give one of them")
        return "warning" if self.strict else (self.fail_on or self.default_fail_on)

    def output_paths(self, stem: str, *, rank: int | None = None) -> list[Path]:
        """Where to write (absolute): each -o as given, else `<stem>.gradviz.<suffix>` in the current folder. Under
        torchrun (`rank` given) every rank writes its own files: `{rank}` in -o is replaced by the rank number, and
        a name without it gets `.rank<N>` before its suffix (default: `<stem>.rank<N>.gradviz.svg`)."""
        names = list(self.output)
        if not names:
            suffix = DEFAULT_SUFFIX.get(self.view, ".svg")
            names = [f"{stem}.rank{{rank}}.gradviz{suffix}" if rank is not None else f"{stem}.gradviz{suffix}"]
        paths = []
        for name in names:
            if rank is not None:
                if "{rank}" in name:
                    name = name.replace("{rank}", str(rank))
                else:
                    path = Path(name)
                    name = str(path.with_name(f"{path.stem}.rank{rank}{path.suffix}"))
            paths.append(Path(name).expanduser().absolute())
        return paths
