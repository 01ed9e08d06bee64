"""The Recorder's shared state, declared once: each part of the recorder (tracking.py, nodes.py, functions.py,
writes.py, special.py, hooks.py, sentinel.py, window.py, naming.py) is a class mixed into `Recorder` (recorder.py)
over this one, so that what two or more parts read and write has one declaration and one type. What only one part
uses is declared in that part. `Recorder.__init__` sets it all. Beside `_Live` (what is kept of a live tensor, which
the state's tables hold), declarations only: nothing here costs a recorded op anything (the hot path reads the same
instance attributes as before).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..model import Event, Location, TensorRecord, Trace
from .tensors import GradKey
from .windows import StepWindow


class _Live(weakref.ref[torch.Tensor]):
    """What the recorder keeps about a tensor while it is alive: a weak reference to it (call it to get the
    tensor, or None once freed), never the tensor itself, with the facts that may change while it lives."""

    __slots__ = ("byte_range", "key", "layout", "record", "storage", "tid", "version")
    tid: str
    key: int  # id() of the tensor
    storage: int | None
    byte_range: Any
    version: int | None
    layout: Any
    record: TensorRecord


class RecorderState:
    """The attributes and methods the recorder's parts share (recorder.py's `Recorder.__init__` sets them)."""

    trace: Trace
    _seq: Iterator[int]
    _lock: Any  # threading.RLock: the program's other threads may be recording
    _live: dict[int, _Live]  # id(tensor) -> live entry
    _by_tid: dict[str, _Live]
    _by_storage: dict[int, set[int]]  # storage key -> ids of live tensors in it
    _storage_ids: dict[int, str]
    _layout: dict[tuple[Any, ...], str]
    _layouts_of: dict[int, list[tuple[Any, ...]]]  # storage key -> its layouts in _layout
    _here: tuple[str | None, int | None]
    _locations: dict[tuple[str | None, int | None], Location]
    _location: Callable[[str | None, int | None], Location | None]
    _node: Callable[..., str]
    _node_ids: dict[Any, str]
    _first_sequence_nr: int
    _here_loc: Location | None
    _tid: Callable[[torch.Tensor], str]
    _track: Callable[..., str]
    _internal: Callable[..., None]
    _module_names: dict[int, str]
    _module_now: tuple[str | None, Any] | None
    _running_module: Callable[..., tuple[str | None, Any]]
    _backwards: list[tuple[Event, list[Any]]]
    _paused: int
    _counter_of: Callable[[str], str | None]
    _event: Callable[..., Event]
    _check: Any  # --verify's GradientCheck (verify.py), or None
    _window: StepWindow | None
    _fresh_grads: dict[str, GradKey]  # leaf -> its .grad right after the last backward
    _thread: int  # the tracing thread
    _bystanders: Any  # threads.Bystanders: the program's threads the recorder is not entered in
    _held_models: dict[tuple[str, str], list[Any]]
    _param_roots: dict[str, str]  # parameter's tensor id -> variable name of the model it was found in
    # id(named model) -> (weakref, the training flags it was recorded with)
    _root_flags: dict[int, tuple[Any, set[bool]]]
    _steps: dict[int, Any]
    _thread_paused: dict[int, int]
    _thread_names: dict[int, str]
    _sentinel: bool  # in sentinel mode now: calls at seen sites pass straight through
    _optimizer_groups: dict[int, int]  # id(optimizer) -> number of parameter groups, as last seen
    _rearm_left: int  # steps the re-armed recording still covers (0: not re-armed)
    _mode_on: bool
    _handles: list[Any]
    __exit__: Callable[..., Any]
