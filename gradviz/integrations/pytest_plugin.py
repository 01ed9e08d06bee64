"""pytest plugin: `pytest --gradviz` (or `@pytest.mark.gradviz`) traces tests and fails those whose run has an error finding."""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

# Nothing from gradviz's tracer or torch is imported here: pytest loads this module in every session of every
# project where gradviz is installed, and without --gradviz or a marked test it must cost nothing.
if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..cli.config import Config
    from ..cli.suppress import Suppressed
    from ..model import Trace
    from ..tracer import trace as Tracer  # noqa: N812 - the class `trace` (named to read like a function), as a type

MARKER = "gradviz"
FIXTURE = "gradviz_trace"


@dataclass
class _Settings:
    """What gradviz does for one test."""

    check: bool  # fail the test on findings (--gradviz or the marker); the fixture alone only records
    strict: bool  # warnings fail too
    verify: bool = False  # --gradviz-verify, the marker's verify=: measure how wrong silently corrupted gradients are
    allow: frozenset[str] = frozenset()  # finding kinds that never fail this test (the marker's allow=)
    config: Config | None = None  # [tool.gradviz] above the test file: its allow, its strict
    tracer: Tracer | None = None
    trace: Trace | None = None
    findings: list[Finding] = field(default_factory=list)
    suppressed: list[Suppressed] = field(default_factory=list)  # accepted: allow=, [tool.gradviz], ignore comments
    problem: str | None = None  # gradviz's own failure while analysing: reported, never fails the test
    bad_comment: str | None = None  # a `# gradviz: ignore[...]` naming no kind: fails a checked test, as a bad marker
    failed_by_findings: bool = False


_SETTINGS = pytest.StashKey[_Settings]()
_EVERY_TEST = pytest.StashKey[tuple[bool, bool]]()  # (--gradviz or --gradviz-strict, --gradviz-strict), read once
_VERIFY = pytest.StashKey[bool]()  # --gradviz-verify
_CONFIGS = pytest.StashKey["dict[Path, Config | Exception]"]()  # [tool.gradviz] per test file's folder, read once


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradviz", "gradviz: autograd and memory checks")
    group.addoption(
        "--gradviz",
        action="store_true",
        help="trace every test with gradviz; a test whose run has an error finding (a poisoned or silently "
        "corrupted saved tensor...) fails and shows it as `gradviz check` does",
    )
    group.addoption(
        "--gradviz-strict",
        action="store_true",
        help="like --gradviz, and warnings (dead parameters, updates without gradient) fail too",
    )
    group.addoption(
        "--gradviz-verify",
        action="store_true",
        help="like --gradviz, and where a saved tensor is silently corrupted (a write through `.data`) measure, in "
        "the same run, how wrong each gradient is (as `gradviz check --verify`); gradients measured identical make "
        "the finding info, which does not fail the test",
    )
    group.addoption(
        "--gradviz-report",
        metavar="DIR",
        help="write gradviz's HTML report (graph, memory, timeline, findings) of each failing traced test to DIR",
    )


def pytest_configure(config: pytest.Config) -> None:
    strict = bool(config.getoption("gradviz_strict"))
    verify = bool(config.getoption("gradviz_verify"))
    config.stash[_EVERY_TEST] = (strict or verify or bool(config.getoption("gradviz")), strict)
    config.stash[_VERIFY] = verify
    config.stash[_CONFIGS] = {}
    config.pluginmanager.register(_SuppressedCounter(), "gradviz-suppressed")
    config.addinivalue_line(
        "markers",
        f"{MARKER}(strict=False, allow=(), verify=False): trace this test with gradviz and fail it on error findings "
        "(strict=True: warnings too); allow: finding kinds that never fail it, e.g. allow=['cut_edge']; verify=True: "
        "measure how wrong silently corrupted gradients are",
    )


# ---------------------------------------------------------------------------------------------- which tests
def _settings_for(item: pytest.Item) -> _Settings | None:
    """None when gradviz leaves the test alone: no flag, no marker, no fixture."""
    everything, strict = item.config.stash[_EVERY_TEST]
    marker = item.get_closest_marker(MARKER)
    if not (everything or marker is not None or FIXTURE in getattr(item, "fixturenames", ())):
        return None
    project = _project_config(item)
    strict = strict or project.strict
    allow: frozenset[str] = frozenset()
    verify = item.config.stash.get(_VERIFY, False)
    if marker is not None:
        strict, allow = _marker_options(marker, strict)
        verify = bool(marker.kwargs.get("verify", verify))
    return _Settings(check=everything or marker is not None, strict=strict, allow=allow, config=project, verify=verify)


def _project_config(item: pytest.Item) -> Config:
    """`[tool.gradviz]` from the test file's folder upwards (as `gradviz check` finds it from the script's)."""
    from ..cli.config import ConfigError, load_config

    folder = Path(str(getattr(item, "path", item.config.rootpath))).parent
    cache = item.config.stash[_CONFIGS]
    if folder not in cache:
        try:
            cache[folder] = load_config(folder)
        except ConfigError as exc:
            cache[folder] = exc
    found = cache[folder]
    if isinstance(found, Exception):
        raise _MarkerError(str(found))
    return found


