"""The typed options object: the command line and the `%%gradviz` line build the same one for the same flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradviz.cli.command import build_parser
from gradviz.cli.config import Config
from gradviz.cli.options import MAGIC, Options
from gradviz.cli.runner_options import OptionsError
from gradviz.cli.window_options import WindowOptionsError

FLAGS = [
    [],
    ["--view", "memory", "--show-all", "--no-show-saved"],
    ["--view", "timeline", "--max-nodes", "40", "--collapse-modules"],
    ["--depth", "all", "--step", "2"],
    ["--depth", "2", "-o", "cell.png"],
    ["--steps", "5", "--no-sentinel", "--verify"],
    ["--stop-after", "3"],
]


def _from_command_line(*argv: str) -> Options:
    return Options.from_namespace(build_parser().parse_args(list(argv)))


@pytest.mark.parametrize("flags", FLAGS, ids=lambda flags: " ".join(flags) or "no flags")
def test_command_line_and_cell_magic_give_the_same_options(flags: list[str]) -> None:
    from_cli = _from_command_line("render", "train.py", *flags)
    from_magic = Options.from_magic_line(" ".join(flags))
    assert from_magic.command == MAGIC and from_cli.command == "render"
    # only what the magic has no flag for differs: the command and its script
    assert from_cli.replace(command=MAGIC, script=None) == from_magic
    assert from_cli.render_kwargs() == from_magic.render_kwargs()
    assert from_cli.tracer_kwargs() == from_magic.tracer_kwargs()


def test_the_options_are_typed_values_not_argparse_shapes() -> None:
    options = _from_command_line("render", "t.py", "-o", "a.svg", "-o", "b.html", "--allow", "cut_edge", "--depth", "3")
    assert options.output == ("a.svg", "b.html") and options.allow == ("cut_edge",) and options.depth == 3
    assert Options.from_magic_line("-o one.svg").output == ("one.svg",)  # the magic's single -o, as a tuple too
    parsed = build_parser().parse_args(["check", "t.py", "--json"])
    parsed.script_args = ["--epochs", "1"]
    check = Options.from_namespace(parsed)
    assert (check.json, check.format, check.machine, check.script_args) == (True, "text", True, ("--epochs", "1"))
    assert _from_command_line("check", "t.py", "--format", "json").json is True
    assert _from_command_line("check", "t.py", "--format", "github").machine is True
    assert _from_command_line("render", "t.py").machine is False


def test_window_defaults_per_command_and_config() -> None:
    assert _from_command_line("check", "t.py").window() == {"steps": 100, "stop_after": False}
    assert _from_command_line("render", "t.py").window() == {}
    assert _from_command_line("check", "t.py", "--steps", "7", "--verify").tracer_kwargs() == {
        "steps": 7, "stop_after": False, "verify": True,
    }
    configured = _from_command_line("check", "t.py").configured(Config(steps="all", strict=True))
    assert configured.window() == {} and configured.strict is True
    assert _from_command_line("check", "t.py", "--steps", "3").configured(Config(steps=9)).window()["steps"] == 3
    # render has no --strict: the table's strict does not apply to it
    assert _from_command_line("render", "t.py").configured(Config(strict=True)).strict is False
    with pytest.raises(WindowOptionsError, match="--stop-after must be at least 1 step, got 0"):
        Options.from_magic_line("--stop-after 0").window()


def test_fail_level() -> None:
    assert _from_command_line("render", "t.py").fail_level() == "never"
    assert _from_command_line("check", "t.py").fail_level() == "error"
    assert _from_command_line("check", "t.py", "--strict").fail_level() == "warning"
    assert _from_command_line("render", "t.py", "--fail-on", "warning").fail_level() == "warning"
    with pytest.raises(OptionsError, match="--strict and --fail-on never disagree: give one of them"):
        _from_command_line("check", "t.py", "--strict", "--fail-on", "never").fail_level()


def test_output_paths_follow_the_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert _from_command_line("render", "t.py", "--view", "report").output_paths("t") == [tmp_path / "t.gradviz.html"]
    assert Options.from_magic_line("-o ~/x.svg").output_paths("t") == [Path("~/x.svg").expanduser()]
