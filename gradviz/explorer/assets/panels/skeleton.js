/* gradviz explorer, the page's skeleton: header, tools, sidebar, graph pane, scrubber, lower panel. */
var ui = {};
function build() {
  var top = el("header", "gv-top");
  var h1 = el("h1", "gv-title", D.title);
  var facts = D.facts;
  var summary = el("p", "gv-summary");
  var counts = {};
  F.forEach(function (f) { counts[f.severity] = (counts[f.severity] || 0) + 1; });
  var found = Object.keys(counts).map(function (k) { return counts[k] + " " + k + (counts[k] > 1 ? "s" : ""); }).join(", ") || "no findings";
  add(summary, el("strong", null, found), document.createTextNode(
    " · " + facts.nodes + " autograd nodes, " + facts.tensors + " tensors, " + facts.storages + " storages, " +
    facts.events + " events, " + facts.backwards + " backward call" + (facts.backwards === 1 ? "" : "s") +
    (facts.torch ? " · torch " + facts.torch : "")));
  add(top, h1, summary);
  if (facts.exception) {
    var x = facts.exception, p = el("p", "gv-exception");
    var at = x.file !== null && x.file !== undefined ? " at " + where(x.file, x.line) : "";
    p.textContent = x.exit ? "The program ended by exit" + at + " with status " + x.status + "."
      : "The program raised " + x.type + at + (x.message ? ": " + x.message : "");
    top.appendChild(p);
  }
  if (facts.window) { top.appendChild(el("p", "gv-window", facts.window)); }
  if (facts.internal) { top.appendChild(el("p", "gv-exception", facts.internal)); }

  var tools = el("div", "gv-tools");
  ui.search = el("input", "gv-search"); ui.search.type = "search"; ui.search.placeholder = "search parameter, variable, module, op";
  ui.search.setAttribute("aria-label", "search");
  ui.searchCount = el("span", "gv-search-count");
  ui.searchPrev = button("‹", "previous match"); ui.searchNext = button("›", "next match");
  add(tools, ui.search, ui.searchPrev, ui.searchNext, ui.searchCount);
  if (D.steps.length > 1) {
    ui.stepPick = el("select", "gv-step-pick"); ui.stepPick.setAttribute("aria-label", "training step");
    ui.stepPick.appendChild(option("", "step…"));
    D.steps.forEach(function (s) { ui.stepPick.appendChild(option(String(s.number), "step " + s.number + (s.line ? " (backward at line " + s.line + ")" : ""))); });
    tools.appendChild(ui.stepPick);
  }
  top.appendChild(tools);

  var side = el("aside", "gv-side");
  ui.findings = el("section", "gv-findings");
  ui.details = el("section", "gv-details");
  add(side, ui.findings, ui.details);

  var main = el("div", "gv-main");
  var graphBox = el("div", "gv-graph-box");
  var bar = el("div", "gv-graph-bar");
  ui.fit = button("fit", "fit the graph to the window, as far as its labels stay readable (f, 0)");
  ui.reset = button("reset", "the first view again (r)");
  ui.zoomIn = button("+", "zoom in (+)"); ui.zoomOut = button("−", "zoom out (-)");
  ui.expandAll = button("open all", "open every module box that fits");
  ui.collapseAll = button("close all", "close every module box");
  ui.note = el("span", "gv-note");
  ui.legend = el("div", "gv-legend"); ui.legend.setAttribute("aria-label", "legend");
  add(bar, ui.fit, ui.reset, ui.zoomIn, ui.zoomOut, ui.expandAll, ui.collapseAll, ui.note, ui.legend);
  ui.svg = sv("svg", { "class": "gv-graph", tabindex: "0", role: "img", "aria-label": "autograd graph" });
  ui.layer = sv("g", { id: "gv-layer" });
  ui.svg.appendChild(ui.layer);
  // the overview is drawn with plain rectangles of its own: a <use> of the graph's layer copied every node's Tab stop
  // into it, tiny and unseen; it is for the pointer only (the keyboard pans with the arrows, fits with f)
  ui.mini = sv("svg", { "class": "gv-minimap", "aria-hidden": "true" });
  ui.miniLayer = sv("g", {});
  ui.miniView = sv("rect", { "class": "gv-minimap-view" });
  add(ui.mini, ui.miniLayer, ui.miniView);
  ui.empty = el("div", "gv-empty");
  ui.tip = el("div", "gv-tip"); ui.tip.hidden = true; ui.tip.setAttribute("role", "tooltip");
  add(graphBox, bar, ui.svg, ui.mini, ui.empty, ui.tip);

  var time = el("div", "gv-time");
  ui.prev = button("◀", "previous event (←)"); ui.next = button("▶", "next event (→)");
  ui.scrub = el("input", "gv-scrub"); ui.scrub.type = "range"; ui.scrub.min = "0"; ui.scrub.max = String(E.length);
  ui.scrub.setAttribute("aria-label", "event");
  ui.eventText = el("div", "gv-event");
  add(time, ui.prev, ui.scrub, ui.next, ui.eventText);
  if (!E.length) { time.hidden = true; }

  var lower = el("div", "gv-lower");
  var tabs = el("div", "gv-tabs");
  ui.tabMemory = button("Memory", "storages, tensors, version counters");
  ui.tabSource = button("Source", "the program's source");
  ui.fold = button("hide ▾", "hide the memory and source panel: more room for the graph");
  ui.fold.classList.add("gv-fold");
  ui.fold.addEventListener("click", function () { fold(!ui.lower.classList.contains("gv-folded")); });
  add(tabs, ui.tabMemory, ui.tabSource, ui.fold);
  ui.lower = lower;
  ui.memory = el("div", "gv-memory");
  ui.source = el("div", "gv-source");
  add(lower, tabs, ui.memory, ui.source);
  add(main, graphBox, time, lower);
  var body = el("div", "gv-body");
  add(body, side, main);
  app.textContent = "";
  add(app, top, body);
}
function button(text, title) { var b = el("button", "gv-button", text); b.type = "button"; b.title = title; return b; }
function option(value, text) { var o = el("option", null, text); o.value = value; return o; }
