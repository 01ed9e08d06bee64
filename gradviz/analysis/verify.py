"""--verify's measurements, read off the trace for the findings they explain: per tensor given a gradient, how far
the program's gradient is from the one the saved values would have given had the write not changed them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..model import Event, Trace

#: How many tensors a message names; JSON and SARIF list them all.
SHOWN = 3


@dataclass
class GradientError:
    """One tensor's gradient: the program's against the intact one. `max_rel` is `max_abs` over the largest intact
    value (None where the intact gradient is all zeros and the program's is not); `flipped`: cosine < 0, the update
    goes the other way."""

    tensor: str  # tensor id
    name: str  # as messages name it
    max_abs: float | None
    max_rel: float | None
    cosine: float | None
    flipped: bool = False

    @property
    def identical(self) -> bool:
        return self.max_abs == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tensor": self.tensor, "name": self.name, "max_abs": self.max_abs, "max_rel": self.max_rel,
            "cosine": self.cosine, "flipped": self.flipped,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GradientError:
        return cls(
            str(data["tensor"]), str(data.get("name", data["tensor"])), data.get("max_abs"), data.get("max_rel"),
            data.get("cosine"), bool(data.get("flipped", False)),
        )  # fmt: skip


@dataclass
class Measurement:
    """What --verify measured for a silent write, at the backward that used it (`backward`: its seq), together with
    the other silent writes into the same graph (`writes`); or why it did not (`skipped`)."""

    backward: int | None
    writes: list[int] = field(default_factory=list)
    gradients: list[GradientError] = field(default_factory=list)
    skipped: str | None = None

    @property
    def measured(self) -> bool:
        return self.skipped is None

    @property
    def identical(self) -> bool:
        """Measured, and every gradient came out bit for bit as the intact values give it."""
        return self.measured and all(g.identical for g in self.gradients)

    def badness(self) -> tuple[int, float]:
        """For keeping the worst of several (a loop's repeats): measured errors, then not measured (no claim of
        "identical" for them all), then identical."""
        if not self.measured:
            return (2, 0.0)
        worst = max((g.max_abs if g.max_abs is not None else float("inf") for g in self.gradients), default=0.0)
        return (1, 0.0) if worst == 0 else (3, worst)

    def sentence(self) -> str:
        """The measurement as a message says it."""
        if not self.measured:
            return f"Not measured (--verify): {self.skipped}."
        if self.identical:
            return "Measured with --verify: the write changed values the backward does not read: gradients identical."
        wrong = sorted(
            (g for g in self.gradients if not g.identical),
            key=lambda g: (g.max_rel is not None, g.max_rel or 0.0, g.max_abs or 0.0),
            reverse=True,
        )
        parts = [_one(g) for g in wrong[:SHOWN]]
        if len(wrong) > SHOWN:
            parts.append(f"{len(wrong) - SHOWN} more with errors")
        same = len(self.gradients) - len(wrong)
        if same:
            parts.append(f"{same} other{'s' if same != 1 else ''} identical")
        flipped = [g.name for g in wrong if g.flipped]
        flips = f" The update direction flips for {', '.join(flipped)}." if flipped else ""
        return (
            "Measured with --verify (against the gradients the intact saved values give, same run; relative: to the "
            "largest intact value): " + "; ".join(parts) + "." + flips
        )

    def short(self) -> str:
        """One line for a graph's note."""
        if not self.measured:
            return "not measured (--verify)"
        if self.identical:
            return "measured: gradients identical"
        worst = max(self.gradients, key=lambda g: (g.max_rel is not None, g.max_rel or 0.0, g.max_abs or 0.0))
        rel = f" (relative {_number(worst.max_rel)})" if worst.max_rel is not None else ""
        return f"measured: {worst.name.strip('`')}.grad off by up to {_number(worst.max_abs)}{rel}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"backward": self.backward, "writes": list(self.writes)}
        if self.skipped is not None:
            out["skipped"] = self.skipped
        else:
            out["identical"] = self.identical
            out["gradients"] = [g.to_dict() for g in self.gradients]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        return cls(
            data.get("backward"),
            [int(seq) for seq in data.get("writes", [])],
            [GradientError.from_dict(g) for g in data.get("gradients", [])],
            data.get("skipped"),
        )


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _cosine(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"


def _one(g: GradientError) -> str:
    if g.max_abs is None:
        return f"{g.name}: not comparable (a NaN, an inf or a new shape)"
    rel = f", relative error {_number(g.max_rel)}" if g.max_rel is not None else " (its intact gradient is 0)"
    cosine = f", cosine {_cosine(g.cosine)}" if g.cosine is not None else ""
    return f"{g.name}: max abs error {_number(g.max_abs)}{rel}{cosine}"


def measurement_of(trace: Trace, write: Event, backward: Event | None, name: Callable[[str], str]) -> Measurement | None:
    """What --verify says about the silent write `write`, which `backward` (None: none yet) ran through; None when
    the trace was not made with --verify. `name`: how messages name a tensor."""
    if not trace.verified:
        return None
    if backward is None:
        return Measurement(None, [write.seq], skipped="no backward has run through it")
    record = backward.data.get("verify")
    if not isinstance(record, dict) or write.seq not in record.get("writes", ()):
        why = "gradviz did not see the bytes before this write" if "verify_kept" not in write.data else (
            "the bytes kept were let go before this backward"
        )
        if write.data.get("backward") == backward.seq:  # (a custom Function's backward wrote it: functions.py)
            why = "the write was made inside this backward (its measurement runs before it)"
        return Measurement(backward.seq, [write.seq], skipped=why)
    writes = [int(seq) for seq in record.get("writes", [])]
    if record.get("skipped"):
        return Measurement(backward.seq, writes, skipped=str(record["skipped"]))
    rows = [
        GradientError(
            row["tensor"], name(row["tensor"]) if row["tensor"] in trace.tensors else row["tensor"],
            row.get("max_abs"), row.get("max_rel"), row.get("cosine"), bool(row.get("flipped", False)),
        )
        for row in record.get("gradients", [])
        if isinstance(row, dict) and "tensor" in row
    ]  # fmt: skip
    return Measurement(backward.seq, writes, rows)


def then_sentence(measured: Measurement | None, backward_line: str, default: str) -> str:
    """The sentence after "had its bytes changed ...": `default` (the backward used them: gradients silently
    wrong), or what --verify measured."""
    if measured is None or measured.backward is None:  # (no backward yet: the default sentence says so)
        return default
    if measured.measured and measured.identical and measured.backward is not None:
        return f"The backward at {backward_line} ran through it. {measured.sentence()}"
    return f"{default} {measured.sentence()}"
