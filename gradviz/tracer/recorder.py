"""The recorder: a TorchFunctionMode that writes down tensors, storages, version counters, nodes and events.

Here: its lifecycle and the hot path every torch call takes. The Recorder is mixed from halves that share its state:
tensor bookkeeping (tracking.py), autograd nodes (nodes.py), in-place writes (writes.py), the calls handled apart
(special.py), optimizer steps and modules (hooks.py), the sentinel (sentinel.py), the step window (window.py) and
the names of what the program holds (naming.py).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import sys
import threading
import types
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch
import torch.utils.checkpoint  # (the reentrant checkpoint's forward is recognised by its code object)
from torch.overrides import TorchFunctionMode, resolve_name

from ..model import Event, EventKind, Location, OpRecord, Trace
from ..text import safe_repr, safe_str, type_name
from . import callsite, chains, source, threads
from .callsite import (
    _originals,
    _sites,
    call as _call,
    caller as _caller,
    drop_stand_in as _drop_stand_in,
    in_compiled_code as _in_compiled_code,
    site as _site,
    unpatched as _unpatched,
)
from .functions import FunctionRecording
from .gcstate import GcHold
from .hooks import RECORD_FUNCTION_OPS, HookRecording
from .lifetime import mark_end
from .live_ids import LiveIds
from .naming import VariableNaming
from .nodes import _SAVED_NAMES, _TYPE_NAMES, GraphRecording
from .sentinel import SentinelRecording
from .source import user_frame_from as _user_frame_from
from .special import _RUNS_PROGRAM_CODE, AUTOGRAD_BACKWARD, AUTOGRAD_GRAD, TENSOR_BACKWARD, SpecialCalls
from .state import _Live
from .tensors import GradKey, _flatten, _Tensor, _version
from .tracking import TensorTracking
from .verify import GradientCheck
from .window import _CLOSED, WindowRecording, _warning_filters
from .windows import StepWindow
from .writes import _BATCH_NORMS, WriteRecording, _batch_norm_stats

_is_compiling = torch.compiler.is_compiling
_getframe = sys._getframe
_FunctionType = types.FunctionType
_jit_tracing = torch._C._get_tracing_state  # None unless torch.jit.trace is recording
_grad_enabled = torch.is_grad_enabled
_DEBUG = bool(os.environ.get("GRADVIZ_DEBUG"))  # raise gradviz's own errors instead of recording them
_OUR_WARNINGS = (
    r"Using `torch.compile\(module\)` when there are global hooks",
    r"Dynamo does not know how to trace the builtin `(sys\._getframe|_thread\.get_ident)",
)


# while the recorder reads tensors for its bookkeeping, torch functions go straight to their implementation
_quiet = torch._C.DisableTorchFunction
_PLAIN_RESULTS = frozenset({int, float, bool, complex, str, type(None), torch.Size, torch.dtype, torch.device})
# Reads of a tensor's metadata, which cannot write or make a tensor: passed straight through (a third of the calls in
# a Python-loop model: RNNCell.forward asks `input.dim()` three times per step)
_QUERIES = frozenset(
    {
        _Tensor.dim,
        _Tensor.ndimension,
        _Tensor.size,
        _Tensor.numel,
        _Tensor.nelement,
        _Tensor.stride,
        _Tensor.storage_offset,
        _Tensor.element_size,
        _Tensor.is_contiguous,
        _Tensor.is_floating_point,
        _Tensor.is_complex,
        _Tensor.get_device,
        _Tensor.data_ptr,
        _Tensor.__len__,
        *(
            getattr(_Tensor, name).__get__
            for name in (
                "shape", "dtype", "device", "ndim", "layout", "requires_grad", "is_leaf", "grad_fn",
                "is_cuda", "is_cpu", "is_sparse", "is_quantized", "is_meta", "is_nested", "is_mps",
            )
        ),
    }
)


def _user_site(caller: types.FrameType | None) -> Any:
    """The site of the user's line a call from library code comes from (the frame outside `caller`), or None."""
    frame = _user_frame_from(caller.f_back if caller is not None else None)
    return _site(frame) if frame is not None else None


