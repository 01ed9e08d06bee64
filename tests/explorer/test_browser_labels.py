"""The page as a user sees it in Chromium: the current source line keeps every character visible (issue 35, item 5)."""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import gradviz
from gradviz.explorer import explorer_html

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402

pytestmark = pytest.mark.browser

UNDERSCORES = '''\
import torch

torch.manual_seed(0)
w = torch.randn(4, 3, requires_grad=True)
max_norm = 1.0
out = torch.tanh(w)
alias = out.data
norms = alias.norm(dim=1, keepdim=True)
alias.mul_(max_norm / norms)
out.sum().backward()
'''


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--force-device-scale-factor=1"):
        options.add_argument(flag)
    options.add_argument("--window-size=1280,800")
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_current_source_line_shows_its_underscores(browser: Any, trace_of, tmp_path: Path) -> None:
    """The finding's line, highlighted in the Source tab, still shows the `_` of `mul_` and `max_norm`: the
    highlight must not be drawn over the bottom of the text, where an underscore sits."""
    from PIL import Image

    trace = trace_of(UNDERSCORES)
    findings = gradviz.diagnose(trace)
    assert [f.line for f in findings] == [9]
    page = tmp_path / "page.html"
    page.write_text(explorer_html(trace, findings), encoding="utf-8")
    browser.get(page.as_uri() + "#finding=1")
    deadline = time.monotonic() + 30
    while browser.execute_script("return document.getElementById('gv-app').dataset.ready") != "1":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    browser.execute_script("[].filter.call(document.querySelectorAll('.gv-tabs button'),"
                           " function (b) { return b.textContent === 'Source'; })[0].click();")
    time.sleep(0.3)
    line = browser.execute_script("""
        var row = document.querySelector('.gv-ln.gv-current');
        row.scrollIntoView({block: 'center'});
        var text = row.lastChild, at = text.textContent.indexOf('_'), range = document.createRange();
        range.setStart(text, at); range.setEnd(text, at + 1);
        var r = range.getBoundingClientRect(), box = row.getBoundingClientRect();
        return [row.getAttribute('data-line'), text.textContent.trim(), r.left - box.left, r.width, box.height];
    """)
    assert line[:2] == ["9", "alias.mul_(max_norm / norms)"]
    left, width, height = line[2], line[3], line[4]
    element = browser.find_element("css selector", ".gv-ln.gv-current")
    image = Image.open(io.BytesIO(element.screenshot_as_png)).convert("RGB")
    # the underscore's own cell: some pixel in it is grey (the glyph, anti-aliased), not only the line's light fill
    # and the orange highlight (whose red channel is full)
    cell = image.crop((int(left) + 1, 0, int(left + width) - 1, int(height)))
    dark = [p for p in cell.getdata() if max(p) < 200]
    assert dark, "the underscore of `mul_` is hidden under the current line's highlight"


CLAMPED_AFTER_RELU = '''\
import torch

torch.manual_seed(0)
fc1, fc2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 2)
h = torch.relu(fc1(torch.randn(5, 4)))
h.data.clamp_(max=0.1)
out = fc2(h)
out.sum().backward()
'''