def _marker_options(marker: pytest.Mark, strict: bool) -> tuple[bool, frozenset[str]]:
    from ..analysis.findings import FindingKind

    unknown_options = set(marker.kwargs) - {"strict", "allow", "verify"}
    if marker.args or unknown_options:
        given = ", ".join([repr(a) for a in marker.args] + sorted(unknown_options))
        raise _MarkerError(f"@pytest.mark.gradviz takes only strict=, allow= and verify=, not {given}")
    strict = bool(marker.kwargs.get("strict", strict))
    allow = marker.kwargs.get("allow", ())
    if isinstance(allow, str):
        allow = (allow,)
    kinds = [kind.value for kind in FindingKind]
    for kind in allow:
        if kind not in kinds:
            raise _MarkerError(f"@pytest.mark.gradviz(allow=...): unknown finding kind {kind!r}; the kinds are {', '.join(kinds)}")
    return strict, frozenset(allow)


class _MarkerError(ValueError):
    """A gradviz marker with options that mean nothing."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    try:
        settings = _settings_for(item)
    except _MarkerError as exc:
        pytest.fail(str(exc), pytrace=False)
    if settings is not None:
        item.stash[_SETTINGS] = settings


@pytest.fixture
def gradviz_trace(request: pytest.FixtureRequest) -> Iterator[Trace]:
    """The gradviz Trace of this test, filled in while the test runs: read it after the code under test, e.g.
    `gradviz.diagnose(gradviz_trace)` or `gradviz_trace.tensor("out").version`."""
    settings = request.node.stash.get(_SETTINGS, None)
    if settings is None:  # asked for with request.getfixturevalue while the test runs untraced: an empty trace
        settings = request.node.stash[_SETTINGS] = _Settings(check=False, strict=False)
    yield _tracer(settings).trace


def _tracer(settings: _Settings) -> Tracer:
    if settings.tracer is None:
        from ..tracer import trace

        settings.tracer = trace(verify=settings.verify)
    return settings.tracer


# ---------------------------------------------------------------------------------------------- the run
@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    settings = item.stash.get(_SETTINGS, None)
    if settings is None:
        return (yield)
    tracer = _tracer(settings)
    try:
        tracer.__enter__()
    except Exception as exc:  # noqa: BLE001 - gradviz cannot trace here: the test runs as it would without us
        settings.problem = f"gradviz could not trace this test (a bug in gradviz): {type(exc).__name__}: {exc}"
        settings.tracer = None
        return (yield)
    try:
        result = yield
    except BaseException as exc:  # the test's own failure (or skip): recorded, then raised unchanged
        _stop(settings, tracer, exc)
        raise
    _stop(settings, tracer, None)
    if settings.check and settings.bad_comment:
        pytest.fail(settings.bad_comment, pytrace=False)
    failing = _failing(settings)
    if settings.check and failing:
        settings.failed_by_findings = True
        pytest.fail(_failure_text(failing, settings), pytrace=False)
    return result


def _stop(settings: _Settings, tracer: Tracer, exc: BaseException | None) -> None:
    try:
        tracer.__exit__(type(exc) if exc is not None else None, exc, exc.__traceback__ if exc is not None else None)
    except Exception as problem:  # noqa: BLE001 - a bug in gradviz must not replace the test's own outcome
        settings.problem = f"gradviz could not finish tracing this test (a bug in gradviz): {type(problem).__name__}: {problem}"
        settings.tracer = None
        return
    settings.trace = tracer.trace
    settings.tracer = None  # the recorder's bookkeeping goes; the trace (plain records) stays for the report
    if settings.trace.internal_errors:
        settings.problem = "gradviz's tracer failed on some calls (a bug in gradviz): " + "; ".join(
            settings.trace.internal_errors[:3]
        )
    _analyse(settings)


def _analyse(settings: _Settings) -> None:
    from ..analysis import diagnose
    from ..cli.config import Config, ConfigError, accepted

    try:
        found = diagnose(settings.trace) if settings.trace is not None else []
        settings.findings, settings.suppressed = accepted(  # the marker's allow= counts as --allow does
            found, allow=sorted(settings.allow), config=settings.config or Config(), allowed_by="allow="
        )
    except ConfigError as exc:  # the user's comment, not a bug in gradviz
        settings.bad_comment = f"gradviz: {exc}"
    except Exception as exc:  # noqa: BLE001 - a bug in gradviz must not decide the user's test
        settings.problem = f"gradviz could not analyse this test (a bug in gradviz): {type(exc).__name__}: {exc}"


def _failing(settings: _Settings) -> list[Finding]:
    levels = ("error", "warning") if settings.strict else ("error",)
    return [f for f in settings.findings if f.severity.value in levels]


def _failure_text(failing: list[Finding], settings: _Settings) -> str:
    from ..cli.formats import findings_text, where

    first = failing[0]
    # the first line is what pytest's short summary shows
    head = f"gradviz: {first.kind.value} at {where(first.file, first.line)}"
    if len(failing) > 1:
        head += f" and {len(failing) - 1} more"
    errors = sum(f.severity.value == "error" for f in failing)
    warnings = len(failing) - errors
    counted = ", ".join(part for part in (_plural(errors, "error"), _plural(warnings, "warning")) if part)
    why = f"the test itself passed; its run has {counted}"
    if settings.strict and warnings:
        why += " (strict: warnings fail too)"
    if settings.suppressed:
        why += f"; {len(settings.suppressed)} suppressed"
    return f"{head}\n{why}:\n\n{findings_text(failing).rstrip()}\n"


def _plural(count: int, word: str) -> str:
    return "" if count == 0 else f"{count} {word}" + ("" if count == 1 else "s")


# ---------------------------------------------------------------------------------------------- the report
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    settings = item.stash.get(_SETTINGS, None)
    if settings is not None and call.when == "call" and call.excinfo is not None and not settings.failed_by_findings:
        _hide_tracer_frames(item)
    report: pytest.TestReport = yield
    if settings is None or call.when != "call" or settings.trace is None:
        return report
    if report.failed and not settings.failed_by_findings and settings.findings:
        # the test failed for its own reason: that failure stays, the findings may explain it
        from ..cli.formats import findings_text

        report.sections.append(("gradviz findings", findings_text(settings.findings).rstrip() + "\n"))
    if settings.problem:
        report.sections.append(("gradviz", settings.problem))
    if settings.suppressed:
        report.user_properties.append(("gradviz_suppressed", len(settings.suppressed)))
        report.sections.append(("gradviz suppressed", _suppressed_text(settings.suppressed)))
    folder = item.config.getoption("gradviz_report")
    if report.failed and folder:
        report.sections.append(("gradviz report", _write_report(item, settings.trace, settings.findings, folder)))
    settings.trace = None  # done with it: a long session must not hold every test's records
    return report


def _hide_tracer_frames(item: pytest.Item) -> None:
    """Show the test's traceback as it is untraced: without the tracer's frames and torch's detour into its mode.

    pytest cuts and filters a failing test's traceback in `Item._traceback_filter` (rebuilding it from the raw
    traceback, so filtering `excinfo.traceback` beforehand would be undone): ours runs after it, for this item only.
    """
    pytest_filter = getattr(item, "_traceback_filter", None)
    if pytest_filter is None:  # a pytest without this step: its traceback keeps our frames, nothing worse
        return

    def without_tracer(excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
        from _pytest._code.code import Traceback

        from ..tracer.exceptions import script_frames

        entries = list(pytest_filter(excinfo))
        keep = script_frames([(str(entry.path), entry.name) for entry in entries])
        return Traceback([entry for entry, kept in zip(entries, keep) if kept])

    item._traceback_filter = without_tracer  # type: ignore[method-assign]  # (pytest's own hook for this, per item)


def _write_report(item: pytest.Item, trace: Trace, findings: list[Finding], folder: str) -> str:
    from ..explorer import explorer_html

    out_dir = Path(item.config.invocation_params.dir, folder)
    path = out_dir / (_file_name(item.nodeid) + ".html")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        page = explorer_html(trace, findings, title=f"gradviz report: {item.nodeid}")
        path.write_text(page, encoding="utf-8")
    except Exception as exc:  # noqa: BLE001 - no dot, a read-only folder...: the test's result matters more than the report
        return f"gradviz could not write {path}: {type(exc).__name__}: {exc}"
    return f"wrote {_relative(path, item.config.invocation_params.dir)}"


def _file_name(nodeid: str) -> str:
    """`tests/test_train.py::test_step[cpu]` -> `tests_test_train.py__test_step_cpu_`: one flat, safe name per test."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", nodeid.replace("::", "__"))


def _relative(path: Path, start: Path) -> str:
    try:
        return str(path.relative_to(start))
    except ValueError:
        return str(path)


def _suppressed_text(suppressed: list[Suppressed]) -> str:
    from ..cli.formats import where

    return "".join(f"{where(s.finding.file, s.finding.line)}  {s.finding.kind.value}  by {s.reason}\n" for s in suppressed)


class _SuppressedCounter:
    """Counts accepted findings over the session for the terminal summary; on the controller too under pytest-xdist
    (user_properties travel with each report)."""

    def __init__(self) -> None:
        self.count = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.count += sum(value for name, value in report.user_properties  # type: ignore[misc]  # (ints: ours)
                          if name == "gradviz_suppressed")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.count:
            terminalreporter.write_line(
                f"gradviz: {self.count} suppressed (allow=, [tool.gradviz] allow, # gradviz: ignore comments)"
            )
