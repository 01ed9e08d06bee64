"""The gallery builder: trace every `plot_*.py` example, check its declared findings, draw it, index it."""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import html
import io
import json
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cli.terminal import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE
from ..text import safe_str, type_name

if TYPE_CHECKING:
    from ..analysis.findings import Finding
    from ..model import Trace

__all__ = ["Example", "GalleryError", "Result", "add_arguments", "build", "main", "parse_example", "run"]

#: The document's examples: all their images are copied into SRC/images (the others: their graph), so the
#: committed READMEs show them.
DOCUMENT_EXAMPLES = ("plot_01_testdetach", "plot_02_data_silent", "plot_03_detach_raises")
VIEWS = ("graph", "memory")
IMAGE_FORMATS = ("svg", "png")
CACHE_NAME = ".gradviz-cache.json"
# bump when the builder's output changes shape, so old caches rebuild everything
BUILDER_VERSION = "1"


class GalleryError(ValueError):
    """The gallery cannot be built as asked (no such folder, an example without its declarations...)."""


@dataclass(frozen=True)
class Example:
    """What an example's docstring declares: its title, explanation, finding kinds and expected exception."""

    name: str
    path: Path
    title: str
    explanation: str
    findings: frozenset[str]
    raises: str | None


@dataclass
class Result:
    """One example after a build: what it declared, what happened, where its files are."""

    name: str
    title: str
    declared_findings: list[str]
    declared_raises: str | None
    findings: list[str] = field(default_factory=list)  # the kinds found, sorted
    messages: list[str] = field(default_factory=list)  # "kind (line N): message" per finding
    raised: str | None = None  # the exception type the example raised, None if it finished
    raised_message: str = ""
    output: str = ""  # what the example printed (stdout and stderr, interleaved)
    rebuilt: bool = False  # False when the cache said the source had not changed
    source_hash: str = ""
    error: str | None = None  # gradviz's own failure while building this example

    @property
    def mismatch(self) -> str | None:
        """Why the example disagrees with its docstring, or None when it agrees."""
        problems = []
        if self.error is not None:
            problems.append(f"could not be built: {self.error}")
        declared, found = set(self.declared_findings), set(self.findings)
        if declared != found:
            missing, extra = sorted(declared - found), sorted(found - declared)
            parts = []
            if missing:
                parts.append(f"declared but not found: {', '.join(missing)}")
            if extra:
                parts.append(f"found but not declared: {', '.join(extra)}")
            problems.append("findings differ (" + "; ".join(parts) + ")")
        if self.raised != self.declared_raises:
            problems.append(f"raised {self.raised or 'nothing'}, docstring says Raises: {self.declared_raises or 'none'}")
        return "; ".join(problems) or None


# ---------------------------------------------------------------------------------------------- docstrings
def parse_example(path: Path) -> Example:
    """Read an example's docstring: rst title, explanation, `Findings:` and `Raises:` lines."""
    text = path.read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(text, filename=str(path))) or ""
    lines = doc.splitlines()
    title = ""
    body: list[str] = []
    findings: frozenset[str] | None = None
    raises: str | None | bool = False  # False: not declared
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not title and stripped and not _is_underline(stripped):
            title = stripped
            continue
        if stripped.startswith("Findings:"):
            value = stripped[len("Findings:") :].strip()
            kinds = [k.strip() for k in value.split(",") if k.strip()]
            findings = frozenset() if kinds in ([], ["none"]) else frozenset(kinds)
        elif stripped.startswith("Raises:"):
            value = stripped[len("Raises:") :].strip()
            raises = None if value in ("", "none") else value
        elif title and not _is_underline(stripped):
            body.append(line)
    if findings is None or raises is False:
        raise GalleryError(
            f"{path.name}: the docstring must end with a `Findings: kind, kind` (or `none`) line and a "
            f"`Raises: ExceptionType` (or `none`) line"
        )
    _check_kinds(path, findings)
    return Example(
        name=path.stem,
        path=path,
        title=title or path.stem,
        explanation="\n".join(body).strip(),
        findings=findings,
        raises=raises if isinstance(raises, str) else None,
    )


