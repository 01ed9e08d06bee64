"""Traces of the document's `.data` and `.detach()` examples, shared by the view tests."""

from __future__ import annotations

from pathlib import Path

import pytest

import gradviz
from gradviz.model import Trace


@pytest.fixture(scope="session")
def data_trace(gallery: Path) -> Trace:
    return gradviz.trace_script(gallery / "plot_02_data_silent.py")


@pytest.fixture(scope="session")
def detach_trace(gallery: Path) -> Trace:
    trace = gradviz.trace_script(gallery / "plot_03_detach_raises.py")
    assert trace.exception is not None and trace.exception.type == "RuntimeError"
    return trace
