"""The tracer never keeps a tensor alive: not while tracing, not in the Trace, not in long loops."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path

import pytest
import torch

import gradviz
from gradviz import Trace


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda a: a * 2, id="op-result"),
        pytest.param(lambda a: (a * 2).exp(), id="graph-output"),
        pytest.param(lambda a: a.data, id="data-alias"),
        pytest.param(lambda a: a.detach(), id="detach-alias"),
        pytest.param(lambda a: a[1:], id="view"),
        pytest.param(lambda a: (a * 1).add_(1), id="written-in-place"),
        pytest.param(lambda a: torch.ones(3, device="meta"), id="meta"),
    ],
)
def test_dropped_tensor_freed_while_tracing(make) -> None:
    a = torch.ones(3, requires_grad=True)
    with gradviz.trace() as t:
        y = make(a)
        ref = weakref.ref(y)
        y.sum()  # touch it once more so the tracer has certainly seen it
        del y  # no gc.collect(): reference counting alone must free it
        freed_inside = ref() is None
        z = a * 3  # the program goes on
    assert freed_inside
    assert z.shape == (3,)
    assert t.tensor("a").freed is None  # `a` outlives the trace
    assert any(r.freed is not None for r in t.tensors.values())


def test_freed_seq_recorded() -> None:
    with gradviz.trace() as t:
        y = torch.ones(2) * 2
        del y
        z = torch.zeros(1)
    freed = [r for r in t.tensors.values() if r.freed is not None]
    assert len(freed) == 2  # the temporary torch.ones(2) and the product
    assert all(r.shape == [2] for r in freed)
    for record in freed:
        assert record.seq < record.freed < t.tensor("z").seq
    assert t.tensor("z").freed is None


def _train_a_little() -> tuple[gradviz.trace, Trace, list[weakref.ref]]:
    """A program in its own function, so its frame (and any snapshot of its locals) is gone when it returns."""
    ctx = gradviz.trace()
    with ctx as t:
        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        out = a.tanh()
        c = out.data
        d = out.detach()
        c.zero_()
        loss = (out * 2).sum()
        loss.backward()
        model = torch.nn.Linear(3, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        model(a.detach()).sum().backward()
        opt.step()
        refs = [weakref.ref(v) for v in (a, out, c, d, loss, model.weight, model.bias, a.grad)]
    return ctx, t, refs


def test_trace_keeps_no_tensor_alive() -> None:
    ctx, t, refs = _train_a_little()
    gc.collect()
    assert [r() is None for r in refs] == [True] * len(refs)
    # the trace and the finished tracer are still here, and hold only plain data
    assert len(t.tensors) >= 8
    assert t.tensor("out").version_counter is not None
    assert ctx.trace is t
    assert t.to_json()


def test_deleted_local_freed_after_an_event_in_a_function() -> None:
    a = torch.ones(3)
    with gradviz.trace():
        y = a * 2
        y.add_(1)  # an in-place write: an event, so the tracer looks up this frame's variable names
        ref = weakref.ref(y)
        del y
        assert ref() is None


def test_deleted_local_freed_after_the_block_in_a_function() -> None:
    with gradviz.trace():
        y = torch.ones(3) * 2
    ref = weakref.ref(y)
    del y
    gc.collect()
    assert ref() is None


def test_trace_script_keeps_no_tensor_alive(tmp_path: Path) -> None:
    (tmp_path / "tensor_registry.py").write_text("refs = []\n", encoding="utf-8")
    script = tmp_path / "keeps.py"
    script.write_text(
        "import weakref\nimport torch\nimport tensor_registry\n"
        "a = torch.ones(3, requires_grad=True)\nout = a.tanh()\nc = out.data\nc.zero_()\nout.sum().backward()\n"
        "tensor_registry.refs.extend(weakref.ref(v) for v in (a, out, c, a.grad))\n",
        encoding="utf-8",
    )
    try:
        trace = gradviz.trace_script(script)
        registry = sys.modules["tensor_registry"]
    finally:
        sys.modules.pop("tensor_registry", None)
    gc.collect()
    assert trace.exception is None
    assert len(registry.refs) == 4
    assert [r() is None for r in registry.refs] == [True] * 4
    assert trace.tensor("c").storage == trace.tensor("out").storage


def test_trace_script_error_keeps_no_tensors(tmp_path: Path) -> None:
    """A failing script's tensors are freed once it ends: the trace holds its exception as data only."""
    (tmp_path / "tensor_registry.py").write_text("refs = []\n", encoding="utf-8")
    script = tmp_path / "fails.py"
    script.write_text(
        "import weakref\nimport torch\nimport tensor_registry\n"
        "a = torch.ones(3, requires_grad=True)\nout = a.tanh()\nout.detach().zero_()\n"
        "tensor_registry.refs.extend(weakref.ref(v) for v in (a, out))\nout.sum().backward()\n",
        encoding="utf-8",
    )
    try:
        trace = gradviz.trace_script(script)
        registry = sys.modules["tensor_registry"]
    finally:
        sys.modules.pop("tensor_registry", None)
    assert trace.exception.type == "RuntimeError"
    gc.collect()
    assert [r() is None for r in registry.refs] == [True, True]