def test_a_write_verify_measured_harmless_is_marked_and_named(browser: Any, tmp_path: Path) -> None:
    """--verify: relu's backward reads only where its result is positive, which a clamp from above leaves as it was:
    gradients identical (PyTorch's own, against a clean run). The picture marks that saved tensor `corrupted_unread`
    (thistle, its own legend line); the page draws the same mark on the node, in its saved-tensor row and legend."""
    from gradviz.picture.palette import PALETTE

    script = tmp_path / "clamp.py"
    script.write_text(CLAMPED_AFTER_RELU, encoding="utf-8")
    with contextlib.redirect_stdout(io.StringIO()):
        trace = gradviz.trace_script(script, verify=True)
    findings = gradviz.diagnose(trace)
    (finding,) = findings
    assert finding.kind.value == "silently_corrupted_saved_tensor" and finding.measured is not None
    assert finding.measured.identical
    # PyTorch itself: the clamped values passed on with relu's saved result intact (the clamp as a constant offset)
    # give the program's gradients bit for bit
    namespace: dict[str, Any] = {}
    exec(CLAMPED_AFTER_RELU.replace("h.data.clamp_(max=0.1)", "h = h + (h.clamp(max=0.1) - h).detach()"), namespace)
    intact = namespace["fc1"].weight.grad
    namespace = {}
    exec(CLAMPED_AFTER_RELU, namespace)
    assert torch.equal(namespace["fc1"].weight.grad, intact) and intact.abs().sum() > 0
    relu = next(n.id for n in trace.nodes.values() if n.name == "ReluBackward0")
    page = tmp_path / "page.html"
    page.write_text(explorer_html(trace, findings), encoding="utf-8")
    browser.get(page.as_uri())
    deadline = time.monotonic() + 30
    while browser.execute_script("return document.getElementById('gv-app').dataset.ready") != "1":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    node = browser.find_element("css selector", f'.gv-node[data-node="{relu}"]')
    assert "gv-mark-corrupted_unread" in node.get_attribute("class")
    fill = browser.execute_script("return getComputedStyle(arguments[0].querySelector('.gv-shape')).fill", node)
    assert fill == "rgb(216, 191, 216)"  # thistle, as the picture draws it
    legend = browser.execute_script(
        "return [...document.querySelectorAll('.gv-legend-item')].map(i => [i.dataset.mark, i.title])")
    assert ["mark-corrupted_unread", PALETTE["corrupted_unread"].legend] in legend
    assert "mark-corrupted" not in [mark for mark, _ in legend]  # no write is drawn as harmful
    node.find_element("css selector", "rect").click()
    row = browser.execute_script(
        "var r = document.querySelector('table.gv-saved tr.gv-mark-corrupted_unread'); if (!r) { return null; }"
        " while (r && !r.classList.contains('gv-note-row')) { r = r.nextElementSibling; }"
        " return [getComputedStyle(document.querySelector('tr.gv-mark-corrupted_unread td')).color, r.textContent]")
    assert row is not None and row[0] == "rgb(160, 48, 154)"  # the silent write's colour, as corrupted rows have
    assert "gradients identical" in row[1]


def test_a_step_box_never_fades_a_finding_as_not_run_yet(browser: Any, tmp_path: Path) -> None:
    """Three steps of the two-block LM build the same graph: one box for steps 1-3. With step 3 picked, the finding
    (a `.data` write in step 1, its first occurrence) moves the timeline to step 1's write: the box must show step 1
    then, whose nodes exist at that event, not step 3's, which all faded as "not run yet" (issue 35, item 5)."""
    program = Path(__file__).resolve().parents[1] / "programs" / "realistic" / "tied_lm_blocks_clamp.py"
    with contextlib.redirect_stdout(io.StringIO()):
        trace = gradviz.trace_script(program, ["3"])
    findings = gradviz.diagnose(trace)
    (finding,) = findings
    page = tmp_path / "page.html"
    page.write_text(explorer_html(trace, findings), encoding="utf-8")
    browser.get(page.as_uri())
    deadline = time.monotonic() + 30
    while browser.execute_script("return document.getElementById('gv-app').dataset.ready") != "1":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    browser.execute_script("var s = document.querySelector('select'); s.value = '3'; s.dispatchEvent(new Event('change'))")
    browser.execute_script("document.querySelector('.gv-finding').click()")  # its nodes outlined
    time.sleep(0.3)
    # replay: scrub the timeline to the write the finding is about
    positions = browser.execute_script("""var s = document.querySelector('.gv-scrub'), out = [];
        for (var p = 0; p <= +s.max; p++) { s.value = p; s.dispatchEvent(new Event('input'));
          out.push(document.querySelector('.gv-event').textContent); }
        return out""")
    at = next(p for p, text in enumerate(positions)
              if f"tied_lm_blocks_clamp.py:{finding.line}" in text and "finding: silently corrupted" in text)
    browser.execute_script("var s = document.querySelector('.gv-scrub'); s.value = arguments[0];"
                           " s.dispatchEvent(new Event('input'))", at)
    marked = browser.execute_script(
        "return [...document.querySelectorAll('.gv-node.gv-hit')].map(g => [g.dataset.node, g.classList.contains('gv-future')])")
    write = min(finding.events)
    assert not [e for e in trace.events if e.kind.value == "backward" and e.seq < write]  # the write is in step 1
    assert len(marked) == 4  # both blocks' relu and fc2 nodes
    assert [node for node, future in marked if future] == []
    box = browser.execute_script("return [...document.querySelectorAll('.gv-cluster-label, .gv-box-label, text')]"
                                 ".map(t => t.textContent).filter(t => /step/.test(t))")
    assert any("step 1" in text for text in box), box  # the box names the step it shows
