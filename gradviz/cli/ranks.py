"""torchrun / torch.distributed: which rank this process is, and how rank 0 gathers every rank's findings into
one summary (each rank drops a small JSON file in a shared folder; rank 0 waits for them with a timeout)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: How long rank 0 waits for the other ranks' results, in seconds (GRADVIZ_RANK_TIMEOUT overrides).
DEFAULT_TIMEOUT = 120.0


@dataclass(frozen=True)
class Rank:
    """This process's place in a torchrun job: global rank and world size (from torchrun's environment)."""

    rank: int
    world_size: int


def current_rank() -> Rank | None:
    """The rank under torchrun with WORLD_SIZE > 1, else None (a single process writes files as usual)."""
    try:
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
    except ValueError:
        return None
    if world_size <= 1 or not 0 <= rank < world_size:
        return None
    return Rank(rank, world_size)


class StoppedByTorchrun(SystemExit):
    """Raised into the program where torchrun's SIGTERM found it: the program ends there, as the signal would end it
    (status 128 + 15), and gradviz still reports what it traced."""


class StopSignal:
    """torchrun stops every rank (SIGTERM, then SIGKILL 30 s later) as soon as one rank exits with an error: a rank
    still running, or waiting for rank 0, would lose its findings. While the program runs the signal ends it (as
    StoppedByTorchrun); afterwards it is only noted: the rank then prints its own findings at once instead of waiting
    to be merged. Installed only where the program would have died of the signal (no handler of its own)."""

    def __init__(self) -> None:
        self.received = False
        self._trace: Any = None  # the trace being recorded, while the program runs

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, self._on_signal)

    def running(self, trace: Any) -> None:
        """The program starts running (traced into `trace`); `None`: it has ended."""
        self._trace = trace

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.received = True
        trace, self._trace = self._trace, None
        if trace is not None and trace.ended is None:  # the program is running: it ends here
            raise StoppedByTorchrun(128 + signum)


#: This process's SIGTERM watch under torchrun (one per process: signal handlers are).
stop_signal = StopSignal()


def _job_folder() -> Path:
    """A folder only this job's ranks share: torchrun gives every rank the same run id, master address and port."""
    parts = [os.environ.get(k, "") for k in ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT")]
    key = re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(parts))[:120]
    return Path(tempfile.gettempdir()) / f"gradviz-ranks-{os.getuid() if hasattr(os, 'getuid') else 0}-{key}"


def _timeout() -> float:
    try:
        return float(os.environ.get("GRADVIZ_RANK_TIMEOUT", DEFAULT_TIMEOUT))
    except ValueError:
        return DEFAULT_TIMEOUT


def publish(rank: Rank, result: dict[str, Any], *, since: float, timeout: float | None = None) -> bool:
    """Leave this rank's result (findings, exception, files written) for rank 0, then wait until rank 0 has taken
    it: torchrun stops every rank as soon as one exits with an error, which would cut rank 0's summary short.
    False when rank 0 did not take it (it stopped waiting after GRADVIZ_RANK_TIMEOUT, or never came): this rank
    must then print its own findings. `since`: this process's start (an older job's marks are not read)."""
    folder = _job_folder()
    if _left_out(folder, rank, since):
        return False
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"rank{rank.rank}.json"
    partial = folder / f".rank{rank.rank}.{os.getpid()}.tmp"
    partial.write_text(json.dumps({"rank": rank.rank, "pid": os.getpid(), **result}, ensure_ascii=True), encoding="utf-8")
    os.replace(partial, final)  # whole or not at all: rank 0 never reads half a file
    deadline = time.monotonic() + (_timeout() if timeout is None else timeout)
    while time.monotonic() < deadline:
        if not final.exists():
            return True
        if _left_out(folder, rank, since) or stop_signal.received:  # (torchrun is ending this rank: print now)
            break
        time.sleep(0.05)
    with contextlib.suppress(OSError):
        final.unlink()
    return False


def _left_out(folder: Path, rank: Rank, since: float) -> bool:
    """Whether rank 0 of this job has printed its summary without this rank."""
    done = folder / _DONE
    try:
        if done.stat().st_mtime < since - 1:
            return False
        taken = json.loads(done.read_text(encoding="utf-8")).get("taken", [])
    except (OSError, ValueError, AttributeError):
        return False
    return rank.rank not in taken


_DONE = "done.json"


def gather(rank: Rank, own: dict[str, Any], *, since: float, timeout: float | None = None) -> tuple[list[dict[str, Any]], list[int]]:
    """On rank 0: every rank's result (its own included) in rank order, and the ranks that did not report within
    the timeout. Results older than `since` (a crashed earlier job on the same port) are not taken."""
    if timeout is None:
        timeout = _timeout()
    folder = _job_folder()
    results: dict[int, dict[str, Any]] = {rank.rank: {"rank": rank.rank, **own}}
    deadline = time.monotonic() + timeout
    while True:
        for other in range(rank.world_size):
            if other in results:
                continue
            path = folder / f"rank{other}.json"
            try:
                if path.stat().st_mtime < since - 1:
                    continue
                results[other] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
        if len(results) == rank.world_size or time.monotonic() >= deadline or stop_signal.received:
            break
        time.sleep(0.05)
    missing = [r for r in range(rank.world_size) if r not in results]
    return [results[r] for r in sorted(results)], missing


def release(rank: Rank, taken: list[int]) -> None:
    """On rank 0, once the summary is printed: say which ranks it holds (a late rank then prints its own findings),
    and let the ranks it took end (they wait for their file to go)."""
    folder = _job_folder()
    missing = [r for r in range(rank.world_size) if r not in taken]
    if missing:
        with contextlib.suppress(OSError):
            folder.mkdir(parents=True, exist_ok=True)
            partial = folder / f".done.{os.getpid()}.tmp"
            partial.write_text(json.dumps({"taken": sorted(taken)}), encoding="utf-8")
            os.replace(partial, folder / _DONE)
    for other in taken:
        with contextlib.suppress(OSError):
            (folder / f"rank{other}.json").unlink()
    if not missing:
        with contextlib.suppress(OSError):
            (folder / _DONE).unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()


def timeout_seconds() -> float:
    """GRADVIZ_RANK_TIMEOUT, or the default: how long rank 0 waits (messages name it)."""
    return _timeout()
