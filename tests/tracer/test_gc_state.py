"""A trace() block gives the collector back as it found it: thresholds, frozen objects, enabled or not."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest
import torch

import gradviz


@pytest.fixture
def gc_as_found() -> Iterator[None]:
    """These tests change the process's collector: put it back for the rest of the suite."""
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    if enabled:
        gc.enable()
    else:
        gc.disable()


def _traced_block() -> None:
    with gradviz.trace():
        x = torch.ones(3, requires_grad=True)
        (x * 2).sum().backward()


def test_program_frozen_objects_stay_frozen(gc_as_found: None) -> None:
    kept = [[1, 2, 3]]  # a container the collector tracks
    gc.freeze()
    frozen = gc.get_freeze_count()
    assert not any(obj is kept for obj in gc.get_objects())  # frozen: out of every generation
    _traced_block()
    assert not any(obj is kept for obj in gc.get_objects())  # still frozen (the old unfreeze() released it)
    assert gc.get_freeze_count() > frozen // 2 > 0


def test_thresholds_and_disabled_collector_come_back(gc_as_found: None) -> None:
    gc.set_threshold(1234, 5, 6)
    gc.disable()
    _traced_block()
    assert gc.get_threshold() == (1234, 5, 6)
    assert not gc.isenabled()
    assert gc.get_freeze_count() == 0  # what the tracer froze for itself went back


def test_thresholds_the_program_sets_inside_the_block_stay(gc_as_found: None) -> None:
    gc.set_threshold(700, 10, 10)
    with gradviz.trace():
        gc.set_threshold(5000, 20, 30)
        torch.ones(2) * 2
    assert gc.get_threshold() == (5000, 20, 30)


def test_the_trace_is_freed_without_the_collector(gc_as_found: None) -> None:
    # a finished recorder holds no cycle through itself: dropping the trace frees it at once, so no full
    # collection has to scan (and a long run's exit does not wait for) millions of records
    gc.disable()
    context = gradviz.trace()
    with context as trace:
        x = torch.ones(3, requires_grad=True)
        (x.detach() * 2 + x).sum().backward()
    recorder = context._recorder
    del context, x
    assert gc.get_referrers(recorder) == []
    assert sys.getrefcount(trace) == 3  # `trace`, the recorder's reference and getrefcount's argument