def _is_underline(text: str) -> bool:
    return len(set(text)) == 1 and text[0] in "=-~^*#+"


def _check_kinds(path: Path, kinds: frozenset[str]) -> None:
    from ..analysis.findings import FindingKind

    valid = {k.value for k in FindingKind}
    unknown = sorted(kinds - valid)
    if unknown:
        raise GalleryError(
            f"{path.name}: unknown finding kind {unknown[0]!r} in `Findings:`; choose from {', '.join(sorted(valid))}"
        )


# ---------------------------------------------------------------------------------------------- building
def build(src: str | os.PathLike[str] = "gallery", out: str | os.PathLike[str] | None = None, *,
          force: bool = False, progress: bool = True) -> list[Result]:
    """Build the gallery of `src/plot_*.py` into `out` (default `src/_build`); returns one Result per example.

    Only examples whose source changed since the last build are traced again (`force` rebuilds all).
    Also writes `out/index.html`, `src/README.md` and the document examples' images into `src/images/`.
    """
    src = Path(src)
    out = Path(out) if out is not None else src / "_build"
    if not src.is_dir():
        raise GalleryError(f"no such gallery folder: {str(src)!r}")
    scripts = sorted(src.glob("plot_*.py"))
    if not scripts:
        raise GalleryError(f"no plot_*.py examples in {str(src)!r}")
    examples = [parse_example(path) for path in scripts]
    out.mkdir(parents=True, exist_ok=True)
    cache_path = out / CACHE_NAME
    cache = _load_cache(cache_path)
    results: list[Result] = []
    with _progress_bar(len(examples), enabled=progress) as advance:
        for example in examples:
            advance(example.name, 0)
            digest = _source_hash(example.path)
            cached = cache.get(example.name)
            if not force and cached is not None and cached.get("source_hash") == digest and _outputs_exist(out, example.name):
                result = Result(**{k: v for k, v in cached.items() if k in Result.__dataclass_fields__})
                result.rebuilt = False
            else:
                result = _build_one(example, out, digest)
                cache[example.name] = {k: v for k, v in asdict(result).items() if k != "rebuilt"}
            results.append(result)
            advance(example.name, 1)
    # forget examples that were removed from the gallery
    cache = {name: cache[name] for name in (r.name for r in results)}
    cache_path.write_text(json.dumps({"builder": BUILDER_VERSION, "examples": cache}, indent=1, ensure_ascii=False), encoding="utf-8")
    _copy_document_images(results, out, src / "images")
    (out / "index.html").write_text(_index_html(results), encoding="utf-8")
    (src / "README.md").write_text(_readme(results, src, out), encoding="utf-8")
    return results


def _build_one(example: Example, out: Path, digest: str) -> Result:
    from ..analysis import diagnosis
    from ..picture.picture import Picture
    from ..render import render
    from ..tracer import trace_script

    result = Result(
        name=example.name,
        title=example.title,
        declared_findings=sorted(example.findings),
        declared_raises=example.raises,
        rebuilt=True,
        source_hash=digest,
    )
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            trace = trace_script(example.path)
    except Exception as exc:  # noqa: BLE001 - gradviz could not run it at all
        result.error = f"{type_name(exc)}: {safe_str(exc)}"
        return result
    result.output = captured.getvalue()
    if trace.exception is not None and not _clean_exit(trace):
        result.raised = trace.exception.type
        result.raised_message = trace.exception.message
        result.output += _script_traceback(trace)
    try:
        diagnosed = diagnosis(trace)
        findings = diagnosed.findings
        # one picture for every view and format: the lifetimes and names the analysis computed, derived once
        picture = Picture(trace, findings, life=diagnosed.lifetimes, namer=diagnosed.namer)
        result.findings = sorted({f.kind.value for f in findings})
        result.messages = [_finding_line(f) for f in findings]
        folder = out / example.name
        folder.mkdir(parents=True, exist_ok=True)
        for view in VIEWS:
            diagram = render(trace, view, findings=findings, picture=picture)
            for fmt in IMAGE_FORMATS:
                diagram.save(folder / f"{view}.{fmt}")
        render(trace, "report", findings=findings, picture=picture).save(folder / "report.html")
        (out / f"{example.name}.html").write_text(_example_html(example, result, trace), encoding="utf-8")
    except Exception as exc:  # noqa: BLE001 - a gradviz bug or a missing `dot`: name it, keep building the others
        result.error = f"{type_name(exc)}: {safe_str(exc)}"
    return result


