"""The explorer at first sight and by keyboard, in Chromium (issue 27): the most severe finding's nodes are opened and
in view whatever the model's size; only true marks, each named in the legend; nothing drawn over anything else; every
node reachable with Tab, Enter and the arrow keys; hostile addresses leave a working page."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import gradviz
from gradviz.explorer import explorer_document, explorer_html
from gradviz.model import Trace
from gradviz.picture.palette import PALETTE

from .test_browser import browser, console_errors, open_page, pages, view_box  # noqa: F401  (fixtures)

By = pytest.importorskip("selenium.webdriver.common.by").By
Keys = pytest.importorskip("selenium.webdriver.common.keys").Keys
pytestmark = [pytest.mark.browser]

TWO_BUGS = '''\
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
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        h = self.a(x)
        h = self.b(h.detach())  # cuts block a off: a's last op is not an output
        return self.head(h)


model = Net()
out = model(torch.randn(5, 4))
loss = out.pow(2).mean()
model.b.fc2.weight.data.mul_(0.5)  # corrupts a tensor saved for backward, silently
loss.backward()
'''

TWELVE = {
    "gpt2": '''\
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=12, n_head=2, n_embd=32, vocab_size=64, n_positions=16))
tokens = torch.randint(0, 64, (2, 12))
out = model(tokens, labels=tokens)
model.transformer.h[5].mlp.c_fc.weight.data.mul_(0.5)  # corrupts a tensor saved for backward
out.loss.backward()
''',
    "llama": '''\
import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
config = LlamaConfig(num_hidden_layers=12, hidden_size=32, intermediate_size=64, num_attention_heads=2,
                     num_key_value_heads=2, vocab_size=64, max_position_embeddings=32)
model = LlamaForCausalLM(config)
tokens = torch.randint(0, 64, (2, 12))
out = model(tokens, labels=tokens)
model.model.layers[7].mlp.up_proj.weight.data.mul_(0.5)  # corrupts a tensor saved for backward
out.loss.backward()
''',
}


def _page(folder: Path, name: str, script_text: str) -> tuple[Path, Trace]:
    script = folder / f"{name}.py"
    script.write_text(script_text, encoding="utf-8")
    trace = gradviz.trace_script(script)
    page = folder / f"{name}.html"
    page.write_text(explorer_html(trace, gradviz.diagnose(trace)), encoding="utf-8")
    return page, trace


@pytest.fixture(scope="module")
def sights(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Trace]]:
    folder = tmp_path_factory.mktemp("sight")
    out = {"two_bugs": _page(folder, "two_bugs", TWO_BUGS)}
    try:
        import transformers  # noqa: F401
    except ImportError:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            raise
        return out  # the 12-layer cases skip themselves
    for name, text in TWELVE.items():
        out[name] = _page(folder, name, text)
    return out


def _sight(sights: dict[str, tuple[Path, Trace]], name: str) -> tuple[Path, Trace]:
    if name not in sights:
        pytest.skip("transformers is not installed: the 12-layer models are built from its configs")
    return sights[name]


FIRST_SIGHT = """
const rect = e => { const b = e.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
const svg = document.querySelector('svg.gv-graph'), vb = svg.getAttribute('viewBox').split(' ').map(Number);
const drawn = {};
document.querySelectorAll('.gv-node[data-node]').forEach(g => { drawn[g.dataset.node] = rect(g.querySelector('.gv-shape')); });
return {pane: rect(svg), scale: svg.getBoundingClientRect().width / vb[2], drawn: drawn, layer: rect(document.getElementById('gv-layer')),
        boxes: document.querySelectorAll('.gv-node[data-group]').length};
"""


def _inside(box: list[float], pane: list[float]) -> bool:
    return pane[0] - 1 <= box[0] and box[2] <= pane[2] + 1 and pane[1] - 1 <= box[1] and box[3] <= pane[3] + 1


def _worst_nodes(trace: Trace) -> list[str]:
    document = explorer_document(trace, gradviz.diagnose(trace))
    rank = {"error": 3, "warning": 2, "info": 1}
    worst = max((f for f in document["findings"] if f["nodes"]), key=lambda f: rank[f["severity"]])
    assert worst["severity"] == "error"
    return [document["ids"][i] for i in worst["nodes"]]


@pytest.mark.parametrize(("name", "size"), [("two_bugs", (1280, 800)), ("two_bugs", (860, 760)),
                                            ("gpt2", (1280, 800)), ("llama", (1280, 800)), ("gpt2", (860, 760))])
def test_the_first_view_shows_the_worst_finding_opened_and_in_view(browser: Any, sights: Any, name: str,
                                                                  size: tuple[int, int]) -> None:
    page, trace = _sight(sights, name)
    wanted = _worst_nodes(trace)
    corrupted = next(n.id for n in trace.nodes.values() if n.id in wanted and n.name == "AddmmBackward0"
                     or n.id in wanted and n.name == "MmBackward0")
    open_page(browser, page)
    browser.set_window_size(*size)  # a notebook's output frame is about 860 px wide and 760 px high
    browser.refresh()
    from .test_browser import wait_ready
    wait_ready(browser)
    seen = browser.execute_script(FIRST_SIGHT)
    assert corrupted in seen["drawn"], (name, sorted(seen["drawn"]))  # opened: drawn as a node, not inside a box
    for node in wanted:
        if node in seen["drawn"]:
            assert _inside(seen["drawn"][node], seen["pane"]), (name, node, seen["drawn"][node], seen["pane"])
    assert "gv-mark-corrupted" in browser.find_element(By.CSS_SELECTOR, f'.gv-node[data-node="{corrupted}"]').get_attribute("class")
    if not _inside(seen["layer"], seen["pane"]):  # seen in part: at a readable scale
        assert seen["scale"] >= 0.85 - 1e-6, seen["scale"]
    assert console_errors(browser) == []


def test_a_small_graph_that_fits_is_shown_whole(browser: Any, pages: dict[str, Path], data_trace: Trace) -> None:
    open_page(browser, pages["data"])
    seen = browser.execute_script(FIRST_SIGHT)
    assert seen["boxes"] == 0 and set(seen["drawn"]) == set(data_trace.nodes)  # every node, no closed box
    assert _inside(seen["layer"], seen["pane"])


def test_only_a_backward_root_is_an_output(browser: Any, sights: Any) -> None:
    page, trace = sights["two_bugs"]
    (backward,) = [e for e in trace.events if e.kind.value == "backward"]
    roots = {trace.tensors[t].grad_fn for t in backward.data["roots"]}
    assert [trace.nodes[r].name for r in roots] == ["MeanBackward0"]
    open_page(browser, page)
    browser.find_element(By.XPATH, "//button[text()='open all']").click()
    outputs = browser.execute_script("return [...document.querySelectorAll('.gv-node.gv-output')].map(g => g.dataset.node)")
    assert set(outputs) == roots
    # block a's last op ends a branch the detach cut off: drawn, and not green
    cut_end = next(n.id for n in trace.nodes.values() if n.module == "model.a.fc2" and n.name == "AddmmBackward0")
    assert "gv-output" not in browser.find_element(By.CSS_SELECTOR, f'.gv-node[data-node="{cut_end}"]').get_attribute("class")


def test_a_saved_tensor_is_drawn_corrupted_only_from_the_write_on(browser: Any, pages: dict[str, Path],
                                                                   data_trace: Trace) -> None:
    document = explorer_document(data_trace, gradviz.diagnose(data_trace))
    write = next(k + 1 for k, e in enumerate(document["events"]) if "silently_corrupted_saved_tensor" in e["findings"])
    tanh = next(n.id for n in data_trace.nodes.values() if n.name == "TanhBackward0")
    open_page(browser, pages["data"])

    def marked_at(position: int) -> bool:
        browser.execute_script("const s = document.querySelector('.gv-scrub'); s.value = arguments[0];"
                               "s.dispatchEvent(new Event('input'))", position)
        return "gv-mark-corrupted" in browser.find_element(By.CSS_SELECTOR, f'.gv-node[data-node="{tanh}"]').get_attribute("class")

    assert write >= 2
    assert marked_at(len(document["events"])) and marked_at(write)
    assert not marked_at(write - 1)  # saved, not yet written over: plain
    legend = browser.execute_script("return [...document.querySelectorAll('.gv-legend-item')].map(i => i.dataset.mark)")
    assert "mark-corrupted" not in legend  # and the legend says only what is drawn


# the page's legend item -> the palette's name of the mark (the graph view's legend)
SHARED_MARKS = {"output": "output", "leaf": "leaf", "dead": "dead", "updated": "updated", "kept": "kept",
                "mark-corrupted": "corrupted", "mark-poisoned": "poisoned", "mark-detached_saved": "detached_saved",
                "box": "group", "cut": "cut", "freed": "freed"}

USED_MARKS = """
const known = new Set([...document.querySelectorAll('.gv-legend-item')].map(i => i.dataset.mark));
const vocabulary = ['output', 'leaf', 'dead', 'updated', 'kept', 'box', 'future', 'freed', 'mark-corrupted', 'mark-poisoned', 'mark-detached_saved', 'hit', 'hit-box', 'found'];
const used = new Set();
document.querySelectorAll('svg.gv-graph .gv-node').forEach(g => vocabulary.forEach(m => { if (g.classList.contains('gv-' + m)) used.add(m === 'hit-box' ? 'hit' : m); }));
if (document.querySelector('svg.gv-graph path.gv-cut')) used.add('cut');
const text = [...document.querySelectorAll('.gv-legend-item')].map(i => [i.dataset.mark, i.textContent.trim(), i.title]);
return {used: [...used].sort(), known: [...known].sort(), text: text};
"""


def test_the_legend_names_every_mark_in_use(browser: Any, pages: dict[str, Path], sights: Any) -> None:
    for page, action in ((sights["two_bugs"][0], "open all"), (pages["training"], "open all"), (pages["data"], None)):
        open_page(browser, page)
        if action:
            browser.find_element(By.XPATH, f"//button[text()='{action}']").click()
        seen = browser.execute_script(USED_MARKS)
        assert seen["used"] and seen["used"] == seen["known"], (page.name, seen)
        assert all(name and title for _, name, title in seen["text"])
        # a mark the static views draw too is explained in their words (picture/palette.py), not the page's own
        for mark, _, title in seen["text"]:
            if mark in SHARED_MARKS:
                assert title == PALETTE[SHARED_MARKS[mark]].legend, (mark, title)
    # the two-bug model draws a corrupted saved tensor, an output, leaves and a cut: each is named; a clicked
    # finding's outline is named while it is drawn
    open_page(browser, sights["two_bugs"][0])
    browser.find_element(By.XPATH, "//button[text()='open all']").click()
    assert {"mark-corrupted", "output", "leaf", "cut"} <= set(browser.execute_script(USED_MARKS)["known"])
    browser.find_element(By.CSS_SELECTOR, '.gv-finding[data-finding="1"]').click()
    seen = browser.execute_script(USED_MARKS)
    assert "hit" in seen["used"] and seen["used"] == seen["known"], seen


OVERLAPS = """
const pane = document.querySelector('svg.gv-graph').getBoundingClientRect();
const clip = b => ({l: Math.max(b.left, pane.left), t: Math.max(b.top, pane.top), r: Math.min(b.right, pane.right), b: Math.min(b.bottom, pane.bottom)});
const texts = [...document.querySelectorAll('svg.gv-graph text')].filter(t => t.textContent.trim())
  .map(t => [t.textContent, clip(t.getBoundingClientRect())]).filter(([, b]) => b.r > b.l && b.b > b.t);
const hit = (a, b) => a.l < b.r - 0.5 && b.l < a.r - 0.5 && a.t < b.b - 0.5 && b.t < a.b - 0.5;
const pairs = [];
for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) if (hit(texts[i][1], texts[j][1])) pairs.push([texts[i][0], texts[j][0]]);
const bar = document.querySelector('.gv-graph-bar').getBoundingClientRect(), barBox = {l: bar.left, t: bar.top, r: bar.right, b: bar.bottom};
const under = [...document.querySelectorAll('svg.gv-graph .gv-node .gv-shape')].map(s => clip(s.getBoundingClientRect()))
  .filter(b => b.r > b.l && b.b > b.t && hit(b, barBox)).length;
