"""The `_thread.start_new_thread` gradviz puts in place while tracing (to record `_thread` threads) looks like the
builtin wherever a program could look but `type()` and identity (issue 36, gradviz's wrappers invisible): name,
qualified name, module, doc, `__self__`, `__text_signature__`, repr, `isinstance(f, types.BuiltinFunctionType)`,
`inspect.isbuiltin`/`isfunction`, `inspect.signature`, `callable`, pickling, read-only attributes, and the threads
it starts. Compared against plain Python in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = """
import _thread, inspect, pickle, threading, types
f = _thread.start_new_thread
def outcome(call):
    try:
        return repr(call())
    except Exception as exc:
        return type(exc).__name__ + ": " + str(exc)
print("name", f.__name__, f.__qualname__, f.__module__)
print("self", f.__self__ is _thread, getattr(f, "__text_signature__", "missing"))
print("doc", f.__doc__ == _thread.start_new_thread.__doc__, (f.__doc__ or "").splitlines()[:1])
print("repr", repr(f), str(f))
print("kind", isinstance(f, types.BuiltinFunctionType), inspect.isbuiltin(f), inspect.isfunction(f),
      inspect.isroutine(f), callable(f), hasattr(f, "__code__"), hasattr(f, "__wrapped__"), hasattr(f, "__dict__"))
print("signature", outcome(lambda: inspect.signature(f)))
print("pickle", outcome(lambda: pickle.loads(pickle.dumps(f)) is f))
print("set", outcome(lambda: setattr(f, "__name__", "x")), outcome(lambda: setattr(f, "tag", 1)))
print("bad args", outcome(lambda: f(1, ())), outcome(lambda: f(print, [])))
done = threading.Event()
print("start", type(f(done.set, ())).__name__, done.wait(10))
"""


def _run(script: str, tmp: Path) -> list[str]:
    path = tmp / "probe.py"
    path.write_text(script)
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_start_new_thread_under_tracing_looks_like_the_builtin(tmp_path: Path) -> None:
    plain = _run(PROBE, tmp_path)
    traced = _run("import gradviz\nwith gradviz.trace():\n" + "".join(f"    {line}\n" for line in PROBE.splitlines()),
                  tmp_path)
    assert plain[0] == "name start_new_thread start_new_thread _thread"  # (Python's own, as the test reads it)
    assert traced == plain
