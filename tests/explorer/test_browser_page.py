"""The page's sidebar, fit and minimap in Chromium (issue 35): the details of a node fit the sidebar, code wraps
between tokens and never inside an identifier, `f` keeps labels readable after boxes open, and the minimap neither
adds Tab stops nor covers a node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import gradviz
from gradviz.explorer import explorer_html

from .test_browser import browser, console_errors, open_page  # noqa: F401  (fixtures)

By = pytest.importorskip("selenium.webdriver.common.by").By
Keys = pytest.importorskip("selenium.webdriver.common.keys").Keys
pytestmark = [pytest.mark.browser]

# a residual MLP trained for a few steps, with a detach that starves its first layers (a dead_parameter whose fix
# names `requires_grad_(False)`) and long source lines with no space to wrap at (`torch.relu(self.fc1(self.norm(x)))`)
RESIDUAL = '''\
import torch
from torch import nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        h = torch.relu(self.fc1(self.norm(x)))
        return x + self.fc2(h)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.blocks = nn.ModuleList([Block(16) for _ in range(3)])
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        h = self.embed(x)
        for i, block in enumerate(self.blocks):
            h = block(h)
            if i == 0:
                h = h.detach()
        return self.head(h)


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    loss = nn.functional.mse_loss(model(torch.randn(32, 8)), torch.randn(32, 1))
    opt.zero_grad()
    loss.backward()
    opt.step()
'''

# a small graph (under 100 nodes: "fit" may show it whole) that grows wide as its boxes open
CHAIN = '''\
import torch
from torch import nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = Block()
        self.b = Block()
        self.c = Block()
        self.d = Block()
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        return self.head(self.d(self.c(self.b(self.a(x)))))


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    loss = model(torch.randn(5, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("page")
    out = {}
    for name, text in (("residual", RESIDUAL), ("chain", CHAIN)):
        script = folder / f"{name}.py"
        script.write_text(text, encoding="utf-8")
        trace = gradviz.trace_script(script)
        out[name] = folder / f"{name}.html"
        out[name].write_text(explorer_html(trace, gradviz.diagnose(trace)), encoding="utf-8")
    return out


def click(driver: Any, element: Any) -> None:
    driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", element)


#: what in the sidebar reaches past its right edge or scrolls sideways: [tag, text, right edge, side's edge]
PAST_THE_SIDE = """
const side = document.querySelector('.gv-side'), edge = side.getBoundingClientRect().left + side.clientWidth;
const out = [];
for (const e of side.querySelectorAll('.gv-details *, .gv-finding *')) {
  const b = e.getBoundingClientRect();
  if (b.width && (b.right > edge + 0.5 || e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).display !== 'inline'))
    out.push([e.tagName, e.textContent.slice(0, 40), Math.round(b.right), Math.round(edge)]);
}
return out.concat(side.scrollWidth > side.clientWidth ? [['aside', '', side.scrollWidth, side.clientWidth]] : []);
"""

#: every identifier (a name of letters, digits and underscores) in the sidebar that the browser drew on two lines
SPLIT_IDENTIFIERS = """
const out = [];
const walker = document.createTreeWalker(document.querySelector('.gv-side'), NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  for (const match of node.data.matchAll(/[A-Za-z_][A-Za-z0-9_]*/g)) {
    const range = document.createRange();
    range.setStart(node, match.index);
    range.setEnd(node, match.index + match[0].length);
    const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
    if (tops.size > 1) out.push(match[0]);
  }
}
return out;
"""


def test_the_details_of_every_node_fit_the_sidebar(browser: Any, made: dict[str, Path]) -> None:
    open_page(browser, made["residual"])
    shown = 0
    for key in browser.execute_script("return [...document.querySelectorAll('.gv-node[data-node]')].map(g => g.dataset.key)"):
        click(browser, browser.find_element(By.CSS_SELECTOR, f'.gv-node[data-key="{key}"] .gv-shape'))
        if not browser.find_elements(By.CSS_SELECTOR, ".gv-details table.gv-grid"):  # (its saved tensors)
            continue
        shown += 1
        # every saved tensor's name, versions, shape, size and storage are in view: nothing past the edge or
        # scrolled out of sight (seven columns scrolled sideways showed two of them)
        assert browser.execute_script(PAST_THE_SIDE) == [], key
        cells = browser.execute_script("return [...document.querySelectorAll('.gv-details .gv-grid tr')].map(r => r.textContent)")
        assert cells[0] == "nametensorsaved → now" and any(" · storage of " in c for c in cells), cells
    assert shown >= 5
    assert console_errors(browser) == []


@pytest.mark.parametrize("width", [1280, 820])
def test_code_wraps_between_tokens_never_inside_an_identifier(browser: Any, made: dict[str, Path], width: int) -> None:
    open_page(browser, made["residual"])
    browser.set_window_size(width, 800)
    # the findings' cards (`requires_grad_(False)`, `model.blocks.*.fc1: weight, bias`) ...
    assert browser.execute_script(SPLIT_IDENTIFIERS) == []
    # ... and the details of each node: its line of source (`h = torch.relu(self.fc1(self.norm(x)))`), tensor names
    keys = browser.execute_script("return [...document.querySelectorAll('.gv-node[data-node]')].map(g => g.dataset.key)")
    sources = set()
    for key in keys:
        click(browser, browser.find_element(By.CSS_SELECTOR, f'.gv-node[data-key="{key}"] .gv-shape'))
        sources.add(browser.execute_script("const c = document.querySelector('.gv-details .gv-kv code'); return c && c.textContent"))
        assert browser.execute_script(SPLIT_IDENTIFIERS) == [], key
    assert "h = torch.relu(self.fc1(self.norm(x)))" in sources


LABEL_PX = """
const svg = document.querySelector('svg.gv-graph'), texts = [...svg.querySelectorAll('.gv-node .gv-label')];
return Math.min(...texts.map(t => parseFloat(getComputedStyle(t).fontSize) * svg.getScreenCTM().a));
"""


def test_fit_after_opening_boxes_keeps_labels_readable(browser: Any, made: dict[str, Path]) -> None:
    open_page(browser, made["chain"])
    browser.find_element(By.XPATH, "//button[text()='close all']").click()
    for _ in range(6):  # the step, the model, then its blocks one by one: the graph grows wide
        boxes = browser.find_elements(By.CSS_SELECTOR, ".gv-node[data-group] .gv-shape")
        if not boxes:
            break
        click(browser, boxes[-1])
        browser.find_element(By.TAG_NAME, "body").send_keys("f")
        # at least 6.6 px (11 px labels at 0.6, the scale the first view shows a small graph whole down to), not
        # fitted down to 4 px text
        assert browser.execute_script(LABEL_PX) >= 6.5
    assert browser.execute_script("return document.querySelectorAll('.gv-cluster').length") >= 4
    assert console_errors(browser) == []


def test_the_minimap_adds_no_tab_stop(browser: Any, made: dict[str, Path]) -> None:
    open_page(browser, made["residual"])
    browser.find_element(By.TAG_NAME, "body").click()
    stops = []
    for _ in range(60):
        browser.switch_to.active_element.send_keys(Keys.TAB)
        stops.append(browser.execute_script(
            "const a = document.activeElement; const b = a.getBoundingClientRect();"
            "return [a.tagName, a.className.baseVal ?? a.className, !!a.closest('.gv-minimap'), b.width * b.height > 0]"))
    assert [s for s in stops if s[2] or s[0] == "use"] == []  # none in the overview
    assert all(s[3] for s in stops), [s for s in stops if not s[3]]  # every stop is something drawn


#: the minimap's rectangle and every node or box drawn in the pane (clipped to it) that it covers
COVERED = """
const mini = document.querySelector('svg.gv-minimap'), pane = document.querySelector('svg.gv-graph').getBoundingClientRect();
if (getComputedStyle(mini).visibility === 'hidden' || getComputedStyle(mini).display === 'none') return {shown: false, covered: []};
const m = mini.getBoundingClientRect();
const covered = [...document.querySelectorAll('svg.gv-graph .gv-node .gv-shape')].filter(s => {
  const b = s.getBoundingClientRect();
  const l = Math.max(b.left, pane.left), r = Math.min(b.right, pane.right), t = Math.max(b.top, pane.top), bo = Math.min(b.bottom, pane.bottom);
  return r > l && bo > t && l < m.right && m.left < r && t < m.bottom && m.top < bo;
}).map(s => s.parentNode.dataset.key);
return {shown: true, covered: covered};
"""


def test_the_minimap_covers_no_node_after_a_box_opens(browser: Any, made: dict[str, Path]) -> None:
    open_page(browser, made["residual"])
    seen = [browser.execute_script(COVERED)]
    for _ in range(4):
        boxes = browser.find_elements(By.CSS_SELECTOR, ".gv-node[data-group] .gv-shape")
        if not boxes:
            break
        click(browser, boxes[0])
        seen.append(browser.execute_script(COVERED))
        browser.find_element(By.XPATH, "//button[text()='+']").click()  # zoomed in: part of the graph, the minimap shows
        seen.append(browser.execute_script(COVERED))
    assert [s["covered"] for s in seen if s["covered"]] == []
    assert any(s["shown"] for s in seen)  # it was there to be seen, in a free corner
    assert console_errors(browser) == []
