"""Recording in-place writes: the version counters and the aliases a write reaches, and batch norm's writes to its
running statistics, which move no version."""

from __future__ import annotations

from typing import Any

import torch

from ..model import Event, EventData, EventKind, VersionChange
from .state import RecorderState, _Live
from .tensors import _grad_fn, _Tensor, _version


def _batch_norm_stats(args: Any, kwargs: Any, mean: int, var: int, training: int) -> tuple[list[Any], bool]:
    """A batch norm call's running statistics (the tensors among them) and its `training` flag."""
    def arg(i: int, name: str, default: Any) -> Any:
        return args[i] if len(args) > i else kwargs.get(name, default)

    stats = [t for t in (arg(mean, "running_mean", None), arg(var, "running_var", None)) if isinstance(t, _Tensor)]
    return stats, bool(arg(training, "training", False))


# Batch norm in train mode updates its running statistics in place without moving their version counters (a known
# PyTorch issue): a graph that saved them in eval mode reads the new values at backward, unnoticed. The calls that do
# it, as the mode sees them: function -> positions of running_mean, running_var, training
_BATCH_NORMS = {
    torch.nn.functional.batch_norm: (1, 2, 5),
    torch.batch_norm: (3, 4, 5),
}


def _module_call(module: Any) -> str:
    """`nn.ReLU(inplace=True)`: a module as the program constructed it, to name what wrote in place."""
    kind = type(module)
    prefix = "nn." if kind.__module__.startswith("torch.nn") else ""
    try:
        args = module.extra_repr()
    except Exception:  # noqa: BLE001 - a user's extra_repr may fail; the class name is enough then
        args = ""
    return f"{prefix}{kind.__name__}({args})"


class WriteRecording(RecorderState):
    """The write-recording half of the Recorder (mixed into it; uses its tensor tracking, nodes and events)."""

    # the Recorder's state and methods this half uses (recorder.py sets them up)
    # counter -> its version after the latest write seen through any tensor on it: a view whose bytes that write
    # missed moved too, though its own recorded version did not (see _record_write)
    _counter_versions: dict[str, int]
    # running statistics (tensor id) -> the nodes an eval-mode batch norm made since their last update, which saved
    # them and read them at backward; the train-mode batch norm that next updates them names these in its write
    _stat_readers: dict[str, list[str]]

    def _record_write(
        self,
        t: torch.Tensor,
        before: int | None,
        op: str,
        file: str | None,
        line: int | None,
        *,
        readers: list[str] | None = None,
    ) -> Event:
        """`readers`: the write moved no version (batch norm's running statistics); the nodes that read what it
        changed."""
        live = self._live[id(t)]
        tid = live.tid
        after = _version(t)
        changes = [VersionChange(tid, before, after)]
        counter = self._counter_of(tid)
        live.version = after
        counter_versions = self._counter_versions
        if counter is not None and after is not None:
            counter_versions[counter] = after
        start, stop = live.byte_range or (0, 0)
        changes += self._aliases_moved(live, counter, after)
        data: EventData = {
            "storage": self._storage_ids.get(live.storage) if live.storage is not None else None,
            "byte_range": [start, stop],
            "counter": counter,
        }
        if readers is not None:
            data["unversioned"] = True
            data["readers"] = readers
        module_name, module = self._module_now or self._running_module()
        if module is not None:
            data["module"] = module_name
            data["module_call"] = _module_call(module)
        event = self._event(EventKind.INPLACE_WRITE, file, line, tensor=tid, op=op, versions=changes, data=data)
        fn = _grad_fn(t)
        if fn is not None:
            # an in-place op on a graph tensor gives it a new grad_fn, made by (so after) this write: registered
            # after the event, so what it saved (`relu_` saves its result) is not taken as written by it
            data["grad_fn"] = self._node(fn)
        return event

    def _aliases_moved(self, live: _Live, counter: str | None, after: int | None) -> list[VersionChange]:
        """The version changes of the other live tensors whose bytes overlap the written one's (in tracking order),
        merging counters that the versions show are one."""
        changes = []
        counter_versions = self._counter_versions
        start, stop = live.byte_range or (0, 0)
        members = self._by_storage.get(live.storage, ())  # type: ignore[arg-type]  # (None: no storage)
        for key in sorted(members, key=lambda k: int(self._live[k].tid[1:])):
            other = self._live.get(key)
            if other is None or other is live:
                continue
            alias = other()
            if alias is None:
                continue
            lo, hi = other.byte_range or (0, 0)
            if not (lo < stop and start < hi) and start != stop:
                continue
            now = _version(alias)
            changes.append(VersionChange(other.tid, other.version, now))
            other_counter = self._counter_of(other.tid)
            # moved where no write seen on its own counter explains it (a write to another row of its base moves a
            # row view's version too): then, and only then, it moved with this write
            known = other.version
            if other_counter is not None:
                latest = counter_versions.get(other_counter)
                if latest is not None and (known is None or latest > known):
                    known = latest
            if (
                now != known
                and now == after
                and counter is not None
                and other_counter is not None
                and other_counter != counter
            ):
                self._merge_counters(counter, other_counter)
            other.version = now
        return changes

    def _merge_counters(self, keep: str, gone: str) -> None:
        """Observed behaviour says two counters are one: fold `gone` into `keep`."""
        counters = self.trace.version_counters
        for tid in counters[gone].tensors:
            self.trace.tensors[tid].version_counter = keep
            counters[keep].tensors.append(tid)
        counters[keep].created_by = "inferred" if counters[keep].created_by == "new" else counters[keep].created_by
        counters[gone].tensors = []

    def _running_stats(
        self, norm: tuple[list[Any], bool], written: Any, out_ids: list[str], op: str, file: str | None, line: int | None
    ) -> None:
        """A batch norm call: in eval mode, the node it made reads the running statistics at backward; in train mode
        it changed their bytes, with their versions left as they were (a write no version check will see)."""
        stats, training = norm
        module_name, module = self._module_now or self._running_module()
        if module is not None:  # buffers first seen here, after the model was named: named now, as hooks.py would
            for name, buffer in module.named_buffers(recurse=False):
                live = self._live.get(id(buffer))
                if live is not None and live.record.buffer is None and any(t is buffer for t in stats):
                    live.record.buffer = f"{module_name}.{name}" if module_name else name
        if not training:
            node = self.trace.tensors[out_ids[0]].grad_fn if out_ids else None
            if node is not None:
                for t in stats:
                    self._stat_readers.setdefault(self._tid(t), []).append(node)
            return
        moved = {id(t) for t, _ in written or ()}
        for t in stats:
            if id(t) not in moved:  # (a version that did move is an ordinary write, recorded as one already)
                tid = self._tid(t)
                self._record_write(t, _version(t), op, file, line, readers=self._stat_readers.pop(tid, []))