def _clean_exit(trace: Trace) -> bool:
    exception = trace.exception
    return exception is not None and exception.type == "SystemExit" and exception.exit_code == 0


def _script_traceback(trace: Trace) -> str:
    assert trace.exception is not None
    return trace.exception.traceback or f"{trace.exception.type}: {trace.exception.message}\n"


def _finding_line(finding: Finding) -> str:
    where = f" (line {finding.line})" if finding.line is not None else ""
    return f"{finding.kind.value}{where}: {finding.message}"


def _source_hash(path: Path) -> str:
    return hashlib.sha256(BUILDER_VERSION.encode() + path.read_bytes()).hexdigest()


def _outputs_exist(out: Path, name: str) -> bool:
    files = [out / f"{name}.html", out / name / "report.html"]
    files += [out / name / f"{view}.{fmt}" for view in VIEWS for fmt in IMAGE_FORMATS]
    return all(f.is_file() for f in files)


def _load_cache(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("builder") != BUILDER_VERSION:
        return {}
    examples = data.get("examples")
    return examples if isinstance(examples, dict) else {}


def _committed_images(name: str) -> list[tuple[str, str]]:
    """(view, format) of the images kept in SRC/images: every view of the document's examples, the graph of others."""
    if name in DOCUMENT_EXAMPLES:
        return [(view, fmt) for view in VIEWS for fmt in IMAGE_FORMATS]
    return [("graph", "svg")]


def _copy_document_images(results: list[Result], out: Path, images: Path) -> None:
    for result in results:
        if result.error is not None:
            continue
        images.mkdir(parents=True, exist_ok=True)
        for view, fmt in _committed_images(result.name):
            source = out / result.name / f"{view}.{fmt}"
            target = images / f"{result.name}_{view}.{fmt}"
            if not target.exists() or target.read_bytes() != source.read_bytes():
                shutil.copyfile(source, target)


@contextlib.contextmanager
def _progress_bar(total: int, *, enabled: bool) -> Iterator[Any]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    console = Console(stderr=True)
    if not enabled or not console.is_terminal:
        yield lambda name, step: None
        return
    with Progress(TextColumn("gallery"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                  console=console, transient=True) as bar:
        task = bar.add_task("", total=total)
        yield lambda name, step: bar.update(task, advance=step, description=name)


# ---------------------------------------------------------------------------------------------- pages
_PAGE_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;padding:0 1em;color:#222}
pre{background:#f6f8fa;padding:.8em;overflow:auto;font-size:.9em}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(16em,1fr));gap:1em}
.card{border:1px solid #ddd;border-radius:6px;padding:.6em;text-decoration:none;color:inherit}
.card img{width:100%;height:12em;object-fit:contain}
.bad{color:#b00020;font-weight:bold}
.kind{font-family:monospace;background:#eef;padding:0 .3em}
figure img{max-width:100%}
"""


def _page(title: str, body: str) -> str:
    return (
        f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
        f"<style>{_PAGE_CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def _kinds_html(kinds: list[str]) -> str:
    return " ".join(f'<span class="kind">{html.escape(k)}</span>' for k in kinds) or "no findings"


def _example_html(example: Example, result: Result, trace: Trace) -> str:
    name = html.escape(example.name)
    parts = [
        '<p><a href="index.html">&larr; gallery</a></p>',
        f"<h1>{html.escape(example.title)}</h1>",
        f"<pre style=\"background:none;white-space:pre-wrap\">{html.escape(example.explanation)}</pre>",
        f"<p>Findings: {_kinds_html(result.findings)}"
        + (f" &middot; raised <code>{html.escape(result.raised)}</code>" if result.raised else "")
        + "</p>",
    ]
    if result.messages:
        parts.append("<ul>" + "".join(f"<li>{html.escape(m)}</li>" for m in result.messages) + "</ul>")
    for view in VIEWS:
        parts.append(
            f'<figure><figcaption>{view} view (<a href="{name}/{view}.svg">SVG</a>, '
            f'<a href="{name}/{view}.png">PNG</a>)</figcaption><img src="{name}/{view}.svg" alt="{view} view of {name}"></figure>'
        )
    parts.append(f'<p><a href="{name}/report.html">Full report (graph, memory, timeline)</a></p>')
    parts.append(f"<h2>Code</h2><pre><code>{html.escape(example.path.read_text(encoding='utf-8'))}</code></pre>")
    parts.append(f"<h2>Output</h2><pre>{html.escape(result.output) or '(nothing printed)'}</pre>")
    return _page(example.title, "\n".join(parts))


def _index_html(results: list[Result]) -> str:
    cards = []
    for r in results:
        name = html.escape(r.name)
        status = f'<p class="bad">{html.escape(r.mismatch or "")}</p>' if r.mismatch else ""
        thumb = f'<img src="{name}/graph.png" alt="graph of {name}">' if r.error is None else ""
        cards.append(
            f'<a class="card" href="{name}.html">{thumb}<h3>{html.escape(r.title)}</h3>'
            f"<p>{_kinds_html(r.findings)}</p>{status}</a>"
        )
    body = (
        "<h1>gradviz gallery</h1><p>Each example is traced by gradviz; click one for its code, output, findings and diagrams.</p>"
        f'<div class="grid">{"".join(cards)}</div>'
    )
    return _page("gradviz gallery", body)


def _readme(results: list[Result], src: Path, out: Path) -> str:
    out_rel = Path(os.path.relpath(out.resolve(), src.resolve())).as_posix()
    lines = [
        "# gradviz gallery",
        "",
        "<!-- generated by `gradviz gallery`; edit the examples' docstrings, not this file -->",
        "",
        "Each `plot_*.py` script runs on its own with `python`. `gradviz gallery` traces them all, checks that each",
        "produces the findings its docstring declares, and draws its autograd graph and memory.",
        f"The HTML gallery (code, output, findings, diagrams) is `{out_rel}/index.html`.",
        "",
    ]
    for r in results:
        lines += [f"## {r.title}", "", f"[`{r.name}.py`]({r.name}.py)"]
        lines.append("")
        found = ", ".join(f"`{k}`" for k in r.findings) or "none"
        lines.append(f"Findings: {found}" + (f" · raises `{r.raised}`" if r.raised else ""))
        lines.append("")
        for view in dict.fromkeys(v for v, _ in _committed_images(r.name)):
            lines.append(f"![{view} view of {r.name}](images/{r.name}_{view}.svg)")
            lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- command
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `gradviz gallery`."""
    parser.add_argument("src", nargs="?", default="gallery", help="the folder of plot_*.py examples (default: gallery)")
    parser.add_argument("-o", "--output", default=None, help="where to write the HTML gallery (default: SRC/_build)")
    parser.add_argument("--force", action="store_true", help="rebuild every example, not only the changed ones")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar and no summary line")


def run(args: argparse.Namespace) -> int:
    """Run `gradviz gallery`: 0 when every example matches its docstring, 1 naming those that do not, 2 on usage errors."""
    try:
        results = build(args.src, args.output, force=args.force, progress=not args.quiet)
    except GalleryError as exc:
        print(f"gradviz gallery: error: {safe_str(exc)}", file=sys.stderr)
        return EXIT_USAGE
    bad = [r for r in results if r.mismatch]
    for r in bad:
        print(f"gradviz gallery: {r.name}: {r.mismatch}", file=sys.stderr)
    if not args.quiet:
        rebuilt = sum(r.rebuilt for r in results)
        out = args.output or os.path.join(args.src, "_build")
        print(f"{len(results)} examples ({rebuilt} rebuilt, {len(bad)} mismatched); open {os.path.join(out, 'index.html')}")
    return EXIT_FINDINGS if bad else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gradviz.integrations.gallery", description="Build the gradviz gallery.")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
