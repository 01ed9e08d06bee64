"""The notebook's findings, drawn by a real browser in a narrow output area whose host CSS breaks words anywhere (the
classic Notebook's Bootstrap styles `pre` with `word-break: break-all`): lines break between words, code spans are
code, no backtick is shown."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gradviz
from gradviz.integrations.notebook import _FindingsBelow, findings_table

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402 - after the importorskip above

DRIVER = "/usr/bin/chromedriver"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(DRIVER) or shutil.which("chromium") is None,
                       reason="Debian's chromium and chromium-driver are not installed (./dev installs them)"),
]
HOST_CSS = "pre, td { word-break: break-all; word-wrap: break-word; } body { width: 520px; font: 13px sans-serif; }"

#: every word of the text nodes under `selector` that the browser drew on more than one line, though it is narrower
#: than its box (a path longer than the line has to break somewhere)
SPLIT_WORDS = """
const out = [];
for (const root of document.querySelectorAll(arguments[0])) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const match of node.data.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const rects = [...range.getClientRects()].filter(r => r.width > 0);
      const tops = new Set(rects.map(r => Math.round(r.top)));
      const width = rects.reduce((sum, r) => sum + r.width, 0);
      if (tops.size > 1 && width < root.clientWidth - 8) out.push(match[0]);
    }
  }
}
return out;
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync", "--window-size=800,900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_findings_wrap_between_words_and_show_code_as_code(browser: Any, trace_of: Any, tmp_path: Path) -> None:
    trace = trace_of(
        """
        import torch
        from torch import nn
        backbone = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
        head = nn.Linear(8, 2)
        opt = torch.optim.SGD([*backbone.parameters(), *head.parameters()], lr=0.1)
        features_of_the_frozen_backbone = backbone(torch.randn(3, 4)).detach()
        loss = head(features_of_the_frozen_backbone).sum()
        opt.zero_grad(); loss.backward(); opt.step()
        """
    )
    findings = gradviz.diagnose(trace)
    assert any(f.kind.value == "dead_parameter" for f in findings)
    page = tmp_path / "output.html"
    page.write_text(f"<!doctype html><html><head><meta charset='utf-8'><style>{HOST_CSS}</style></head><body>"
                    f"{findings_table(findings)}{_FindingsBelow(findings, {})._repr_html_()}</body></html>",
                    encoding="utf-8")
    browser.get(page.as_uri())
    browser.execute_script("document.querySelector('details').open = true")
    # the table and the text block each wrap onto several lines here, and no word is cut in two
    lines = browser.execute_script(
        "return [...document.querySelectorAll('td, pre')].map(e => Math.round(e.getBoundingClientRect().height))")
    assert max(lines) > 60
    split = browser.execute_script(SPLIT_WORDS, "td, pre")
    assert split == [], split
    # `features_of_the_frozen_backbone` in the message: code, without its backticks
    codes = browser.execute_script("return [...document.querySelectorAll('td code, pre code')].map(e => e.textContent)")
    assert "features_of_the_frozen_backbone = backbone(torch.randn(3, 4)).detach()" in codes
    assert "`" not in browser.execute_script("return document.body.innerText")