class Recorder(
    TensorTracking,
    GraphRecording,
    FunctionRecording,
    WriteRecording,
    SpecialCalls,
    HookRecording,
    SentinelRecording,
    WindowRecording,
    VariableNaming,
    TorchFunctionMode,
):
    """Records every torch call made while active. Build a Trace with :meth:`finish`.

    With `window`, recording stops for good once the window's steps are done (see window.py). With `verify`, the
    gradient errors of silent writes to saved tensors are measured (see verify.py).
    """

    def __init__(self, window: StepWindow | None = None, *, verify: bool = False) -> None:
        super().__init__()
        self.trace = Trace(torch_version=torch.__version__, verified=verify)
        self._check = GradientCheck() if verify else None
        # storage key -> saved tensors of live graphs in it, while --verify watches (empty otherwise: one test a call)
        self._watched = self._check.watched if self._check is not None else {}
        self._window = window
        self._mode_on = False
        self._init_sentinel()
        self._step_counter: Any = None  # the optimizer post-hook, which outlives the window (window.py)
        self._node_ids: dict[Any, str] = {}  # node key (its number; see threads.NodeNumbers) -> node id
        self._numbers = threads.NodeNumbers(self._node_ids, self.trace.nodes)
        self._heights: dict[str, int] = {}
        self._first_sequence_nr = 0  # autograd's next node number when tracing began
        self._gc = GcHold()
        self._warning_filters: list[Any] = []
        self._steps: dict[int, Any] = {}  # id(optimizer) -> its running step (hooks._OpenStep)
        self._step_records: dict[int, Any] = {}  # thread -> the record_function handle of its step about to start
        self._step_marks = frozenset(RECORD_FUNCTION_OPS)
        self._thread = threading.get_ident()  # the thread tracing (the mode is per thread; hooks are global)
        # the program's other threads enter the mode too (threads.py): what they record goes through this lock
        self._lock = threading.RLock()
        self._uninstall_threads: Callable[[], None] | None = None
        self._bystanders = threads.Bystanders(source.is_user_file)  # threads the recorder is not entered in
        # id(optimizer) -> o0, o1, ... in order of first step; a freed optimizer's id may come back for another
        self._optimizer_ids: LiveIds[str] = LiveIds()  # (.table: the dict)
        self._optimizer_count = itertools.count()
        self._fresh_grads: dict[str, GradKey] = {}  # leaf -> its .grad right after the last backward
        self._stepped_grads: dict[str, GradKey] = {}  # parameter -> its .grad as the latest step left it (hooks.py)
        self._init_tensors()
        self._node_count = 0
        self._saved_names = _SAVED_NAMES
        self._type_names = _TYPE_NAMES
        self._paused = 0  # the tracing thread's (and, from _CLOSED up, every thread's): see hooks.py, window.py
        self._init_threads()
        self._module_names: dict[int, str] = {}  # id(module) -> its name, while it lives (written by _module_names_live)
        self._module_names_live: LiveIds[str] = LiveIds(self._module_names)
        # the module running during the call being recorded (name, module), read once per call; None: not read yet
        self._module_now: tuple[str | None, Any] | None = None
        self._outside: tuple[int, types.CodeType] | None = None  # where tracing began (see start)
        self._checkpoint_calls: dict[int, Location | None] = {}  # nodes.py: _on_grad_mode
        self._forwards: list[Any] = []  # custom Function forwards whose node is not recorded yet (functions.py)
        self._backwards: list[tuple[Event, list[Any]]] = []  # the program's backwards running now, with their roots
        self._name_of = _func_name
        self._applied: set[str] = set()  # custom Function nodes recorded when apply saved (functions.py)
        self._finished = False
        self._on_dead_callback = self._on_dead  # one bound method for every weak reference
        self._locations: dict[tuple[str | None, int | None], Location] = {}
        self._here: tuple[str | None, int | None] = (None, None)  # user file and line of the current call
        self._here_loc: Location | None = None  # its Location
        self._named_roots: dict[int, bool] = {}  # the outermost modules named, while they live
        self._named_roots_live: LiveIds[bool] = LiveIds(self._named_roots)
        self._held_models: dict[tuple[str, str], list[Any]] = {}  # (variable, path) -> weakrefs of the models held there
        self._param_roots: dict[str, str] = {}  # parameter's tensor id -> variable name of the model it was found in
        self._handles: list[Any] = []
        self.internal_errors = self.trace.internal_errors
        self._special = self._special_calls()

    def _special_calls(self) -> dict[Any, Callable[..., Any]]:
        """The calls handled apart (special.py, hooks.py, nodes.py), by the function the mode sees."""
        special: dict[Any, Callable[..., Any]] = {
            # (the stubs type these descriptors as their values: Tensor, bool)
            _Tensor.data.__get__: self._on_data_get,  # type: ignore[attr-defined]
            _Tensor.data.__set__: self._on_data_set,  # type: ignore[attr-defined]
            _Tensor.detach: self._on_detach,
            _Tensor.detach_: self._on_detach_,
            _Tensor.requires_grad_: self._on_requires_grad,
            _Tensor.requires_grad.__set__: self._on_requires_grad,  # type: ignore[attr-defined]
            TENSOR_BACKWARD: self._on_backward,
            AUTOGRAD_BACKWARD: self._on_backward,
            AUTOGRAD_GRAD: self._on_backward,
            torch._C._set_grad_enabled: self._on_grad_mode,
            **dict.fromkeys(RECORD_FUNCTION_OPS, self._on_record_function),
        }
        if self._check is not None:  # hooks that would run twice in the measurement's backward: where they came from
            check, recorder = self._check, self
            for method in (_Tensor.register_hook, _Tensor.retain_grad):
                special[method] = lambda func, args, kwargs: check.hook_registered(recorder, func, args, kwargs)
        return special

    def _init_threads(self) -> None:
        """The state of the program's other threads (threads.py enters the recorder in each)."""
        # the program's other threads inside an optimizer step, or past their own step window: thread -> its count
        self._thread_paused: dict[int, int] = {}
        self._thread_names: dict[int, str] = {}  # the program's other threads recording now -> their names
        self._unnamed_threads = itertools.count(1)
        # each thread's name in the trace, unique: a second thread named `worker` is `worker#2` (threads.py numbers
        # them in the order the program started them); the thread objects weakly (a pool's thread runs many items)
        self._thread_labels: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._label_uses: dict[str, int] = {}

    def _init_sentinel(self) -> None:
        """The sentinel's state (sentinel.py): after the window, calls from sites seen while recording pass straight
        through."""
        self._sentinel = False
        self._seen_sites: set[tuple[int, int]] = set()
        self._seen_flips: set[tuple[int, int]] = set()
        self._seen_codes: dict[int, types.CodeType] = {}
        self._seen_roots: set[tuple[int, int, str]] = set()
        self._seen_backwards: set[Any] = set()
        self._optimizer_groups: dict[int, int] = {}
        self._module_flags: list[tuple[Any, bool]] = []
        self._root_flags: dict[int, tuple[Any, set[bool]]] = {}
        self._flag_hook: Any = None
        self._queries = _QUERIES
        self._rearm_left = 0
        self._survivors = False
        self._off_for: int | None = None
        self._sentinel_hook: Any = None

    def _init_tensors(self) -> None:
        """The tensor bookkeeping's state (tracking.py, writes.py): live tensors, storages, layouts, counters."""
        self._by_tid: dict[str, _Live] = {}
        self._seq = itertools.count()
        self._live: dict[int, _Live] = {}  # id(tensor) -> live entry
        self._by_storage: dict[int, set[int]] = {}  # storage key -> ids of live tensors in it
        self._storage_ids: dict[int, str] = {}
        self._layout: dict[tuple[Any, ...], str] = {}
        self._layouts_of: dict[int, list[tuple[Any, ...]]] = {}  # storage key -> its layouts in _layout
        self._counter_versions: dict[str, int] = {}  # counter -> its version after the latest write (writes.py)
        self._stat_readers: dict[str, list[str]] = {}  # batch norm's running statistics -> their readers (writes.py)
        # values let go of where recording stopped, looked at again at the end (lifetime.py: watch_stored)
        self._kin_watch: dict[str, Any] = {}
        # id -> (weak reference, tensor id, seq where let go of), for every value with a graph let go of there
        self._let_go: dict[int, tuple[Any, str, int]] = {}

    # ------------------------------------------------------------------ lifecycle
    def start(self, *, outside: types.FrameType | None = None) -> None:
        """Start recording. `outside`: the frame tracing runs inside (the `with` statement's), for as long as it lasts:
        a module already running there is not one the recorder saw start (it is known by its id and code, never
        held)."""
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        # no module hooks: which modules run is read off the stack when a call is recorded (hooks.module_frames)
        self._handles = [register_optimizer_step_pre_hook(self._step_pre)]
        self._step_counter = register_optimizer_step_post_hook(self._window_step_post)
        # torch.compile warns about what the tracer brings (the global module hook a closing window may put in place
        # for a moment, the frame lookups in our mode that dynamo steps around): warnings the program would not print
        # (put in place directly: `filterwarnings` would reset the registries behind "once per place")
        for message in _OUR_WARNINGS:
            entry = ("ignore", re.compile(message, re.I), Warning, None, 0)
            _warning_filters().insert(0, entry)
            self._warning_filters.append(entry)
        self._first_sequence_nr = torch._C._autograd._get_sequence_nr()
        self._outside = (id(outside), outside.f_code) if outside is not None else None
        self._thread = threading.get_ident()
        self._numbers.tracing_thread()
        self._bystanders.start()
        self._gc.hold()
        self._watch_start()  # (Python 3.12+, with a sentinel to come: sentinel.py)
        self.__enter__()
        self._mode_on = True
        self._uninstall_threads = threads.install(self)

    def enter_thread(self, name: str | None = None, thread: Any = None) -> bool:
        """Called first thing in a thread the program starts while tracing: the mode is entered there too (torch's
        mode stack is per thread). `name`: the thread's, `thread`: its `threading.Thread` (None: one `_thread`
        started, which `threading` does not know: asking it would make a dummy thread object the program could see;
        its name is then `thread_name()`'s, taken as it was started). False when tracing has ended."""
        if not self._mode_on or self._paused >= _CLOSED:
            return False
        with self._lock:
            self._numbers.entered()
            self._bystanders.entered.add(threading.get_ident())
            if thread is None:  # a `_thread` one, named as the program started it (thread_name)
                label = name if name is not None else self._unique_label(f"_thread {next(self._unnamed_threads)}")
            else:
                label = self._thread_labels.get(thread) or self._unique_label(name or "thread")
                self._thread_labels[thread] = label
            self._thread_names[threading.get_ident()] = label
        self.__enter__()
        return True

    def thread_name(self) -> str:
        """The name of a `_thread` about to be started (threads.py: numbered in the order the program starts them)."""
        with self._lock:
            return self._unique_label(f"_thread {next(self._unnamed_threads)}")

    def _unique_label(self, name: str) -> str:
        """`name`, or `name#2`, `name#3` for the later threads of one name (called under the lock)."""
        uses = self._label_uses[name] = self._label_uses.get(name, 0) + 1
        return name if uses == 1 else f"{name}#{uses}"

    def leave_thread(self) -> None:
        threads.leave(self)
        with self._lock:
            self._bystanders.entered.discard(threading.get_ident())
            self._thread_left()
            self._thread_names.pop(threading.get_ident(), None)
            self._thread_paused.pop(threading.get_ident(), None)

    def stop(self) -> None:
        if self._uninstall_threads is not None:
            self._uninstall_threads()
            self._uninstall_threads = None
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        self._sentinel = False
        self._watch_stop()
        if self._check is not None:
            self._check.close()
        for key in list(self._steps):  # the program's error escaped through an optimizer step: that step raised
            self._close_step(key, "error")
        if self._mode_on:
            self.__exit__(None, None, None)
            self._mode_on = False
        self._paused += _CLOSED  # threads of the program still running pass their calls straight through from now
        self._bystanders.look()
        self.trace.unrecorded_threads = list(self._bystanders.ran.values())
        mark_end(self)  # lifetime analysis: what is freed after this was alive when the program ended
        for entry in self._warning_filters:
            with contextlib.suppress(ValueError):  # the program may have reset the filters itself
                _warning_filters().remove(entry)
        self._warning_filters = []  # (no registry reset: an ignore filter adds nothing to them)
        self._gc.release()
        chains.sweep()  # deep graphs the program dropped while tracing: let them go now, a segment at a time
        callsite.forget()
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if self._step_counter is not None:
            self._step_counter.remove()
            self._step_counter = None
        if self._sentinel_hook is not None:
            self._sentinel_hook.remove()
            self._sentinel_hook = None
        if self._flag_hook is not None:
            self._flag_hook.remove()
            self._flag_hook = None
        self.trace.window = self._window_record()

    def finish(self) -> Trace:
        """Stop watching tensors (their records stay) and collect the source text events point at."""
        if self._finished:
            return self.trace
        with self._lock:
            self._finished = True
        return self._finish()

    def _finish(self) -> Trace:
        # the recorder's only cycles, bound methods of itself in its own tables: gone, so that the trace is freed
        # by reference counting when its user lets go of it, not by a full collection scanning all of it first
        # (gradviz check: at exit, 0.8 s for a 600-batch LSTM run)
        self._special = {}
        self._on_dead_callback = None  # type: ignore[assignment]  # (no tensor is tracked after stop: never called)
        self._seen_sites.clear()
        self._seen_flips.clear()
        self._seen_codes.clear()
        self._module_flags = []
        self._live.clear()
        self._by_tid.clear()
        self._fresh_grads.clear()
        self._stepped_grads.clear()
        self._by_storage.clear()
        self._steps.clear()  # a step that raised and was never closed: let go of its parameters
        self._forwards = []
        self._backwards = []
        self._qualify_parameter_names()
        self._label_notebook_cells()
        for path in {e.location.file for e in self.trace.events if e.location} | (
            {self.trace.script} if self.trace.script else set()
        ):
            text = "".join(source.getlines(path))
            if text:
                self.trace.sources[path] = text
        return self.trace

    # ------------------------------------------------------------------ the hot path
    # Every call the program makes passes through here: the common paths are written for speed (locals, positional
    # record construction, no helper calls where a line does); issue 2 sets the budget (benchmarks/bench_trace.py).
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if type(func) is _FunctionType and not _is_compiling():  # a torch function written in Python, or a wrapper
            func = _originals.get(func) or _unpatched(func)  # (of the program's: see callsite.unpatched)
        if self._sentinel:
            # after the window (sentinel.py): a call from a site seen while recording goes straight through
            frame = _getframe(1)
            if (id(frame.f_code), frame.f_lasti) in self._seen_sites or self._sentinel_miss(func, args, kwargs, frame):
                return func(*args, **kwargs) if kwargs else func(*args)
            del frame  # something new: recording began again with this call
        if _is_compiling():
            # dynamo is tracing this call into a graph: anything more than the call itself (frame lookups, records
            # of the fake tensors it traces with) would change the graph it builds, hence the compiled results.
            # First: dynamo in torch 2.8 cannot trace even the `in _QUERIES` below (frozenset.__contains__)
            return func(*args, **kwargs) if kwargs else func(*args)
        if func in _QUERIES and _jit_tracing() is None:
            # a read of metadata (x.dim(), x.shape): writes nothing, makes no tensor, warns nothing; nothing to record
            return func(*args, **kwargs) if kwargs else func(*args)
        if kwargs is None:
            kwargs = {}
        if _jit_tracing() is not None:
            # torch.jit.trace is recording: our reads of shapes and storages would be traced into its graph (as
            # tensors, with TracerWarnings); the call goes through the stand-in, so its source range is the program's
            return _call(_caller(2, func), func, args, kwargs)
        if (self._paused and (self._paused >= _CLOSED or threading.get_ident() == self._thread)) or (
            self._thread_paused and threading.get_ident() in self._thread_paused
        ):
            # (each thread pauses on its own: another thread's calls are recorded while this one is inside a step)
            if func in self._step_marks:  # the end of an optimizer step may show here: see hooks.py
                return self._on_record_function(func, args, kwargs)
            caller = _caller(2, func)
            self._see(caller)  # (inside an optimizer step: its sites are the sentinel's to know too)
            return _call(caller, func, args, kwargs)
        if self._forwards:  # a custom Function's apply may have saved its tensors since the last call
            with _quiet(), self._lock:
                self._end_forwards()
        special = self._special.get(func)
        if special is not None:
            if func in _RUNS_PROGRAM_CODE:  # backward runs the program's hooks: it holds the lock only to record
                self._see(_caller(2, func), func)
                return special(func, args, kwargs)
            with self._lock:
                if self._paused >= _CLOSED:  # tracing ended while this thread was on its way here
                    return func(*args, **kwargs)
                self._see(_caller(2, func), func)
                return special(func, args, kwargs)
        return self._record_call(func, args, kwargs)

    def _record_call(self, func: Any, args: Any, kwargs: Any) -> Any:
        """Make a call the recorder writes down: find its site, read its inputs' versions, call it (through the
        site's stand-in), then record what it made and wrote."""
        caller = _caller(3, func)  # (3: the caller of __torch_function__, which called this)
        site = None
        if caller is not None:
            code = caller.f_code
            site = _sites.get((id(code), caller.f_lasti))
            if site is None or site[0] is not code or site[2] is None:
                site = _site(caller)
                self._see(caller)  # once per site and trace (the stand-in is new): known to the sentinel
            if site[3] is not False and _in_compiled_code(caller, site):
                # the code torch.compile made runs (aot_eager's and inductor's aten ops under no_grad, inside one
                # autograd Function): the compiled call is recorded not at all, as for every backend; its outputs are
                # recorded where the program uses them, with the compiled node leading back to the parameters
                return func(*args, **kwargs)
        # Our own reads of tensors (versions, storage, grad_fn...) must not reach other torch-function modes below
        # ours or tensor subclasses: `_quiet` around everything but the call itself
        with _quiet():
            inputs = _flatten(args, kwargs, [])
            try:
                before: list[int | None] = [t._version for t in inputs]
            except RuntimeError:  # an inference tensor among them: no version counter
                before = [_version(t) for t in inputs]
            if self._watched:  # --verify: the bytes this call may take from a saved tensor (verify.py)
                self._check.keep(self, inputs)
        positions = _BATCH_NORMS.get(func)
        norm = _batch_norm_stats(args, kwargs, *positions) if positions is not None else None
        # made from a stand-in for the calling frame: warnings raised by the call are the program's (callsite.py)
        if site is None:
            result = func(*args, **kwargs)
        else:
            try:
                result = site[2](func, args, kwargs)  # type: ignore[misc]  # (its stand-in: made above when missing)
            except BaseException as exc:
                _drop_stand_in(exc)
                raise
        with _quiet():
            if type(result) in _PLAIN_RESULTS:  # x.item(), x.tolist()...: nothing to track unless it wrote
                try:
                    if [t._version for t in inputs] == before:
                        return result
                except RuntimeError:
                    pass
            try:
                with self._lock:
                    if self._paused < _CLOSED:  # (tracing may have ended while this thread made the call)
                        self._after_call(func, inputs, before, result, caller, site, norm)
            except Exception as exc:  # never let bookkeeping break the user's program
                self._module_now = None
                self._internal(exc, _func_name(func))
        return result

    def _after_call(
        self,
        func: Any,
        inputs: list[torch.Tensor],
        before: list[int | None],
        result: Any,
        caller: Any,
        site: Any,
        norm: tuple[list[Any], bool] | None = None,
    ) -> None:
        written = None
        for t, v in zip(inputs, before):
            if v is not None and t._version != v:
                if written is None:
                    written = []
                written.append((t, v))
        if isinstance(result, _Tensor):
            outputs = [result]
        elif isinstance(result, (list, tuple)):
            outputs = _flatten(result, None, [])
        elif written is None:
            return
        else:
            outputs = []
        if not outputs and written is None:
            return
        if not _grad_enabled() and caller is not None:  # (a custom Function's forward runs with grad mode off)
            self._see_forward(caller)
        if site is None or not site[4]:  # called from library code (nn.Linear.forward): the user's line further out
            site = _user_site(caller)
        if site is not None:
            here = (site[0].co_filename, site[1])
            loc = self._locations.get(here) or self._location(*here)
        else:
            here, loc = (None, None), None
        file, line = self._here = here
        self._here_loc = loc
        self._module_now = self._running_module(caller)  # (and names a model seen running for the first time)
        name = _func_name(func)
        seq = next(self._seq)
        live = self._live
        track = self._track
        in_ids = []
        for t in inputs:
            entry = live.get(id(t))
            in_ids.append(entry.tid if entry is not None else track(t, "input", seq, None, file, line))
        if written is not None:
            self._record_writes(written, name, file, line)
        out_ids = []
        for t in outputs:
            entry = live.get(id(t))
            out_ids.append(entry.tid if entry is not None else track(t, "op", seq, name, file, line))
        op = OpRecord(seq, name, in_ids, out_ids, line, file)
        if out_ids and not torch.is_grad_enabled():
            op.checkpoint_file, op.checkpoint_line = _reentrant_checkpoint_call(caller)
        self.trace.ops.append(op)
        if norm is not None:
            self._running_stats(norm, written, out_ids, name, file, line)
        self._module_now = None  # (read afresh by whatever records next)

    def _record_writes(self, written: list[tuple[torch.Tensor, int]], op: str, file: str | None, line: int | None) -> None:
        """The call wrote in place to `written` (tensor, its version before): one write event each."""
        entries = [self._live.get(id(t)) for t, _ in written]
        known = [entry.version if entry is not None else None for entry in entries]
        for (t, v), entry, was in zip(written, entries, known):
            if entry is not None and was != entry.version == t._version:
                # brought up to date by an earlier write of this call to a tensor sharing its counter
                # (`x[i] *= 0`: setitem reads the view it copies, whose version moved with x's): not a write of its own
                continue
            event = self._record_write(t, v, op, file, line)
            if self._check is not None:
                self._check.written(t, event)

    # ------------------------------------------------------------------ shared by every half
    def _internal(self, exc: BaseException, op: str | None = None) -> None:
        """Our bookkeeping failed on a call: counted (the summary says so: never a silent "no problems"), kept."""
        if _DEBUG:
            raise exc
        self.trace.internal_error_count += 1
        if len(self.internal_errors) < 20:
            text = f"{type_name(exc)}: {safe_str(exc)}"
            self.internal_errors.append(f"{op}: {text}" if op else text)

    def _location(self, file: str | None, line: int | None) -> Location | None:
        """One shared Location per source line."""
        if file is None or line is None:
            return None
        where = (file, line)
        loc = self._locations.get(where)
        if loc is None:
            loc = self._locations[where] = source.make_location(file, line)
        return loc

    def _event(self, kind: EventKind, file: str | None, line: int | None, **fields: Any) -> Event:
        # one shared Location per line, as for tensors and nodes: a training loop repeats the same few lines
        loc = self._location(file, line)
        if kind in _PER_THREAD and self._thread_names:
            name = self._thread_names.get(threading.get_ident())
            if name is not None:  # (a step of another thread's: each thread's steps are its own)
                fields.setdefault("data", {})["thread"] = name  # (in place: the caller fills the rest in later)
        event = Event(seq=next(self._seq), kind=kind, location=loc, **fields)
        self.trace.events.append(event)
        if loc is not None:
            self._name_from_frame_at(loc)
        return event


