"""--verify's measurements, read off the trace for the findings they explain: per tensor given a gradient, how far
the program's gradient is from the one the saved values would have given had the write not changed them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model import Event, Trace
from .names import number_ranges

#: How many tensors a message names; JSON and SARIF list them all.
SHOWN = 3


@dataclass
class GradientError:
    """One tensor's gradient: the program's against the intact one. `max_rel` is `max_abs` over the largest intact
    value (None where the intact gradient is all zeros and the program's is not); `flipped`: cosine < 0, the update
    goes the other way; `norm_ratio`: |program's| / |intact| (0.16: gradients 6x too small, which a cosine near 1
    does not show); `written`: the tensor the write went into (always listed)."""

    tensor: str  # tensor id
    name: str  # as messages name it
    max_abs: float | None
    max_rel: float | None
    cosine: float | None
    flipped: bool = False
    norm_ratio: float | None = None
    written: bool = False

    @property
    def identical(self) -> bool:
        return self.max_abs == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tensor": self.tensor, "name": self.name, "max_abs": self.max_abs, "max_rel": self.max_rel,
            "cosine": self.cosine, "flipped": self.flipped, "norm_ratio": self.norm_ratio, "written": self.written,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GradientError:
        return cls(
            str(data["tensor"]), str(data.get("name", data["tensor"])), data.get("max_abs"), data.get("max_rel"),
            data.get("cosine"), bool(data.get("flipped", False)), data.get("norm_ratio"), bool(data.get("written", False)),
        )  # fmt: skip


@dataclass
class Measurement:
    """What --verify measured for a silent write, at the backward that used it (`backward`: its seq; `step`: the step
    it starts, as the views number steps), together with the other silent writes into the same graph (`writes`); or
    why it did not (`skipped`). A loop's repeats keep the worst: `steps` are all the steps measured at its line, and
    `elsewhere_max_rel` the largest relative error among the others (0: identical there)."""

    backward: int | None
    writes: list[int] = field(default_factory=list)
    gradients: list[GradientError] = field(default_factory=list)
    skipped: str | None = None
    step: int | None = None
    steps: list[int] = field(default_factory=list)
    elsewhere_max_rel: float | None = None
    # several silent writes into the graph: this one undone alone, the others (their lines) left in place
    alone: bool = False
    others: list[int] = field(default_factory=list)  # the lines of the other writes
    together: bool = False  # they overlap this one: all undone together

    @property
    def measured(self) -> bool:
        return self.skipped is None

    @property
    def identical(self) -> bool:
        """Measured, and every gradient came out bit for bit as the intact values give it."""
        return self.measured and all(g.identical for g in self.gradients)

    def badness(self) -> tuple[int, float, float]:
        """For keeping the worst of several (a loop's repeats): measured errors (the largest relative error, then
        absolute), then not measured (no claim of "identical" for them all), then identical."""
        if not self.measured:
            return (2, 0.0, 0.0)
        worst = max((g.max_abs if g.max_abs is not None else float("inf") for g in self.gradients), default=0.0)
        rel = self.worst_rel()
        return (1, 0.0, 0.0) if worst == 0 else (3, rel if rel is not None else float("inf"), worst)

    def worst_rel(self) -> float | None:
        """The largest relative error of its gradients (0 when identical; None when not measured or not comparable)."""
        if not self.measured:
            return None
        values = [g.max_rel for g in self.gradients if not g.identical]
        if any(v is None for v in values):
            return None
        return max((v for v in values if v is not None), default=0.0)

    def merge(self, other: Measurement) -> Measurement:
        """This and a repeat of it (the same write, another step): the worse, naming every step measured."""
        worst, best = (other, self) if other.badness() > self.badness() else (self, other)
        steps = sorted({*self.covered(), *other.covered()})
        rels = [r for r in (best.worst_rel(), self.elsewhere_max_rel, other.elsewhere_max_rel) if r is not None]
        merged = Measurement(worst.backward, worst.writes, worst.gradients, worst.skipped, worst.step, steps)
        merged.alone, merged.others, merged.together = worst.alone, worst.others, worst.together
        merged.elsewhere_max_rel = max(rels) if rels else None
        return merged

    def covered(self) -> list[int]:
        """The steps measured: its own, and its repeats' once merged."""
        return self.steps or ([self.step] if self.step is not None and self.measured else [])

    def where(self) -> str:
        """`at step 3`, `at step 3 (the worst of 24 steps measured; at the other 23 relative error at most 1e-05)`."""
        if self.step is None:
            return ""
        out = f" at step {self.step}"
        covered = self.covered()
        if len(covered) > 1:
            others = len(covered) - 1
            rest = self.elsewhere_max_rel
            if rest == 0:
                tail = f"gradients identical at the other {others}"
            elif rest is None:
                tail = f"the other {others} not comparable"
            else:
                tail = f"at the other {others} relative error at most {_number(rest)}"
            if self.identical:
                out = f" at steps {number_ranges(covered)}" if rest == 0 else out + f" (of {len(covered)} steps measured; {tail})"
            else:
                out += f" (the worst of {len(covered)} steps measured; {tail})"
        return out

    def _alone(self) -> str:
        lines = ", ".join(str(line) for line in self.others)
        other = "write" if len(self.others) == 1 else "writes"
        if self.alone:
            return f", undoing this line's write alone (the other silent {other} into this graph, line {lines}, left in place)"
        if self.together:
            return f", undoing it together with the other silent {other} into this graph (line {lines}, kept in the same copy of the bytes)"
        return ""

    def sentence(self) -> str:
        """The measurement as a message says it."""
        if not self.measured:
            return f"Not measured (--verify){self.where()}: {self.skipped}."
        if self.identical:
            return (
                f"Measured with --verify{self.where()}{self._alone()}: the write changed values the backward does not "
                "read: gradients identical."
            )
        wrong = sorted(
            (g for g in self.gradients if not g.identical),
            key=lambda g: (g.max_rel is not None, g.max_rel or 0.0, g.max_abs or 0.0),
            reverse=True,
        )
        shown = wrong[:SHOWN]
        written = [g for g in self.gradients if g.written and g not in shown]  # never folded into "N more"
        parts = [_one(g) for g in shown + written]
        more = len([g for g in wrong[SHOWN:] if g not in written])
        if more:
            parts.append(f"{more} more with errors")
        same = len([g for g in self.gradients if g.identical and g not in written])
        if same:
            parts.append(f"{same} other{'s' if same != 1 else ''} identical")
        flipped = [_code(g.name) for g in wrong if g.flipped]
        flips = f" The update direction flips for {', '.join(flipped)}." if flipped else ""
        return (
            f"Measured with --verify{self.where()}{self._alone()}, against the gradients the intact saved values give "
            "in the same run (relative: to the largest intact value; norm ratio: |gradient| / |intact gradient|): "
            + "; ".join(parts) + "." + flips
        )  # fmt: skip

    def short(self, gradient: GradientError | None = None) -> str:
        """One line for a graph's note; `gradient`: the one to name (the note's node's own), else the worst."""
        at = f" at step {self.step}" if self.step is not None else ""
        if len(self.covered()) > 1:
            at += f" (worst of {len(self.covered())})" if not self.identical else ""
        if not self.measured:
            return f"not measured (--verify){at}"
        if self.identical:
            return f"measured{self.where() if len(self.covered()) > 1 else at}: gradients identical"
        worst = gradient or max(self.gradients, key=lambda g: (g.max_rel is not None, g.max_rel or 0.0, g.max_abs or 0.0))
        rel = f" (relative {_number(worst.max_rel)}" if worst.max_rel is not None else " ("
        ratio = f"norm ratio {_number(worst.norm_ratio)}" if worst.norm_ratio is not None else ""
        detail = (rel + (", " if rel != " (" and ratio else "") + ratio + ")") if (rel != " (" or ratio) else ""
        return f"measured{at}: {worst.name}.grad off by up to {_number(worst.max_abs)}{detail}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"backward": self.backward, "writes": list(self.writes)}
        if self.step is not None:
            out["step"] = self.step
            out["steps"] = list(self.steps)
            if self.elsewhere_max_rel is not None:
                out["elsewhere_max_rel"] = self.elsewhere_max_rel
        if self.alone or self.together:
            out["alone" if self.alone else "together"] = True
            out["other_lines"] = list(self.others)
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
            data.get("step"),
            [int(n) for n in data.get("steps", [])],
            data.get("elsewhere_max_rel"),
            bool(data.get("alone", False)),
            [int(n) for n in data.get("other_lines", [])],
            bool(data.get("together", False)),
        )



