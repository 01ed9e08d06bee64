"""What referred to tensors when the program ended: its variables only, its objects too, or only a graph."""

from __future__ import annotations


def test_held_at_end_tells_stored_values_from_graph_kept_ones(trace_of) -> None:
    trace = trace_of(
        """
        import torch

        class Recorder:
            def __init__(self):
                self.history = []

        w = torch.randn(3, requires_grad=True)
        rec = Recorder()
        kept_by_graph = None
        for step in range(3):
            h = torch.tanh(w * step)
            if step == 0:
                loss0 = h.pow(2).sum()  # saves h0 as it is: h0 stays alive with loss0's graph
            elif step == 1:
                rec.history.append(h)  # h1 in an instance's list
            previous, last = h.sin(), h.cos()
        """
    )
    h0, h1, h2 = sorted((t for t in trace.tensors.values() if t.op == "tanh"), key=lambda t: t.seq)
    # h0 is alive only through PowBackward0's saved `self`: nothing of the program refers to it
    assert h0.freed is None and h0.id not in trace.held_at_end
    assert trace.held_at_end[h1.id] == "objects"
    assert trace.held_at_end[h2.id] == "names"  # the loop variable, saved as it is by sin and cos
    # two values of the line `previous, last = ...` alive at the end (the sin and the cos), each in a variable
    sin, cos = trace.tensor("previous"), trace.tensor("last")
    assert trace.held_at_end[sin.id] == trace.held_at_end[cos.id] == "names"


def test_only_what_the_program_stores_is_held_on_every_python(trace_of) -> None:
    """tests/programs/kept_eval_outputs_list.py's loop: the list holds the 4 outputs; the inputs of each output's
    Linear (relu's results, saved as they are by addmm) are kept by the graphs alone. Python 3.13 copies
    gc.get_referrers' arguments into a tuple the collector sees, which seemed to hold every tensor asked about: a
    second graph_kept_alive at `return self.out(...)` there."""
    trace = trace_of(
        """
        import torch
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.body, self.out = nn.Linear(8, 16), nn.Linear(16, 2)

            def forward(self, x):
                return self.out(torch.relu(self.body(x)))

        model = Head().eval()
        outputs = []
        for batch in torch.randn(4, 3, 8):
            outputs.append(model(batch))
        """
    )
    relus = [t for t in trace.tensors.values() if t.op == "relu"]
    outputs = [t for t in trace.tensors.values() if t.op == "nn.functional.linear" and tuple(t.shape) == (3, 2)]
    assert len(relus) == len(outputs) == 4
    assert all(t.freed is None for t in relus)  # alive at the end, through the graphs' saved tensors
    assert trace.held_at_end == {t.id: "objects" for t in sorted(outputs, key=lambda t: t.seq)}


def test_the_search_reads_no_objects_class_attribute(tmp_path) -> None:
    """The end-of-run search looks at every object the program made (more than 16 tensors asked about): it must not
    ask an object for `__class__`, which may run the program's code or warn (torch 2.14's deprecated
    `torch.distributed.reduce_op` printed a FutureWarning under gradviz that the program never printed)."""
    import subprocess
    import sys

    program = tmp_path / "loud.py"
    program.write_text(
        "import warnings\n"
        "import torch\n"
        "class Loud:\n"
        "    @property\n"
        "    def __class__(self):\n"
        "        warnings.warn('asked for my class', FutureWarning)\n"
        "        return Loud\n"
        "loud = Loud()\n"
        "w = torch.randn(3, 3, requires_grad=True)\n"
        "outs = []\n"
        "for i in range(20):\n"
        "    h = (torch.randn(2, 3) @ w).tanh()\n"
        "    outs.append(h.pow(2))\n"
        "print('done')\n",
        encoding="utf-8",
    )
    plain = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, timeout=120)
    traced = subprocess.run([sys.executable, "-m", "gradviz", "check", str(program)], capture_output=True, text=True,
                            timeout=240, cwd=tmp_path)
    assert plain.stderr == "" and plain.stdout == "done\n"
    assert "asked for my class" not in traced.stderr, traced.stderr
    assert "graph_kept_alive" in traced.stdout  # the search ran: the list of 20 graphs was found


ASYNCIO_FIRST_IMPORTED_WHILE_TRACING = '''\
import gc
import gradviz
import torch

w = torch.randn(4, requires_grad=True)
with gradviz.trace() as t:
    import asyncio  # first imported while tracing: its `_asyncio` module is not among the objects frozen at the start
    loop = asyncio.new_event_loop()
    it = iter(loop.create_future())
    del it  # a Future's iterator freed: its memory goes to `_asyncio`'s free list
    a, b = [], []
    for i in range(10):  # 20 values of two lines alive at the end: the search goes over every object
        a.append((w * i).tanh())
        b.append((w * i).sigmoid())
loop.close()
print(sorted(set(t.held_at_end.values())), flush=True)
gc.collect()  # on Python 3.12.1 this hung when the end-of-run search had taken `_asyncio`'s referents
print("collected", flush=True)
'''


def test_the_end_of_run_search_leaves_module_objects_alone(tmp_path) -> None:
    """The search for what holds tensors at the end takes no module object's referents: those of `_asyncio` include
    freed memory on Python 3.12 before CPython fixed gh-122695 (3.12.1 here), and taking them hung the program's next collection
    (seen on 3.12.1: the program below never ended). Run as the program runs, in a process of its own."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "asyncio_first.py"
    script.write_text(ASYNCIO_FIRST_IMPORTED_WHILE_TRACING)
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['objects']", "collected"]  # the lists' values found held, then collected