_names: dict[Any, str] = {}
# the events that make steps: the program's other threads' are marked with the thread's name
_PER_THREAD = frozenset({EventKind.BACKWARD, EventKind.OPTIMIZER_STEP})
# the forward of `checkpoint(..., use_reentrant=True)`: it runs the checkpointed function under no_grad
_CHECKPOINT_FORWARD = getattr(getattr(torch.utils.checkpoint, "CheckpointFunction", None), "forward", None)
_CHECKPOINT_CODE = getattr(_CHECKPOINT_FORWARD, "__code__", None)


def _reentrant_checkpoint_call(frame: FrameType | None) -> tuple[str | None, int | None]:
    """The user's file and line that called a reentrant checkpoint, when `frame` runs inside one; else (None, None)."""
    while frame is not None and _CHECKPOINT_CODE is not None:
        if frame.f_code is _CHECKPOINT_CODE:
            outer = _user_frame_from(frame.f_back)
            return (outer.f_code.co_filename, outer.f_lineno) if outer is not None else (None, None)
        frame = frame.f_back
    return None, None


# torch's resolve_name runs inside warnings.catch_warnings, and every catch_warnings resets the registries behind
# "show a warning once per place": the program's warnings would show again. Its table is built (and cached) now,
# outside any program, and later calls skip the wrapper.
resolve_name(torch.add)
_resolve_name = getattr(resolve_name, "__wrapped__", resolve_name)


def _func_name(func: Any) -> str:
    """`Tensor.tanh`, `relu`, `Tensor.grad.__get__`: the public name of a torch callable (cached)."""
    try:
        return _names[func]
    except (KeyError, TypeError):
        pass
    name = _resolve_name(func) or getattr(func, "__qualname__", None) or safe_repr(func)
    name = name.removeprefix("torch.")
    # resolve_name maps a few functions to a sibling sharing their C binding (torch.mm -> "torch.spmm",
    # torch.dsmm -> "spmm", torch.saddmm -> "sspaddmm"): the function's own name wins where torch holds it there.
    own = getattr(func, "__name__", None)
    if isinstance(own, str) and name.rsplit(".", 1)[-1] != own:
        if getattr(torch, own, None) is func:
            name = own
        elif getattr(torch.Tensor, own, None) is func:
            name = f"Tensor.{own}"
    with contextlib.suppress(TypeError):  # an unhashable callable: named again next time
        _names[func] = name
    return name

