"""The page as a user sees it in Chromium: the current source line keeps every character visible (issue 35, item 5)."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
