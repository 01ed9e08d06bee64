// @ts-check
/* gradviz explorer, the page's frame: header, tools, sidebar, graph pane, scrubber, lower panel; the elements each
   panel draws into (core.ui). */
/** @param {any} c the core @param {Document} page @param {HTMLElement} app @returns {Object<string, any>} */
function buildFrame(c, page, app) {
  /** @type {Object<string, any>} */
  var ui = {};
  var top = c.el("header", "gv-top");
  var h1 = c.el("h1", "gv-title", c.D.title);
  var facts = c.D.facts;
  var summary = c.el("p", "gv-summary");
  var counts = {};
  c.F.forEach(function (f) { counts[f.severity] = (counts[f.severity] || 0) + 1; });
  var found = Object.keys(counts).map(function (k) { return counts[k] + " " + k + (counts[k] > 1 ? "s" : ""); }).join(", ") || "no findings";
  c.add(summary, c.el("strong", null, found), page.createTextNode(
    " · " + facts.nodes + " autograd nodes, " + facts.tensors + " tensors, " + facts.storages + " storages, " +
    facts.events + " events, " + facts.backwards + " backward call" + (facts.backwards === 1 ? "" : "s") +
    (facts.torch ? " · torch " + facts.torch : "")));
  c.add(top, h1, summary);
  if (facts.exception) {
    var x = facts.exception, p = c.el("p", "gv-exception");
    var at = x.file !== null && x.file !== undefined ? " at " + c.where(x.file, x.line) : "";
    p.textContent = x.exit ? "The program ended by exit" + at + " with status " + x.status + "."
      : "The program raised " + x.type + at + (x.message ? ": " + x.message : "");
    top.appendChild(p);
  }
  if (facts.window) { top.appendChild(c.el("p", "gv-window", facts.window)); }
  if (facts.internal) { top.appendChild(c.el("p", "gv-exception", facts.internal)); }

  var tools = c.el("div", "gv-tools");
  ui.search = c.el("input", "gv-search"); ui.search.type = "search"; ui.search.placeholder = "search parameter, variable, module, op";
  ui.search.setAttribute("aria-label", "search");
  ui.searchCount = c.el("span", "gv-search-count");
  ui.searchPrev = c.button("‹", "previous match"); ui.searchNext = c.button("›", "next match");
  c.add(tools, ui.search, ui.searchPrev, ui.searchNext, ui.searchCount);
  if (c.D.steps.length > 1) {
    ui.stepPick = c.el("select", "gv-step-pick"); ui.stepPick.setAttribute("aria-label", "training step");
    ui.stepPick.appendChild(c.option("", "step…"));
    c.D.steps.forEach(function (s) { ui.stepPick.appendChild(c.option(String(s.number), "step " + s.number + (s.line ? " (backward at line " + s.line + ")" : ""))); });
    tools.appendChild(ui.stepPick);
  }
  top.appendChild(tools);

  var side = c.el("aside", "gv-side");
  ui.findings = c.el("section", "gv-findings");
  ui.details = c.el("section", "gv-details");
  c.add(side, ui.findings, ui.details);

  var main = c.el("div", "gv-main");
  var graphBox = c.el("div", "gv-graph-box");
  var bar = c.el("div", "gv-graph-bar");
  ui.fit = c.button("fit", "fit the graph to the window, as far as its labels stay readable (f, 0)");
  ui.reset = c.button("reset", "the first view again (r)");
  ui.zoomIn = c.button("+", "zoom in (+)"); ui.zoomOut = c.button("−", "zoom out (-)");
  ui.expandAll = c.button("open all", "open every module box that fits");
  ui.collapseAll = c.button("close all", "close every module box");
  ui.note = c.el("span", "gv-note");
  ui.legend = c.el("div", "gv-legend"); ui.legend.setAttribute("aria-label", "legend");
  c.add(bar, ui.fit, ui.reset, ui.zoomIn, ui.zoomOut, ui.expandAll, ui.collapseAll, ui.note, ui.legend);
  ui.svg = c.sv("svg", { "class": "gv-graph", tabindex: "0", role: "img", "aria-label": "autograd graph" });
  ui.layer = c.sv("g", { id: "gv-layer" });
  ui.svg.appendChild(ui.layer);
  // the overview is drawn with plain rectangles of its own: a <use> of the graph's layer copied every node's Tab stop
  // into it, tiny and unseen; it is for the pointer only (the keyboard pans with the arrows, fits with f)
  ui.mini = c.sv("svg", { "class": "gv-minimap", "aria-hidden": "true" });
  ui.miniLayer = c.sv("g", {});
  ui.miniView = c.sv("rect", { "class": "gv-minimap-view" });
  c.add(ui.mini, ui.miniLayer, ui.miniView);
  ui.empty = c.el("div", "gv-empty");
  ui.tip = c.el("div", "gv-tip"); ui.tip.hidden = true; ui.tip.setAttribute("role", "tooltip");
  c.add(graphBox, bar, ui.svg, ui.mini, ui.empty, ui.tip);

  var time = c.el("div", "gv-time");
  ui.prev = c.button("◀", "previous event (←)"); ui.next = c.button("▶", "next event (→)");
  ui.scrub = c.el("input", "gv-scrub"); ui.scrub.type = "range"; ui.scrub.min = "0"; ui.scrub.max = String(c.E.length);
  ui.scrub.setAttribute("aria-label", "event");
  ui.eventText = c.el("div", "gv-event");
  c.add(time, ui.prev, ui.scrub, ui.next, ui.eventText);
  if (!c.E.length) { time.hidden = true; }

  var lower = c.el("div", "gv-lower");
  var tabs = c.el("div", "gv-tabs");
  ui.tabMemory = c.button("Memory", "storages, tensors, version counters");
  ui.tabSource = c.button("Source", "the program's source");
  ui.fold = c.button("hide ▾", "hide the memory and source panel: more room for the graph");
  ui.fold.classList.add("gv-fold");
  c.add(tabs, ui.tabMemory, ui.tabSource, ui.fold);
  ui.lower = lower;
  ui.memory = c.el("div", "gv-memory");
  ui.source = c.el("div", "gv-source");
  c.add(lower, tabs, ui.memory, ui.source);
  c.add(main, graphBox, time, lower);
  var body = c.el("div", "gv-body");
  c.add(body, side, main);
  app.textContent = "";
  c.add(app, top, body);
  return ui;
}
module.exports = { buildFrame: buildFrame };
