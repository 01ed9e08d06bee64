"""The gallery builder over a temporary copy of a few examples: files, pages, cache, declared-findings check."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gradviz.integrations.gallery import CACHE_NAME, GalleryError, build, parse_example

pytestmark = pytest.mark.dot

EXAMPLES = ("plot_02_data_silent", "plot_03_detach_raises")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def src(tmp_path: Path, gallery: Path) -> Path:
    folder = tmp_path / "gallery"
    folder.mkdir()
    for name in EXAMPLES:
        shutil.copy(gallery / f"{name}.py", folder / f"{name}.py")
    return folder


@pytest.fixture
def built(src: Path) -> tuple[Path, Path, dict]:
    out = src / "_build"
    results = {r.name: r for r in build(src, out, progress=False)}
    return src, out, results


def test_docstring_declarations_are_read(gallery: Path) -> None:
    example = parse_example(gallery / "plot_03_detach_raises.py")
    assert example.title == "Writing through .detach(): autograd notices"
    assert example.findings == {"poisoned_saved_tensor"}
    assert example.raises == "RuntimeError"
    clean = parse_example(gallery / "plot_19_clean_training_loop.py")
    assert clean.findings == frozenset() and clean.raises is None


def test_unknown_finding_kind_is_named(tmp_path: Path) -> None:
    script = tmp_path / "plot_x.py"
    script.write_text('"""\nT\n=\n\nFindings: cut_edges\nRaises: none\n"""\n', encoding="utf-8")
    with pytest.raises(GalleryError, match="unknown finding kind 'cut_edges'"):
        parse_example(script)


def test_results_match_docstrings(built: tuple[Path, Path, dict]) -> None:
    _, _, results = built
    assert results["plot_03_detach_raises"].raised == "RuntimeError"
    assert results["plot_03_detach_raises"].findings == ["poisoned_saved_tensor"]
    assert results["plot_02_data_silent"].raised is None
    assert results["plot_02_data_silent"].findings == ["silently_corrupted_saved_tensor"]
    assert all(r.mismatch is None and r.rebuilt for r in results.values())


def test_images_pages_and_index(built: tuple[Path, Path, dict]) -> None:
    src, out, _ = built
    graph = (out / "plot_03_detach_raises" / "graph.svg").read_text(encoding="utf-8")
    assert graph.lstrip().startswith("<?xml") and "<svg" in graph
    assert "TanhBackward0" in graph and "saved v0, now v1," in graph  # the poisoned saved tensor annotation
    memory = (out / "plot_02_data_silent" / "memory.svg").read_text(encoding="utf-8")
    assert "fresh counter (made by .data)" in memory
    for name in EXAMPLES:
        for view in ("graph", "memory"):
            assert (out / name / f"{view}.png").read_bytes()[:8] == PNG_MAGIC
        assert "<!DOCTYPE html>" in (out / name / "report.html").read_text(encoding="utf-8")

    page = (out / "plot_03_detach_raises.html").read_text(encoding="utf-8")
    assert "c = out.detach()  # shares out&#x27;s memory and its version counter" in page  # the code
    assert "tensor([0., 0., 0.], grad_fn=&lt;TanhBackward0&gt;)" in page  # what it printed
    assert "RuntimeError: one of the variables needed for gradient computation" in page  # and how it failed
    assert '<span class="kind">poisoned_saved_tensor</span>' in page
    assert '<img src="plot_03_detach_raises/graph.svg"' in page

    index = (out / "index.html").read_text(encoding="utf-8")
    for name in EXAMPLES:
        assert f'href="{name}.html"' in index and f'src="{name}/graph.png"' in index
    assert "http://" not in index and "https://" not in index  # self-contained

    readme = (src / "README.md").read_text(encoding="utf-8")
    assert "![graph view of plot_03_detach_raises](images/plot_03_detach_raises_graph.svg)" in readme
    assert (src / "images" / "plot_03_detach_raises_graph.svg").read_bytes() == (
        out / "plot_03_detach_raises" / "graph.svg"
    ).read_bytes()
    assert (src / "images" / "plot_02_data_silent_memory.png").read_bytes()[:8] == PNG_MAGIC


def test_rebuilds_only_changed_examples(built: tuple[Path, Path, dict]) -> None:
    src, out, _ = built
    assert (out / CACHE_NAME).is_file()
    again = build(src, out, progress=False)
    assert [r.rebuilt for r in again] == [False, False]
    assert [r.findings for r in again] == [["silently_corrupted_saved_tensor"], ["poisoned_saved_tensor"]]

    script = src / "plot_02_data_silent.py"
    script.write_text(script.read_text(encoding="utf-8") + "\nprint('one more line')\n", encoding="utf-8")
    changed = {r.name: r.rebuilt for r in build(src, out, progress=False)}
    assert changed == {"plot_02_data_silent": True, "plot_03_detach_raises": False}
    assert "one more line" in (out / "plot_02_data_silent.html").read_text(encoding="utf-8")

    assert all(r.rebuilt for r in build(src, out, force=True, progress=False))


def test_wrong_declaration_fails_naming_the_example(src: Path) -> None:
    script = src / "plot_02_data_silent.py"
    script.write_text(
        script.read_text(encoding="utf-8").replace("Findings: silently_corrupted_saved_tensor", "Findings: cut_edge"),
        encoding="utf-8",
    )
    results = {r.name: r for r in build(src, src / "_build", progress=False)}
    assert results["plot_02_data_silent"].mismatch == (
        "findings differ (declared but not found: cut_edge; found but not declared: silently_corrupted_saved_tensor)"
    )
    assert results["plot_03_detach_raises"].mismatch is None

    done = subprocess.run(
        [sys.executable, "-m", "gradviz.integrations.gallery", str(src), "-o", str(src / "_build")],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 1
    assert "gradviz gallery: plot_02_data_silent: findings differ" in done.stderr
    assert "plot_03_detach_raises" not in done.stderr
    assert "2 examples (0 rebuilt, 1 mismatched)" in done.stdout  # the mismatch is remembered by the cache


def test_missing_expected_exception_is_a_mismatch(src: Path) -> None:
    script = src / "plot_03_detach_raises.py"
    script.write_text(script.read_text(encoding="utf-8").replace("c = out.detach()", "c = out.detach().clone()"), encoding="utf-8")
    results = {r.name: r for r in build(src, src / "_build", progress=False)}
    assert results["plot_03_detach_raises"].raised is None
    assert "raised nothing, docstring says Raises: RuntimeError" in (results["plot_03_detach_raises"].mismatch or "")


def test_command_line_as_a_user_runs_it(src: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gradviz.integrations.gallery", str(src)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "2 examples (2 rebuilt, 0 mismatched)" in done.stdout
    assert (src / "_build" / "index.html").is_file()
    missing = subprocess.run(
        [sys.executable, "-m", "gradviz.integrations.gallery", str(src / "nope")], capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 2
    assert "no such gallery folder" in missing.stderr


def test_gradviz_gallery_command(src: Path) -> None:
    from gradviz.cli.command import COMMANDS

    assert "gallery" in COMMANDS
    done = subprocess.run(
        [sys.executable, "-m", "gradviz", "gallery", str(src), "-o", str(src / "out"), "-q"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (src / "out" / "plot_03_detach_raises" / "graph.svg").is_file()
