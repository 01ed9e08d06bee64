"""The exit status rule of the one render/check pipeline (the subprocess tests check it end to end)."""

from __future__ import annotations

import pytest

from gradviz.cli.pipeline import exit_status_of
from gradviz.cli.terminal import EXIT_FINDINGS, EXIT_OK


@pytest.mark.parametrize(
    ("ended", "failing", "clamp", "hard_exit", "status"),
    [
        (EXIT_OK, False, False, None, EXIT_OK),  # a clean run, no failing finding
        (EXIT_OK, True, False, None, EXIT_FINDINGS),  # render --fail-on error with an error finding
        (5, False, False, None, 5),  # render keeps the script's own SystemExit(5)
        (5, True, False, None, 5),  # ... also when a finding fails the run too
        (5, False, True, None, EXIT_FINDINGS),  # check: any failure of the script is 1
        (EXIT_OK, True, True, None, EXIT_FINDINGS),  # check: an error finding
        (EXIT_OK, False, True, 7, 7),  # check, os._exit(7): the script's code
        (EXIT_OK, True, True, 7, EXIT_FINDINGS),  # ... unless a finding fails the run
        (EXIT_OK, True, True, 0, EXIT_FINDINGS),  # os._exit(0) with an error finding
    ],
)
def test_exit_status_of(ended: int, failing: bool, clamp: bool, hard_exit: int | None, status: int) -> None:
    assert exit_status_of(ended, failing=failing, clamp=clamp, hard_exit=hard_exit) == status