return {pairs: pairs, under: under, texts: texts.length, barBackground: getComputedStyle(document.querySelector('.gv-graph-bar')).backgroundColor};
"""


def test_no_two_texts_overlap_and_the_toolbar_covers_no_node(browser: Any, pages: dict[str, Path], sights: Any,
                                                            gallery: Path, tmp_path: Path) -> None:
    # the GAN: two rolled step boxes, each with its ‹ step 5 (3/3) › control, and the fake.detach() cut between them
    gan = gradviz.trace_script(gallery / "plot_10_gan_fake_detach.py")
    (tmp_path / "gan.html").write_text(explorer_html(gan, gradviz.diagnose(gan)), encoding="utf-8")
    cases = [(pages["training"], "open all"), (pages["training"], None), (sights["two_bugs"][0], "open all"),
             (sights["two_bugs"][0], None), (pages["data"], None), (tmp_path / "gan.html", None),
             (tmp_path / "gan.html", "open all")]
    if "gpt2" in sights:
        cases.append((sights["gpt2"][0], None))
    for page, action in cases:
        open_page(browser, page)
        if action:
            browser.find_element(By.XPATH, f"//button[text()='{action}']").click()
        seen = browser.execute_script(OVERLAPS)
        assert seen["texts"] > 3 and seen["pairs"] == [], (page.name, action, seen["pairs"])
        assert seen["under"] == 0 and seen["barBackground"] not in ("rgba(0, 0, 0, 0)", "transparent"), (page.name, seen)


def test_tab_reaches_a_box_enter_opens_it_and_arrows_follow_edges(browser: Any, pages: dict[str, Path],
                                                                   training_trace: Trace) -> None:
    open_page(browser, pages["training"])
    browser.find_element(By.XPATH, "//button[text()='close all']").click()
    active = lambda: browser.execute_script(  # noqa: E731
        "const a = document.activeElement; return a && a.classList && a.classList.contains('gv-node') ? a.dataset.key : null")
    browser.find_element(By.TAG_NAME, "body").click()
    for _ in range(40):
        browser.switch_to.active_element.send_keys(Keys.TAB)
        if active():
            break
    key = active()
    assert key is not None and key.startswith("g")  # closed, everything is a box
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    group = key[1:]
    assert browser.find_elements(By.CSS_SELECTOR, f'.gv-cluster[data-group="{group}"]')  # opened in place
    inside = active()
    assert inside is not None  # the focus moved into the opened box
    # arrow keys: down to an op that uses it, up back to an input
    edges = browser.execute_script("return [...document.querySelectorAll('path.gv-edge')].map(p => [p.dataset.from, p.dataset.to])")
    moved = False
    for _ in range(12):
        here = active()
        browser.switch_to.active_element.send_keys(Keys.ARROW_DOWN)
        there = active()
        if there == here:
            break
        assert [here, there] in edges
        moved = True
    assert moved
    browser.switch_to.active_element.send_keys(Keys.ARROW_UP)
    assert [active(), there] in edges
    # Enter on a node selects it: its details
    while active() and active().startswith("g"):
        browser.switch_to.active_element.send_keys(Keys.ARROW_UP)
    node = active()
    assert node and node.startswith("n")
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    document = explorer_document(training_trace, [])
    assert browser.find_element(By.CSS_SELECTOR, ".gv-details h2").text == document["nodes"][int(node[1:])]["label"]
    assert console_errors(browser) == []


@pytest.mark.parametrize("fragment", ["#node=%", "#finding=abc", "#node=<script>", "#node=%3Cscript%3E", "#finding=99",
                                      "#node=%E0%A4%A", "#finding=1&node=%"])
def test_a_hostile_address_leaves_a_working_page(browser: Any, pages: dict[str, Path], fragment: str) -> None:
    browser.get("about:blank")  # a new document: only a fragment changed would not run the page's start again
    open_page(browser, pages["data"], fragment)  # ready, or it fails here
    assert browser.execute_script("return location.hash") != ""
    assert view_box(browser)[2] > 0  # a first view was drawn
    assert browser.execute_script("return document.querySelectorAll('.gv-node').length") > 0
    assert browser.execute_script("return document.querySelectorAll('script:not([type]), script[type=\"text/javascript\"]').length") == 2
    assert console_errors(browser) == []


def test_fit_keeps_a_big_graph_readable_and_a_box_opens_into_view(browser: Any, sights: Any) -> None:
    page, _ = _sight(sights, "gpt2")
    open_page(browser, page)
    browser.find_element(By.TAG_NAME, "body").send_keys("f")
    seen = browser.execute_script(FIRST_SIGHT)
    assert seen["scale"] >= 0.85 - 1e-6  # not fitted down to unreadable text: panned instead
    box = browser.execute_script(
        "const pane = document.querySelector('svg.gv-graph').getBoundingClientRect();"
        "const g = [...document.querySelectorAll('.gv-node[data-group]')].find(g => { const b = g.getBoundingClientRect();"
        " return b.top > pane.top && b.bottom < pane.bottom && b.left > pane.left && b.right < pane.right; });"
        "return g ? g.dataset.group : null")
    assert box is not None
    browser.find_element(By.CSS_SELECTOR, f'.gv-node[data-group="{box}"] rect').click()
    title = browser.find_element(By.CSS_SELECTOR, f'.gv-cluster[data-group="{box}"] .gv-cluster-label').rect
    pane = browser.find_element(By.CSS_SELECTOR, "svg.gv-graph").rect
    assert pane["x"] <= title["x"] and title["x"] + title["width"] <= pane["x"] + pane["width"] + 1
    assert pane["y"] <= title["y"] and title["y"] + title["height"] <= pane["y"] + pane["height"] + 1


def test_panels_are_not_cut(browser: Any, pages: dict[str, Path], sights: Any) -> None:
    page, trace = sights["two_bugs"]
    open_page(browser, page)
    # the search box shows its whole placeholder
    widths = browser.execute_script(
        "const i = document.querySelector('input.gv-search'), s = getComputedStyle(i), c = document.createElement('canvas').getContext('2d');"
        "c.font = s.font; return [c.measureText(i.placeholder).width, i.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight)]")
    assert widths[0] <= widths[1], widths
    # the event line under the scrubber shows whole lines only
    event = browser.execute_script(
        "const e = document.querySelector('.gv-event'); return [e.clientHeight, parseFloat(getComputedStyle(e).lineHeight), e.scrollHeight]")
    assert event[0] % event[1] == 0 and event[0] > 0, event
    # the details of a node: its saved-tensors table fits the sidebar, nothing scrolled out of sight (issue 35)
    corrupted = next(n.id for n in trace.nodes.values() if n.module == "model.b.fc2" and n.name == "AddmmBackward0")
    browser.find_element(By.CSS_SELECTOR, f'.gv-node[data-node="{corrupted}"] rect').click()
    table = browser.execute_script(
        "const t = document.querySelector('.gv-details table.gv-grid'), side = document.querySelector('.gv-side');"
        "return [t.getBoundingClientRect().right, side.getBoundingClientRect().right, t.scrollWidth <= t.clientWidth]")
    assert table[0] <= table[1] + 0.5 and table[2], table


def test_the_source_panel_follows_the_scrubber(browser: Any, pages: dict[str, Path], data_trace: Trace) -> None:
    document = explorer_document(data_trace, gradviz.diagnose(data_trace))
    open_page(browser, pages["data"])
    browser.find_element(By.XPATH, "//button[text()='Source']").click()
    for position in range(len(document["events"]), 0, -1):
        browser.execute_script("const s = document.querySelector('.gv-scrub'); s.value = arguments[0];"
                               "s.dispatchEvent(new Event('input'))", position)
        current = browser.find_element(By.CSS_SELECTOR, ".gv-source .gv-ln.gv-current")
        assert current.get_attribute("data-line") == str(document["events"][position - 1]["line"])
        assert current.is_displayed()
