"""The HTML report: self-contained, findings, inline SVG views, marked source, and a working step-through."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import select
import shutil
import struct
import subprocess
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import graphviz
import pytest

import gradviz
from gradviz.model import Trace
from gradviz.render.report import report_html

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def data_report(data_trace: Trace) -> str:
    return report_html(data_trace, gradviz.diagnose(data_trace))


def step_panel(page: str, number: int) -> str:
    match = re.search(rf'<div class="step[^"]*" id="step-{number}".*?(?=<div class="step|</section>)', page, re.S)
    assert match, f"no step {number}"
    return match.group(0)


def text_of(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


# ---------------------------------------------------------------------- content
@pytest.mark.dot
@needs_dot
def test_report_is_self_contained_with_inline_svg(data_report: str) -> None:
    assert data_report.startswith("<!DOCTYPE html>")
    assert "http://" not in data_report and "https://" not in data_report
    assert not re.search(r"<link|<img|<iframe|@import|url\(|\ssrc=", data_report)
    assert data_report.count("<svg") == 4
    for view in ("graph", "memory", "timeline", "graph-memory"):
        assert re.search(rf'<figure class="view" id="view-{view}">.*?<svg', data_report, re.S)
    assert "<style>" in data_report and "<script>" in data_report


def test_findings_are_listed(data_trace: Trace, data_report: str) -> None:
    (finding,) = gradviz.diagnose(data_trace)
    assert html.escape(finding.message) in data_report
    assert html.escape(finding.fix) in data_report
    item = re.search(r'<li class="finding sev-error" data-kind="silently_corrupted_saved_tensor">.*?</li>',
                     data_report, re.S)
    assert item
    assert '<a href="#src-0-24">plot_02_data_silent.py:24</a>' in item.group(0)
    assert '<span class="badge">error</span>' in item.group(0)


def test_source_lines_are_marked(data_trace: Trace, data_report: str) -> None:
    assert data_trace.script is not None
    assert f'<h3 class="file">{html.escape(data_trace.script)}</h3>' in data_report
    marked = re.search(r'<span class="ln mark-error" id="src-0-24" data-line="24" title="([^"]*)">'
                       r'<span class="no">24</span>(.*?)</span>', data_report)
    assert marked, "line 24 (c.zero_()) is not marked as an error"
    assert "c.zero_()" in html.unescape(marked.group(2))
    assert "error: `out`, saved by TanhBackward0" in html.unescape(marked.group(1))
    assert '<span class="ln mark-event" id="src-0-23"' in data_report  # c = out.data: an event, no finding
    assert '<span class="ln" id="src-0-22"' in data_report


def test_steps_show_versions_and_saved_tensors_changing(data_report: str) -> None:
    assert '<section id="steps" data-step="1" data-start="1" data-steps="3">' in data_report
    first, second = step_panel(data_report, 1), step_panel(data_report, 2)
    assert " hidden>" not in first.split(">", 1)[0] + ">" and " hidden>" in second.split(">", 1)[0] + ">"
    assert "c = out.data" in text_of(first)
    text = text_of(second)
    assert "Step 2 of 3" in text and "c.zero_()" in text and "c: v0 → v1, out: v0 → v0 (not noticed)" in text
    rows = {cells[0]: cells for r in re.findall(r"<tr[^>]*>.*?</tr>", second)
            if (cells := [text_of(c).strip() for c in re.findall(r"<td>.*?</td>", r)])}
    assert rows["c"][3:5] == ["v0", "v1"] and rows["out"][3:5] == ["v0", "v0"]
    # storages by their first owner, counters by their tensors: the recorder's ids never show
    assert rows["c"][1] == "storage of out" and rows["c"][2].startswith("version counter of c")
    assert "bytes written, version NOT moved" in text_of(re.search(r"<tr[^>]*><td>out</td>.*?</tr>", second).group(0))
    saved = re.search(r'<tr class="saved-silent changed">(.*?)</tr>', second)
    assert saved, "the saved tensor's status does not change at the write"
    assert "intact at v0" in text_of(saved.group(1))
    assert "bytes changed (line 24 via c), version still v0" in text_of(saved.group(1))
    # the SVG nodes this step outlines: the write, the written tensors and the row
    hits = re.search(r'data-hits="([^"]*)"', second).group(1).split()
    assert {"row_1", "tensor_t1", "tensor_t2", "storage_s1"} <= set(hits)


def test_detach_report_shows_the_poisoned_saved_tensor(detach_trace: Trace) -> None:
    page = report_html(detach_trace, gradviz.diagnose(detach_trace))
    second = step_panel(page, 2)
    saved = re.search(r'<tr class="saved-poisoned changed">(.*?)</tr>', second)
    assert saved and "poisoned: saved at v0, now v1 (backward raises)" in text_of(saved.group(1))
    assert "The program raised <code>RuntimeError</code> at plot_03_detach_raises.py:31" in page
    backward = text_of(step_panel(page, 3))
    assert "is at version 1; expected version 0" in backward
    assert "because of the earlier poisoned saved tensor" in backward


def test_hostile_names_do_not_break_the_page(data_trace: Trace) -> None:
    trace = Trace.loads(data_trace.to_json())
    trace.tensor("out").names = ['<img src=x onerror="alert(1)">']
    trace.tensor("c").names = ["</script><b>&amp;"]
    page = report_html(trace, gradviz.diagnose(trace))
    assert "<img" not in page and "<b>" not in page
    assert page.count("</script>") == 1  # only the report's own
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "&lt;/script&gt;&lt;b&gt;&amp;amp;" in page


def test_without_dot_the_report_still_has_everything_else(data_trace: Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_dot(self: Any, *args: Any, **kwargs: Any) -> bytes:
        raise graphviz.ExecutableNotFound(["dot", "-Tsvg"])

    monkeypatch.setattr(graphviz.Digraph, "pipe", no_dot)
    page = report_html(data_trace, gradviz.diagnose(data_trace))
    # only the graph-memory chart, which matplotlib draws without Graphviz
    assert page.count("<svg") == 1
    assert re.search(r'<figure class="view" id="view-graph-memory">.*?<svg', page, re.S)
    assert page.count("<summary>DOT source</summary>") == 3
    assert "digraph memory" in page and "digraph timeline" in page
    assert 'data-kind="silently_corrupted_saved_tensor"' in page and 'data-steps="3"' in page


def test_a_program_without_events_or_sources() -> None:
    page = report_html(Trace(), [])
    assert "No findings." in page and "No source was recorded." in page
    assert 'data-steps="0"' in page


# ---------------------------------------------------------------------- in a real browser
@pytest.fixture(scope="module")
def report_file(data_report: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "data report.html"
    path.write_text(data_report, encoding="utf-8")
    return path


@pytest.mark.browser
@needs_chromium
def test_report_opens_at_the_step_in_the_url(report_file: Path, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    result = subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         report_file.as_uri() + "?step=2"],
        capture_output=True, text=True, timeout=90, check=True,
    )
    dom = result.stdout
    assert '<section id="steps" data-step="2" data-start="1" data-steps="3">' in dom
    assert re.search(r'<div class="step" id="step-1"[^>]* hidden=""', dom)
    assert not re.search(r'<div class="step sev-error" id="step-2"[^>]* hidden', dom)
    assert '<span id="step-counter">2 / 3</span>' in dom
    assert re.search(r'<span class="ln mark-error current" id="src-0-24"', dom)


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (fds 3 and 4), with the standard library."""

    def __init__(self, profile: Path, width: int = 1000, height: int = 800) -> None:
        assert CHROMIUM is not None
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def wire() -> None:  # in the child: the protocol wants to read fd 3 and write fd 4
            read, write = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(read, 3)
            os.dup2(write, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
             f"--window-size={width},{height}", "about:blank"],
            preexec_fn=wire, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.last_id = 0
        self.pending: list[dict[str, Any]] = []
        self.session = ""

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True) -> dict[str, Any]:
        self.last_id += 1
        message: dict[str, Any] = {"id": self.last_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self.last_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.pending.append(reply)

    def wait_for(self, event: str) -> None:
        while True:
            for i, message in enumerate(self.pending):
                if message.get("method") == event:
                    del self.pending[i]
                    return
            self.pending.append(self._read())

    def _read(self, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise EOFError("Chromium closed the DevTools pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True}, session=False)[
            "sessionId"]
        self.call("Page.enable")
        self.call("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")

    def js(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def key(self, key: str, code: int) -> None:
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code})

    def click(self, selector: str) -> None:
        self.js(f"document.querySelector({json.dumps(selector)}).scrollIntoView({{block: 'center'}})")
        box = self.js(f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
                      " return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 1})

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"})["data"])

    def close(self) -> None:
        try:
            self.call("Browser.close", session=False)
        except (OSError, RuntimeError, TimeoutError, EOFError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[Chromium]:
    browser = Chromium(tmp_path / "profile")
    try:
        yield browser
    finally:
        browser.close()


def png_pixels(data: bytes) -> tuple[int, int, list[bytes], int]:
    """Decode an 8-bit RGB/RGBA PNG: (width, height, unfiltered rows, bytes per pixel)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, bpp = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * bpp
    previous, rows = bytearray(stride), []
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = previous[i], (previous[i - bpp] if i >= bpp else 0)
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, rows, bpp


@pytest.mark.browser
@needs_chromium
def test_step_through_with_keys_and_buttons(report_file: Path, chromium: Chromium) -> None:
    chromium.open(report_file.as_uri())
    step = "document.getElementById('steps').dataset.step"
    visible = "document.querySelector('#steps .step:not([hidden])').innerText"
    assert chromium.js(step) == "1"
    assert "c = out.data" in chromium.js(visible)
    assert chromium.js("document.querySelectorAll('#steps .step:not([hidden])').length") == 1

    chromium.key("ArrowRight", 39)
    assert chromium.js(step) == "2"
    shown = chromium.js(visible)
    assert "c.zero_()" in shown and "bytes written, version NOT moved" in shown
    assert "bytes changed (line 24 via c), version still v0" in shown
    assert chromium.js("document.getElementById('step-counter').textContent") == "2 / 3"
    assert chromium.js("document.getElementById('src-0-24').classList.contains('current')")
    outlined = chromium.js("[...document.querySelectorAll('g.gv-hit > title')].map(t => t.textContent)")
    assert {"tensor_t1", "tensor_t2", "row_1"} <= set(outlined)

    chromium.click("#step-next")
    assert chromium.js(step) == "3"
    assert "backward" in chromium.js(visible)
    assert chromium.js("document.getElementById('step-next').disabled") is True
    assert not chromium.js("document.getElementById('src-0-24').classList.contains('current')")

    chromium.key("ArrowLeft", 37)
    chromium.key("ArrowLeft", 37)
    assert chromium.js(step) == "1"
    assert chromium.js("document.getElementById('step-prev').disabled") is True
    assert chromium.js("location.hash") == "#step=1"


@pytest.mark.browser
@needs_chromium
def test_report_renders_visibly(report_file: Path, chromium: Chromium) -> None:
    chromium.open(report_file.as_uri())
    if shutil.which("dot"):
        sizes = chromium.js(
            "[...document.querySelectorAll('figure.view svg')].map(s => s.getBoundingClientRect().width)")
        assert len(sizes) == 4 and min(sizes) > 100  # graph, memory, timeline, graph-memory
    assert chromium.js("document.getElementById('findings').getBoundingClientRect().height") > 50
    width, height, rows, bpp = png_pixels(chromium.screenshot())
    assert width > 500 and height > 400
    counts: dict[bytes, int] = {}
    for row in rows[::3]:
        for x in range(0, width * bpp, bpp * 3):
            pixel = row[x:x + 3]
            counts[pixel] = counts.get(pixel, 0) + 1
    assert len(counts) > 30, "the screenshot has almost no colours: blank page?"
    assert max(counts.values()) < 0.95 * sum(counts.values()), "one colour covers the whole screenshot"
    error_red = sum(n for (r, g, b), n in ((tuple(p), n) for p, n in counts.items()) if r > 150 and g < 90 and b < 90)
    assert error_red > 0, "the error badge / finding colour is not on screen"


@pytest.mark.browser
@needs_chromium
@needs_dot
def test_labels_fit_their_boxes_in_the_browser(report_file: Path, chromium: Chromium) -> None:
    """dot measured the labels in the font the page draws them in: no text runs past its node's box."""
    chromium.open(report_file.as_uri())
    overflow = chromium.js(
        """[...document.querySelectorAll('#view-graph g.node')].flatMap(node => {
            const box = node.querySelector('polygon, path, ellipse');
            if (!box || node.querySelector('title').textContent === 'legend') return [];
            const outer = box.getBBox();
            return [...node.querySelectorAll('text')].filter(t => t.textContent.trim()).map(t => {
                const b = t.getBBox();
                return [t.textContent, Math.max(outer.x - b.x, b.x + b.width - (outer.x + outer.width))];
            }).filter(([, over]) => over > 1);
        })"""
    )
    assert overflow == []
    fonts = chromium.js(
        "[...new Set([...document.querySelectorAll('#view-graph svg text')].map(t => getComputedStyle(t).fontFamily))]"
    )
    assert fonts == ['"DejaVu Sans Mono", monospace'] or fonts == ['"DejaVu Sans Mono"']
