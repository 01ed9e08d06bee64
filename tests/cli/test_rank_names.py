"""Output names per torchrun rank, and which processes count as ranks (fast: no torchrun here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradviz.cli.options import Options
from gradviz.cli.ranks import Rank, current_rank


def output_paths(options: Options, stem: str, *, rank: int | None = None) -> list[Path]:
    return options.output_paths(stem, rank=rank)


def _options(*outputs: str, view: str = "graph") -> Options:
    return Options("render", output=outputs, view=view)


def test_output_names_per_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert output_paths(_options(), "train") == [tmp_path / "train.gradviz.svg"]
    assert output_paths(_options(), "train", rank=1) == [tmp_path / "train.rank1.gradviz.svg"]
    assert output_paths(_options(view="report"), "train", rank=0) == [tmp_path / "train.rank0.gradviz.html"]
    assert output_paths(_options("g.{rank}.svg", "out/t.json"), "train", rank=3) == [
        tmp_path / "g.3.svg",
        tmp_path / "out" / "t.rank3.json",
    ]
    assert output_paths(_options("a.svg", "b.html"), "train") == [tmp_path / "a.svg", tmp_path / "b.html"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"WORLD_SIZE": "1", "RANK": "0"}, None),
        ({"WORLD_SIZE": "4", "RANK": "2"}, Rank(2, 4)),
        ({"WORLD_SIZE": "2", "RANK": "5"}, None),
        ({"WORLD_SIZE": "two", "RANK": "0"}, None),
    ],
)
def test_current_rank_reads_torchruns_environment(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: Rank | None) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert current_rank() == expected