_BIG_LOCAL_SCRIPT = """
import weakref
import torch
import tensor_registry

class TrainingFailed(Exception):  # the program's own class: its methods see the script's globals
    def describe(self):
        return f"failed with {len(big_global)} values"

big_global = torch.zeros(10_000_000)  # 40 MB, reachable only from the script's globals
tensor_registry.refs.append(weakref.ref(big_global))

def step():
    big_local = torch.zeros(10_000_000)  # 40 MB, a local of the raising frame
    tensor_registry.refs.append(weakref.ref(big_local))
    raise TrainingFailed("loss is nan")

step()
"""


def test_a_failed_scripts_40mb_local_and_globals_are_freed_while_the_trace_lives(tmp_path: Path) -> None:
    """Issue 10.5: Trace.error used to hold the live exception, whose traceback kept the raising frames' locals
    and (through the exception's class) the script's globals alive as long as the Trace."""
    (tmp_path / "tensor_registry.py").write_text("refs = []\n", encoding="utf-8")
    script = tmp_path / "big.py"
    script.write_text(_BIG_LOCAL_SCRIPT, encoding="utf-8")
    try:
        trace = gradviz.trace_script(script)
        registry = sys.modules["tensor_registry"]
    finally:
        sys.modules.pop("tensor_registry", None)
    gc.collect()
    assert len(registry.refs) == 2
    assert [r() is None for r in registry.refs] == [True, True]
    # the exception is data: type, message, where, and the traceback text as Python prints it
    record = trace.exception
    assert (record.type, record.message, record.module, record.exit_code) == ("TrainingFailed", "loss is nan", "__main__", 1)
    assert record.location.line == 16
    assert 'line 18, in <module>' in record.traceback and 'line 16, in step' in record.traceback
    assert record.traceback.endswith("TrainingFailed: loss is nan\n")
    # reraise() raises an exception rebuilt from that data, naming the program's own class
    with pytest.raises(gradviz.ProgramError, match=r"^TrainingFailed: loss is nan$") as raised:
        trace.reraise()
    assert raised.value.record is record


def test_trace_block_reraises_the_original_and_keeps_only_data() -> None:
    """`with gradviz.trace()` lets the block's own exception object propagate; the trace keeps no reference."""
    refs = []

    class Boom(Exception):
        pass

    def body() -> None:
        big_local = torch.zeros(10_000_000)
        refs.append(weakref.ref(big_local))
        raise Boom("the original")

    original = None
    with pytest.raises(Boom) as raised:
        with gradviz.trace() as t:
            body()
    original = raised.value
    assert str(original) == "the original"
    assert t.exception.type == "Boom" and t.exception.message == "the original"
    del original, raised
    gc.collect()
    assert refs[0]() is None
    assert isinstance(t.error, gradviz.ProgramError)


def _tiny_loop(x: torch.Tensor) -> tuple[Trace, list[bool], int]:
    refs = []
    ctx = gradviz.trace()
    with ctx as t:
        for i in range(10_000):
            y = (x * 2).sum()
            if i % 1000 == 0:
                refs.append(weakref.ref(y))
        alive_inside = [r() is not None for r in refs]
        watched_inside = len(ctx._recorder._live)
    return t, alive_inside, watched_inside


def test_long_loop_keeps_only_metadata() -> None:
    """10,000 iterations of tiny ops: every temporary dies on time; dropping the trace gives the memory back."""
    x = torch.ones(3)
    with gradviz.trace():  # warm caches (names, source lines) so they do not count below
        (x * 2).sum()
    gc.collect()
    blocks_before = sys.getallocatedblocks()
    t, alive_inside, watched_inside = _tiny_loop(x)
    assert alive_inside == [False] * 10  # the last sample was replaced by later iterations too
    assert watched_inside <= 3  # x and y: the recorder's weak table does not grow with the loop
    assert len(t.ops) == 20_000  # the metadata does grow: two calls per iteration
    assert sum(r.freed is None for r in t.tensors.values()) == 2  # only x and the last y outlive the trace
    gc.collect()
    held = sys.getallocatedblocks() - blocks_before
    assert held > 20_000  # sanity: the metadata is really there
    del t
    gc.collect()
    left = sys.getallocatedblocks() - blocks_before
    assert left < 5_000, f"{left} blocks still allocated after the trace was dropped ({held} while held)"


def test_cyclic_garbage_made_while_tracing_is_collected_soon_after() -> None:
    """The tracer collects young garbage less often while it runs; once it stops, a tensor held only by a
    reference cycle goes with the program's next young collections, as untraced (not at some full collection)."""

    class Holder:
        pass

    gc.collect()  # generation counts at zero: the cycle below is young when the trace ends, as it would be untraced
    with gradviz.trace():
        a, b = Holder(), Holder()
        a.other, b.other = b, a
        a.buffer = torch.zeros(1000)
        ref = weakref.ref(a.buffer)
        del a, b
    threshold = gc.get_threshold()[0] * (gc.get_threshold()[1] + 1) * 2  # two generation-1 collections' worth
    kept: list[object] = []  # kept: freeing them again would take the allocation count back down
    for allocated in range(threshold):
        kept.append([allocated])
        if ref() is None:
            break
    assert ref() is None, f"still alive after {threshold} allocations"