def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _cosine(value: float) -> str:
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"


def _code(name: str) -> str:
    """A gradient's tensor name as the messages write code: `fc2.weight`; a phrase ("a view of h") as it is."""
    return name if " " in name else f"`{name}`"


def _one(g: GradientError) -> str:
    name = _code(g.name)
    if g.max_abs is None:
        return f"{name}: not comparable (a NaN, an inf or a new shape)"
    rel = f", relative error {_number(g.max_rel)}" if g.max_rel is not None else " (its intact gradient is 0)"
    if g.identical:
        return f"{name} (written): identical"
    cosine = f", cosine {_cosine(g.cosine)}" if g.cosine is not None else ""
    ratio = f", norm ratio {_number(g.norm_ratio)}" if g.norm_ratio is not None else ""
    return f"{name}: max abs error {_number(g.max_abs)}{rel}{cosine}{ratio}"


def measurement_of(
    trace: Trace, write: Event, backward: Event | None, name: Callable[[str], str], *, step: int | None = None,
    written: Sequence[str] = (),
) -> Measurement | None:
    """What --verify says about the silent write `write`, which `backward` (None: none yet) ran through, in step
    `step`; None when the trace was not made with --verify. `name`: how messages name a tensor; `written`: the
    tensors the write went into (a gradient of a tensor on their memory is always listed)."""
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
        return Measurement(backward.seq, [write.seq], skipped=why, step=step)
    writes = [int(seq) for seq in record.get("writes", [])]
    if record.get("skipped"):
        return Measurement(backward.seq, writes, skipped=str(record["skipped"]), step=step)
    alone = record.get("alone", {}).get(str(write.seq)) if isinstance(record.get("alone"), dict) else None
    others: list[int] = []
    if isinstance(alone, dict):  # several writes into the graph: this one's own effect
        lines = {e.seq: e.location.line for e in trace.events if e.seq in writes and e.location is not None}
        others = sorted({lines[seq] for seq in writes if seq != write.seq and seq in lines})
        if alone.get("skipped"):  # the writes overlap: measured together, and said so
            alone = None
        else:
            record = alone
    tensors = trace.tensors
    memory = {tensors[t].storage for t in written if t in tensors and tensors[t].storage is not None}
    rows = [
        GradientError(
            # the name as data: the backticks of the messages' Markdown belong to the text medium only (`_code`)
            row["tensor"], (name(row["tensor"]) if row["tensor"] in tensors else row["tensor"]).replace("`", ""),
            row.get("max_abs"), row.get("max_rel"), row.get("cosine"), bool(row.get("flipped", False)),
            row.get("norm_ratio"),
            row["tensor"] in written or (row["tensor"] in tensors and tensors[row["tensor"]].storage in memory),
        )
        for row in record.get("gradients", [])
        if isinstance(row, dict) and "tensor" in row
    ]  # fmt: skip
    steps = [step] if step is not None else []
    return Measurement(
        backward.seq, writes, rows, step=step, steps=steps, alone=isinstance(alone, dict), others=others,
        together=bool(others) and not isinstance(alone, dict),
    )  # fmt: skip


def then_sentence(measured: Measurement | None, backward_line: str, default: str) -> str:
    """The sentence after "had its bytes changed ...": `default` (the backward used them: gradients silently
    wrong), or what --verify measured."""
    if measured is None or measured.backward is None:  # (no backward yet: the default sentence says so)
        return default
    if measured.measured and measured.identical and measured.backward is not None:
        return f"The backward at {backward_line} ran through it. {measured.sentence()}"
    return f"{default} {measured.sentence()}"
