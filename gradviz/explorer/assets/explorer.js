/* gradviz explorer: draws the trace document in #gv-data. Inlined into the page; loads nothing.
   Everything that came from the trace is written with textContent / setAttribute, never as markup. */
(function () {
  "use strict";
  var SVGNS = "http://www.w3.org/2000/svg";
  var FONT = "'DejaVu Sans Mono', monospace";
  var MAX_DRAW = 1500; // boxes and nodes drawn at once; more is refused with a message (search still finds them)
  var FIRST_VIEW = 60;
  var BIG = 100; // nodes of a graph that opens with the lower panel folded, and may be seen in part at first
  var FAN_EDGES = 150, LEAF_FANOUT = 8; // past FAN_EDGES edges, a parameter feeding more than LEAF_FANOUT boxes keeps its node, not its edges
  var OPEN_ALL_ITEMS = 260, OPEN_ALL_BOXES = 24, OPEN_ALL_EDGES = 300; // what "open all" opens at most: nested boxes and edges between them cost the layout most // the first view opens modules level by level while at most this many things are drawn
  var D = JSON.parse(document.getElementById("gv-data").textContent);
  var app = document.getElementById("gv-app");
  var LEAF_KINDS = new Set(["leaf", "dead", "updated"]);
  var N = D.nodes, G = D.groups, T = D.tensors, F = D.findings, E = D.events, FILES = D.files;
  var state = { expanded: new Set(), hits: new Set(), found: new Set(), selected: null, finding: null, pos: 0,
                view: null, bounds: null, layout: null, rankdir: "TB", first: "all", search: [], searchAt: -1, note: "" };

  // ------------------------------------------------------------------ small helpers
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function sv(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs) { if (attrs[k] !== undefined) { e.setAttribute(k, String(attrs[k])); } }
    return e;
  }
  function add(parent) { for (var i = 1; i < arguments.length; i++) { if (arguments[i]) { parent.appendChild(arguments[i]); } } return parent; }
  function bytes(n) {
    if (n === null || n === undefined) { return "?"; }
    var units = ["B", "KB", "MB", "GB", "TB"], i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(n < 10 ? 1 : 0) : String(n)) + " " + units[i];
  }
  function fileName(i) { return i === null || i === undefined || !FILES[i] ? "?" : FILES[i].name; }
  function where(file, line) { return fileName(file) + (line ? ":" + line : ""); }
  function shape(t) { return t.shape.length ? "[" + t.shape.join("×") + "]" : " scalar"; }
  function sourceLine(file, line) {
    var f = FILES[file];
    if (!f || !line) { return ""; }
    if (f.lines) { return (f.lines[line - 1] || "").trim(); }
    var hit = (f.excerpt || []).filter(function (p) { return p[0] === line; })[0];
    return hit ? hit[1].trim() : "";
  }
  /* `code` and **bold** of a finding's message as elements; everything else as text */
  function rich(text) {
    var span = el("span");
    String(text).split(/(`[^`]+`|\*\*[^*]+\*\*)/).forEach(function (part) {
      if (/^`[^`]+`$/.test(part)) { span.appendChild(el("code", null, part.slice(1, -1))); }
      else if (/^\*\*[^*]+\*\*$/.test(part)) { span.appendChild(el("strong", null, part.slice(2, -2))); }
      else if (part) { span.appendChild(document.createTextNode(part)); }
    });
    return span;
  }
  var canvas = document.createElement("canvas").getContext("2d");
  function measure(text, size) { canvas.font = size + "px " + FONT; return canvas.measureText(text).width; }
  function fit(text, size, width) { // the longest start of `text` that fits `width`, with an ellipsis when cut
    if (measure(text, size) <= width) { return text; }
    var lo = 0, hi = text.length;
    while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (measure(text.slice(0, mid) + "…", size) <= width) { lo = mid; } else { hi = mid - 1; } }
    return text.slice(0, lo) + "…";
  }
  function cut(text, n) { text = String(text); return text.length > n ? text.slice(0, n - 1) + "…" : text; }

  // ------------------------------------------------------------------ hierarchy
  var chains = G.map(function () { return null; });
  function chain(g) { // group indexes from the outermost to g
    if (g < 0) { return []; }
    if (!chains[g]) { chains[g] = chain(G[g].parent).concat([g]); }
    return chains[g];
  }
  var total = G.map(function () { return 0; }), childGroups = G.map(function () { return []; });
  G.forEach(function (g, i) { if (g.parent >= 0) { childGroups[g.parent].push(i); } });
  N.forEach(function (n) { chain(n.g).forEach(function (g) { total[g]++; }); });
  function rep(i) { // what stands for node i now: "n<i>" or the outermost closed box "g<k>"
    var c = chain(N[i].g);
    for (var k = 0; k < c.length; k++) { if (!state.expanded.has(c[k])) { return "g" + c[k]; } }
    return "n" + i;
  }
  // a rolled step box shows one of its steps at a time: the drawn one, or the one picked with ‹ ›
  var chosen = {}; // step group -> index into G[g].instances
  var lookups = {};
  function stepGroup(i) { var c = chain(N[i].g); return c.length && G[c[0]].kind === "step" && G[c[0]].instances ? c[0] : -1; }
  function shownInstance(g) { return chosen[g] !== undefined ? chosen[g] : G[g].drawn; }
  function view(i) { // node i as the step picked in its box has it: its seq, output, saved versions, freeing
    var n = N[i], g = stepGroup(i);
    if (g < 0 || shownInstance(g) === G[g].drawn) { return n; }
    var k = shownInstance(g), key = g + ":" + k;
    if (!lookups[key]) { lookups[key] = {}; G[g].instances[k].nodes.forEach(function (r) { lookups[key][r[0]] = r; }); }
    var r = lookups[key][i];
    var out = Object.assign({}, n, { step: G[g].instances[k].number });
    if (!r) { out.absent = true; return out; }
    out.seq = r[1];
    if (r[2] !== null) { out.out = r[2]; }
    if (n.saved) { out.saved = n.saved.map(function (s, j) { var x = r[3][j]; return x ? Object.assign({}, s, { t: x[0], v: x[1] }) : s; }); }
    if (r[4] !== null) { out.freed = r[4]; } else { delete out.freed; }
    return out;
  }
  function pickInstance(g, k) {
    var count = G[g].instances.length;
    chosen[g] = ((k % count) + count) % count;
    if (state.layout) { redraw(); }
    if (state.selected !== null && stepGroup(state.selected) === g) { showNode(state.selected, true); }
  }
  function shownCount(expanded) {
    var keep = state.expanded; state.expanded = expanded;
    var seen = new Set();
    for (var i = 0; i < N.length; i++) { seen.add(rep(i)); }
    state.expanded = keep;
    return seen.size;
  }
  function shownEdges(expanded) {
    // the distinct edges between what `expanded` shows: a parameter feeding every call of a cell inside a loop fans
    // out across boxes, and dagre's time grows with those edges far faster than with the boxes themselves
    var keep = state.expanded; state.expanded = expanded;
    var seen = new Set();
    D.edges.forEach(function (e) { var a = rep(e[0]), b = rep(e[1]); if (a !== b) { seen.add(a + ">" + b); } });
    state.expanded = keep;
    return seen.size;
  }
  function firstExpansion() {
    // of several step boxes, only the one with a finding (else the last, the steady state) opens at first
    var steps = []; G.forEach(function (g, i) { if (g.kind === "step") { steps.push(i); } });
    var chosen = steps[steps.length - 1];
    F.forEach(function (f) { f.nodes.forEach(function (i) { var c = chain(N[i].g); if (c.length && G[c[0]].kind === "step" && chosen === steps[steps.length - 1]) { chosen = c[0]; } }); });
    var skip = new Set(steps.filter(function (s) { return s !== chosen; }));
    G.forEach(function (g, i) { if (g.kind === "loop") { skip.add(i); } }); // a loop stays a "loop ×N" box at first sight
    var inside = function (i) { return !chain(i).some(function (c) { return skip.has(c); }); };
    // the boxes that hold other boxes open first, depth by depth (model > transformer > h > h.0: the module tree's
    // spine, each of its boxes one more box to look at), then the boxes that hold only nodes
    var holds = function (i) { return childGroups[i].some(function (c) { return G[c].kind !== "line"; }); };
    var open = new Set(), levels = [open], maxDepth = Math.max.apply(null, G.map(function (g) { return g.depth; }).concat([0]));
    var grow = function (test) {
      var next = new Set(open);
      G.forEach(function (g, i) { if (g.kind !== "line" && inside(i) && test(g, i)) { next.add(i); } });
      if (next.size === open.size) { return true; }
      if (shownCount(next) > FIRST_VIEW) { return false; }
      open = next; levels.push(open); return true;
    };
    for (var depth = 0; depth <= maxDepth; depth++) {
      if (!grow(function (g, i) { return g.depth === depth && (holds(i) || !childGroups[i].length && g.kind === "step"); })) { return levels; }
    }
    grow(function () { return true; });
    return levels;
  }
  function fitScale() { // screen pixels per layout unit when the whole layout is fitted to the graph pane
    var b = state.bounds, all = framed(b.x, b.y, b.w, b.h);
    return screen().w / all.w;
  }
  function mustSee() { // the layout keys the first view keeps on screen: every finding's nodes and the graph's outputs
    var keys = new Set();
    F.forEach(function (f) { f.nodes.forEach(function (i) { keys.add(rep(i)); }); });
    N.forEach(function (n, i) { if (n.kind === "output") { keys.add(rep(i)); } });
    return Array.from(keys);
  }
  function extent(keys) {
    var g = state.layout.g, x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    keys.forEach(function (k) {
      var b = g.hasNode(k) ? g.node(k) : null;
      if (!b || b.x === undefined) { return; }
      x0 = Math.min(x0, b.x - b.width / 2); y0 = Math.min(y0, b.y - b.height / 2);
      x1 = Math.max(x1, b.x + b.width / 2); y1 = Math.max(y1, b.y + b.height / 2);
    });
    return x0 === Infinity ? null : { x: x0, y: y0, w: x1 - x0, h: y1 - y0 };
  }
  function firstFit() { // how this layout can be shown first: whole, in part (at READABLE, across it), or not at all
    var s = fitScale();
    if (s >= READABLE) { return { mode: "all", scale: s }; }
    if (N.length <= BIG) { return null; } // a small graph is always seen whole
    var pane = screen(), b = state.bounds, m = extent(mustSee()), pad = 32;
    var wide = state.rankdir === "LR";
    // in part: the layout fits across the pane at READABLE, and so do the findings' nodes and the outputs along it
    var across = wide ? b.h + pad <= pane.h / READABLE : b.w + pad <= pane.w / READABLE;
    var along = !m || (wide ? m.w + pad <= pane.w / READABLE : m.h + pad <= pane.h / READABLE);
    // and the part out of view is at most half a pane: a deeper level that runs far past the pane stays closed
    var length = wide ? b.w / (pane.w / READABLE) : b.h / (pane.h / READABLE);
    return across && along && length <= 1.5 ? { mode: "part", scale: READABLE } : null;
  }
  function firstDepth() { // the deepest of those levels that can be shown first at a readable size
    // shallow levels first: their layouts are quick, and the first that cannot be shown ends the search. Each level
    // is laid out top-down and left-right; the direction that suits the pane's shape is kept (whole before in part).
    var levels = firstExpansion(), best = null;
    for (var k = 0; k < levels.length; k++) {
      var pick = null;
      ["TB", "LR"].forEach(function (dir) {
        if (pick && pick.mode === "all") { return; } // seen whole top-down: the usual direction is kept
        state.expanded = new Set(levels[k]); state.rankdir = dir;
        redraw();
        var f = firstFit();
        if (f && (!pick || (f.mode === "all") > (pick.mode === "all") || (f.mode === pick.mode && f.scale > pick.scale))) {
          pick = { level: k, dir: dir, mode: f.mode, scale: f.scale };
        }
      });
      if (!pick) { if (best) { break; } pick = { level: k, dir: "TB", mode: "all" }; }
      best = pick;
    }
    state.first = best.mode;
    state.expanded = new Set(levels[best.level]); state.rankdir = best.dir;
    redraw();
  }
  function fold(on) {
    ui.lower.classList.toggle("gv-folded", on);
    ui.fold.textContent = on ? "show ▴" : "hide ▾";
    ui.fold.title = on ? "show the memory and source panel" : "hide the memory and source panel: more room for the graph";
  }
  function reveal(i) { // open the boxes around node i, unless that would draw more than MAX_DRAW things
    var trial = new Set(state.expanded);
    chain(N[i].g).forEach(function (g) { trial.add(g); });
    if (trial.size === state.expanded.size) { return true; }
    if (shownCount(trial) > MAX_DRAW) {
      var box = +rep(i).slice(1);
      state.note = "“" + N[i].label + "” is inside “" + G[box].label + "”: too many nodes to open; the box is outlined";
      return false;
    }
    state.expanded = trial;
    return true;
  }

  // ------------------------------------------------------------------ page skeleton
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
    if (facts.window) { top.appendChild(el("p", "gv-window", facts.window + ": findings and views cover these")); }
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
    ui.fit = button("fit", "fit the graph to the window (0)");
    ui.reset = button("reset", "the first view again (r)");
    ui.zoomIn = button("+", "zoom in (+)"); ui.zoomOut = button("−", "zoom out (-)");
    ui.expandAll = button("open all", "open every module box that fits");
    ui.collapseAll = button("close all", "close every module box");
    ui.note = el("span", "gv-note");
    add(bar, ui.fit, ui.reset, ui.zoomIn, ui.zoomOut, ui.expandAll, ui.collapseAll, ui.note);
    ui.svg = sv("svg", { "class": "gv-graph", tabindex: "0", role: "img", "aria-label": "autograd graph" });
    ui.layer = sv("g", { id: "gv-layer" });
    ui.svg.appendChild(ui.layer);
    ui.mini = sv("svg", { "class": "gv-minimap", "aria-label": "overview" });
    ui.miniUse = sv("use", { href: "#gv-layer" });
    ui.miniView = sv("rect", { "class": "gv-minimap-view" });
    add(ui.mini, ui.miniUse, ui.miniView);
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

  // ------------------------------------------------------------------ findings
  function drawFindings() {
    var box = ui.findings;
    box.textContent = "";
    box.appendChild(el("h2", null, "Findings"));
    if (!F.length) { box.appendChild(el("p", "gv-none", "No findings: nothing wrong was seen in this run.")); return; }
    var list = el("ol", "gv-finding-list");
    F.forEach(function (f, i) {
      var item = el("li", "gv-finding sev-" + f.severity);
      item.setAttribute("data-finding", String(i + 1));
      item.tabIndex = 0;
      var head = el("div", "gv-finding-head");
      add(head, el("span", "gv-badge", f.severity), el("span", "gv-kind", f.kind.replace(/_/g, " ")),
          el("span", "gv-where", where(f.file, f.line) + (f.count > 1 ? " · " + f.count + "×" : "")));
      var msg = el("p", "gv-message"); msg.appendChild(rich(f.message));
      add(item, head, msg);
      if (f.fix) { var fix = el("p", "gv-fix"); add(fix, el("strong", null, "Fix: "), rich(f.fix)); item.appendChild(fix); }
      item.addEventListener("click", function () { selectFinding(i, true); });
      item.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { selectFinding(i, true); } });
      list.appendChild(item);
    });
    box.appendChild(list);
  }
  function selectFinding(i, remember) {
    var f = F[i];
    if (!f) { return; }
    state.finding = i;
    state.found = new Set();
    state.hits = new Set(f.nodes);
    f.nodes.forEach(reveal);
    [].forEach.call(ui.findings.querySelectorAll(".gv-finding"), function (li, k) { li.classList.toggle("gv-current", k === i); });
    redraw();
    zoomTo(f.nodes.map(function (n) { return "n" + n; }));
    if (f.nodes.length) { showNode(f.nodes[0], true); }
    if (f.file !== null && f.file !== undefined) { showSource(f.file, f.line); } // the finding's line, not the node's
    if (remember) { setHash("finding=" + (i + 1)); }
  }
  function clearHighlight() {
    state.hits = new Set(); state.found = new Set(); state.finding = null;
    [].forEach.call(ui.findings.querySelectorAll(".gv-finding"), function (li) { li.classList.remove("gv-current"); });
  }

  // ------------------------------------------------------------------ the graph
  function visible() {
    var items = new Map(), clusters = new Set();
    for (var i = 0; i < N.length; i++) {
      var key = rep(i);
      if (!items.has(key)) { items.set(key, []); }
      items.get(key).push(i);
      var c = chain(N[i].g);
      for (var k = 0; k < c.length && state.expanded.has(c[k]); k++) { clusters.add(c[k]); }
    }
    return { items: items, clusters: clusters };
  }
  function nodeLines(i) {
    var n = N[i];
    var sub = [];
    if (n.line) { sub.push("line " + n.line); }
    if (n.module && N[i].kind !== "leaf") { sub.push(n.module.split(".").slice(-2).join(".")); }
    if (n.saved) { sub.push("saved " + n.saved.map(function (s) { return s.name; }).join(", ")); }
    return [cut(n.label, 44), cut(sub.join(" · "), 52)];
  }
  function boxLines(g) {
    var grp = G[g];
    var sub = grp.kind === "step" ? (grp.detail || "") + " · " + total[g] + " nodes"
      : grp.kind === "line" ? total[g] + " ops at " + where(grp.file, grp.line)
      : total[g] + " node" + (total[g] === 1 ? "" : "s") + (grp.path && grp.path !== grp.label ? " · " + grp.path : "");
    return ["▸ " + cut(grp.label, 40), cut(sub, 52)];
  }
  function redraw() {
    var vis = visible();
    var pending = state.note; state.note = "";
    if (vis.items.size > MAX_DRAW) { // a flat graph too big to draw: the nearest the outputs and every finding
      var keys = Array.from(vis.items.keys());
      var score = function (k) { var m = vis.items.get(k); return Math.max.apply(null, m.map(function (i) { return N[i].seq; })); };
      var must = new Set(); state.hits.forEach(function (i) { must.add(rep(i)); }); state.found.forEach(function (i) { must.add(rep(i)); });
      keys.sort(function (a, b) { return score(b) - score(a); });
      var keep = new Set(keys.filter(function (k) { return must.has(k); }).concat(keys.slice(0, MAX_DRAW)));
      keys.forEach(function (k) { if (!keep.has(k)) { vis.items.delete(k); } });
      state.note = "showing " + vis.items.size.toLocaleString() + " of " + keys.length.toLocaleString() + " nodes (the latest; search finds the rest)";
    }
    var g = new dagre.graphlib.Graph({ compound: true });
    g.setGraph({ rankdir: state.rankdir, nodesep: 16, ranksep: 30, edgesep: 8, marginx: 12, marginy: 18 });
    g.setDefaultEdgeLabel(function () { return {}; });
    var info = {};
    vis.items.forEach(function (members, key) {
      var lines = key[0] === "n" ? nodeLines(+key.slice(1)) : boxLines(+key.slice(1));
      var w = Math.max(measure(lines[0], 11), lines[1] ? measure(lines[1], 9.5) : 0) + 18;
      var h = lines[1] ? 34 : 22;
      info[key] = { lines: lines, members: members };
      g.setNode(key, { width: Math.ceil(w), height: h });
    });
    vis.clusters.forEach(function (c) { g.setNode("c" + c, {}); });
    vis.clusters.forEach(function (c) { if (G[c].parent >= 0 && vis.clusters.has(G[c].parent)) { g.setParent("c" + c, "c" + G[c].parent); } });
    vis.items.forEach(function (members, key) {
      var parent = key[0] === "n" ? N[+key.slice(1)].g : G[+key.slice(1)].parent;
      if (parent >= 0 && vis.clusters.has(parent)) { g.setParent(key, "c" + parent); }
    });
    var edgeCount = {}, pairs = [];
    D.edges.forEach(function (e) {
      var a = rep(e[0]), b = rep(e[1]);
      if (a === b || !info[a] || !info[b]) { return; }
      var k = a + ">" + b;
      if (!edgeCount[k]) { edgeCount[k] = 0; pairs.push([a, b]); }
      edgeCount[k]++;
    });
    // an opened loop of a cell called at every time step: each of its parameters feeds every iteration's box, and
    // those edges across boxes make dagre take tens of seconds; such a parameter (or a box of parameters only) keeps
    // its node, not its edges
    var fanned = new Set();
    if (pairs.length > FAN_EDGES) {
      var fan = {};
      var parameters = function (key) { return info[key].members.every(function (i) { return LEAF_KINDS.has(N[i].kind); }); };
      pairs.forEach(function (p) { if (parameters(p[0])) { fan[p[0]] = (fan[p[0]] || 0) + 1; } });
      Object.keys(fan).forEach(function (k) { if (fan[k] > LEAF_FANOUT) { fanned.add(k); } });
    }
    pairs.forEach(function (p) { if (!fanned.has(p[0])) { g.setEdge(p[0], p[1]); } });
    if (fanned.size) {
      state.note = (state.note ? state.note + "; " : "") + "parameters feeding more than " + LEAF_FANOUT +
        " boxes each are drawn without their edges (" + fanned.size + ")";
    }
    var cuts = [];
    D.cuts.forEach(function (c) {
      var a = c.from !== null ? rep(c.from) : null, b = c.to !== null ? rep(c.to) : null;
      if (a && b && a !== b && info[a] && info[b] && !g.hasEdge(a, b)) { g.setEdge(a, b, { cut: true }); cuts.push([a, b, c.label]); }
    });
    // clusters that lost every child (their members were cut by MAX_DRAW) cannot be laid out
    vis.clusters.forEach(function (c) { if (!g.children("c" + c).length) { g.removeNode("c" + c); vis.clusters.delete(c); } });
    dagre.layout(g);
    state.layout = { g: g, info: info, clusters: vis.clusters };
    paint(g, info, vis.clusters, cuts);
    ui.note.textContent = state.note || pending;
  }
  function paint(g, info, clusters, cuts) {
    var layer = ui.layer;
    layer.textContent = "";
    var cl = sv("g", { "class": "gv-clusters" }), ed = sv("g", { "class": "gv-edges" }), nd = sv("g", { "class": "gv-nodes" });
    add(layer, cl, ed, nd);
    var order = Array.from(clusters).sort(function (a, b) { return G[a].depth - G[b].depth; });
    order.forEach(function (c) {
      var b = g.node("c" + c);
      if (!b || b.width === undefined) { return; }
      var grp = sv("g", { "class": "gv-cluster gv-kind-" + G[c].kind, "data-group": c });
      var x = b.x - b.width / 2, y = b.y - b.height / 2;
      var rect = sv("rect", { x: x, y: y, width: b.width, height: b.height, rx: 6 });
      var title = "▾ " + G[c].label + (G[c].kind === "step" && G[c].detail ? " · " + G[c].detail : "");
      var text = sv("text", { x: x + 6, y: y + 12, "class": "gv-cluster-label" });
      var control = G[c].instances ? 30 + measure("step " + G[c].numbers[G[c].numbers.length - 1] + " (" + G[c].numbers.length + "/" + G[c].numbers.length + ")", 10) : 0;
      text.textContent = fit(title, 10, Math.max(b.width - 12, 20));
      var tip = sv("title", {}); tip.textContent = "close " + (G[c].path || G[c].label);
      add(grp, rect, text, tip);
      // which of its steps a rolled box shows: just above the box's top right corner, clear of its title
      if (control) { grp.appendChild(instanceControl(c, x + b.width - control, y - 3)); }
      text.addEventListener("click", function (ev) { ev.stopPropagation(); collapse(c); });
      rect.addEventListener("dblclick", function (ev) { ev.stopPropagation(); collapse(c); });
      cl.appendChild(grp);
    });
    g.edges().forEach(function (e) {
      var edge = g.edge(e);
      var pts = edge.points || [];
      if (!pts.length) { return; }
      var d = "M" + pts.map(function (p) { return p.x.toFixed(1) + "," + p.y.toFixed(1); }).join("L");
      var path = sv("path", { d: d, "class": edge.cut ? "gv-edge gv-cut" : "gv-edge", "data-from": e.v, "data-to": e.w, "marker-end": "url(#gv-arrow)" });
      ed.appendChild(path);
      if (edge.cut) {
        var mid = pts[Math.floor(pts.length / 2)];
        var label = cuts.filter(function (c) { return c[0] === e.v && c[1] === e.w; })[0];
        if (label) { var t = sv("text", { x: mid.x + 4, y: mid.y, "class": "gv-cut-label" }); t.textContent = label[2]; ed.appendChild(t); }
      }
    });
    var defs = sv("defs", {});
    var marker = sv("marker", { id: "gv-arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" });
    marker.appendChild(sv("path", { d: "M0,0L8,4L0,8z", "class": "gv-arrowhead" }));
    defs.appendChild(marker);
    layer.insertBefore(defs, layer.firstChild);
    Object.keys(info).forEach(function (key) {
      var b = g.node(key);
      var isNode = key[0] === "n", idx = +key.slice(1);
      var kind = isNode ? N[idx].kind : "box gv-kind-" + G[idx].kind;
      var cls = "gv-node gv-" + kind + (isNode && N[idx].mark ? " gv-mark-" + N[idx].mark : "");
      var grp = sv("g", { "class": cls, "data-key": key, transform: "translate(" + (b.x - b.width / 2) + "," + (b.y - b.height / 2) + ")" });
      if (isNode) { grp.setAttribute("data-node", D.ids[idx]); } else { grp.setAttribute("data-group", idx); }
      var rect = sv("rect", { width: b.width, height: b.height, rx: isNode ? 3 : 7, "class": "gv-shape" });
      var l1 = sv("text", { x: 9, y: info[key].lines[1] ? 14 : 15, "class": "gv-label" }); l1.textContent = info[key].lines[0];
      add(grp, rect, l1);
      if (info[key].lines[1]) { var l2 = sv("text", { x: 9, y: 28, "class": "gv-sub" }); l2.textContent = info[key].lines[1]; grp.appendChild(l2); }
      grp.addEventListener("mouseenter", function (ev) { showTip(key, ev); });
      grp.addEventListener("mousemove", function (ev) { placeTip(ev); });
      grp.addEventListener("mouseleave", function () { ui.tip.hidden = true; });
      grp.addEventListener("click", function (ev) {
        ev.stopPropagation();
        if (isNode) { showNode(idx, false); setHash("node=" + D.ids[idx]); } else { expand(idx); }
      });
      nd.appendChild(grp);
    });
    var gr = g.graph();
    state.bounds = { x: 0, y: 0, w: Math.max(gr.width || 1, 1), h: Math.max(gr.height || 1, 1) };
    ui.mini.setAttribute("viewBox", "0 0 " + state.bounds.w + " " + state.bounds.h);
    applyClasses();
  }
  function instanceControl(c, x, y) { // ‹ step 2 › in a rolled step box's title: which of its steps is shown
    var box = sv("g", { "class": "gv-instances", "data-group": c });
    var k = shownInstance(c), inst = G[c].instances;
    var prev = sv("text", { x: x, y: y, "class": "gv-inst-prev" }); prev.textContent = "‹";
    var label = sv("text", { x: x + 14, y: y, "class": "gv-inst-label" });
    label.textContent = "step " + inst[k].number + " (" + (k + 1) + "/" + inst.length + ")";
    var next = sv("text", { x: x + 18 + measure(label.textContent, 10), y: y, "class": "gv-inst-next" }); next.textContent = "›";
    var t1 = sv("title", {}); t1.textContent = "show the previous step of this box"; prev.appendChild(t1);
    var t2 = sv("title", {}); t2.textContent = "show the next step of this box"; next.appendChild(t2);
    prev.addEventListener("click", function (ev) { ev.stopPropagation(); pickInstance(c, k - 1); });
    next.addEventListener("click", function (ev) { ev.stopPropagation(); pickInstance(c, k + 1); });
    add(box, prev, label, next);
    return box;
  }

  // ------------------------------------------------------------------ hover: op, module, file and line
  function showTip(key, ev) {
    var tip = ui.tip, idx = +key.slice(1);
    tip.textContent = "";
    if (key[0] === "n") {
      var n = view(idx);
      tip.appendChild(el("strong", "gv-tip-op", n.label));
      if (n.module) { tip.appendChild(el("div", "gv-tip-module", "module " + n.module)); }
      if (n.file !== undefined) {
        tip.appendChild(el("div", "gv-tip-where", where(n.file, n.line)));
        var code = sourceLine(n.file, n.line);
        if (code) { tip.appendChild(el("code", "gv-tip-code", cut(code, 90))); }
      }
      if (n.step) { tip.appendChild(el("div", "gv-tip-module", "as in step " + n.step + (n.absent ? ": not in this step" : ""))); }
      if (n.saved) { tip.appendChild(el("div", "gv-tip-saved", "saved: " + n.saved.map(function (s) { return s.name + (s.v === null ? "" : " v" + s.v); }).join(", "))); }
    } else {
      var grp = G[idx];
      tip.appendChild(el("strong", "gv-tip-op", grp.label));
      tip.appendChild(el("div", "gv-tip-module", (grp.path ? grp.path + " · " : "") + total[idx] + " nodes · click to open"));
    }
    tip.hidden = false;
    placeTip(ev);
  }
  function placeTip(ev) {
    var box = ui.tip.parentNode.getBoundingClientRect(), w = ui.tip.offsetWidth, h = ui.tip.offsetHeight;
    var x = ev.clientX - box.left + 14, y = ev.clientY - box.top + 14;
    if (x + w > box.width - 4) { x = Math.max(4, ev.clientX - box.left - w - 14); }
    if (y + h > box.height - 4) { y = Math.max(4, ev.clientY - box.top - h - 14); }
    ui.tip.style.left = x + "px"; ui.tip.style.top = y + "px";
  }
  function applyClasses() {
    var any = state.hits.size > 0 || state.found.size > 0;
    ui.svg.classList.toggle("gv-focus", any);
    var cur = currentSeq();
    [].forEach.call(ui.layer.querySelectorAll(".gv-node"), function (node) {
      var key = node.getAttribute("data-key");
      var members = state.layout.info[key].members;
      var hit = members.some(function (i) { return state.hits.has(i); });
      var found = members.some(function (i) { return state.found.has(i); });
      node.classList.toggle("gv-hit", hit && key[0] === "n");
      node.classList.toggle("gv-hit-box", hit && key[0] === "g");
      node.classList.toggle("gv-found", found);
      node.classList.toggle("gv-selected", key === "n" + state.selected);
      var future = E.length && members.every(function (i) { return view(i).seq > cur; });
      var freed = members.every(function (i) { var v = view(i); return v.freed !== undefined && v.freed <= cur; });
      node.classList.toggle("gv-future", !!future);
      node.classList.toggle("gv-freed", !future && freed);
    });
    [].forEach.call(ui.layer.querySelectorAll(".gv-edge"), function (path) {
      var a = path.getAttribute("data-from"), b = path.getAttribute("data-to");
      var lit = function (k) { return state.layout.info[k] && state.layout.info[k].members.some(function (i) { return state.hits.has(i); }); };
      path.classList.toggle("gv-hit", lit(a) && lit(b));
    });
  }
  function expand(g) {
    var trial = new Set(state.expanded); trial.add(g);
    var count = shownCount(trial);
    if (count > MAX_DRAW) {
      ui.note.textContent = "“" + G[g].label + "” holds " + total[g].toLocaleString() + " nodes: too many to draw at once; search finds them";
      return;
    }
    state.expanded.add(g);
    redraw();
    zoomTo(["c" + g], true);
  }
  function collapse(g) {
    state.expanded.delete(g);
    // closing a box closes what is inside it too
    var stack = childGroups[g].slice();
    while (stack.length) { var c = stack.pop(); state.expanded.delete(c); stack.push.apply(stack, childGroups[c]); }
    redraw();
    zoomTo(["g" + g], true);
  }

  // ------------------------------------------------------------------ pan and zoom (the svg's viewBox)
  function setView(v) {
    state.view = v;
    ui.svg.setAttribute("viewBox", [v.x, v.y, v.w, v.h].map(function (n) { return +n.toFixed(2); }).join(" "));
    ui.miniView.setAttribute("x", v.x); ui.miniView.setAttribute("y", v.y);
    ui.miniView.setAttribute("width", v.w); ui.miniView.setAttribute("height", v.h);
    var b = state.bounds;
    ui.mini.classList.toggle("gv-hidden", !b || (v.w >= b.w * 0.98 && v.h >= b.h * 0.98 && v.x <= 1 && v.y <= 1) || !N.length);
  }
  function screen() { var r = ui.svg.getBoundingClientRect(); return { w: Math.max(r.width, 50), h: Math.max(r.height, 50) }; }
  function framed(x, y, w, h, maxScale) { // a viewBox showing [x, y, w, h] with the screen's aspect ratio
    var s = screen(), pad = 16;
    w = Math.max(w, 1) + 2 * pad; h = Math.max(h, 1) + 2 * pad; x -= pad; y -= pad;
    // never blow small things up beyond maxScale screen pixels per unit
    var scale = Math.min(s.w / w, s.h / h, maxScale || 1.25);
    var vw = s.w / scale, vh = s.h / scale;
    return { x: x + w / 2 - vw / 2, y: y + h / 2 - vh / 2, w: vw, h: vh };
  }
  function fitAll() { var b = state.bounds; if (b) { setView(framed(b.x, b.y, b.w, b.h)); } }
  var READABLE = 0.85; // screen pixels per layout unit below which labels cannot be read
  function firstView() { // firstDepth chose a depth whose whole graph fits the pane, or fits across it at READABLE
    if (state.first !== "part") { fitAll(); return; }
    // in part: at READABLE, the findings' nodes and the outputs (the loss) in the middle of the view, the layout's
    // ends clamped to the pane's so no blank band shows; the minimap shows the rest
    var s = screen(), b = state.bounds, pad = 16, m = extent(mustSee()) || { x: 0, y: 0, w: b.w, h: b.h };
    var vw = s.w / READABLE, vh = s.h / READABLE;
    var clamp = function (v, lo, hi) { return hi < lo ? (lo + hi) / 2 : Math.max(lo, Math.min(hi, v)); };
    setView({ x: clamp(m.x + m.w / 2 - vw / 2, -pad, b.w + pad - vw), y: clamp(m.y + m.h / 2 - vh / 2, -pad, b.h + pad - vh), w: vw, h: vh });
  }
  function zoomTo(keys, gently) {
    var g = state.layout && state.layout.g;
    if (!g) { return; }
    var x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    keys.forEach(function (k) {
      if (k[0] === "n" && !g.hasNode(k)) { k = rep(+k.slice(1)); }
      var b = g.hasNode(k) ? g.node(k) : null;
      if (!b || b.x === undefined) { return; }
      x0 = Math.min(x0, b.x - b.width / 2); y0 = Math.min(y0, b.y - b.height / 2);
      x1 = Math.max(x1, b.x + b.width / 2); y1 = Math.max(y1, b.y + b.height / 2);
    });
    if (x0 === Infinity) { fitAll(); return; }
    if (gently) { // keep the whole graph in view when it fits at a readable size
      var all = framed(0, 0, state.bounds.w, state.bounds.h);
      if (screen().w / all.w >= 0.55) { setView(all); return; }
    }
    setView(framed(x0, y0, x1 - x0, y1 - y0));
  }
  function zoomBy(factor, cx, cy) {
    var v = state.view; if (!v) { return; }
    if (cx === undefined) { cx = v.x + v.w / 2; cy = v.y + v.h / 2; }
    var w = v.w / factor, h = v.h / factor;
    setView({ x: cx - (cx - v.x) / factor, y: cy - (cy - v.y) / factor, w: w, h: h });
  }
  function panBy(dx, dy) { var v = state.view; if (v) { setView({ x: v.x + dx, y: v.y + dy, w: v.w, h: v.h }); } }
  function toGraph(ev) { var r = ui.svg.getBoundingClientRect(), v = state.view; return { x: v.x + (ev.clientX - r.left) / r.width * v.w, y: v.y + (ev.clientY - r.top) / r.height * v.h }; }
  function wirePanZoom() {
    ui.svg.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var unit = ev.deltaMode === 1 ? 16 : ev.deltaMode === 2 ? 400 : 1;
      if (ev.ctrlKey || ev.metaKey || (!ev.shiftKey && ev.deltaX === 0)) { // pinch, ctrl+wheel, a mouse wheel: zoom at the pointer
        var p = toGraph(ev);
        zoomBy(Math.exp(-ev.deltaY * unit / (ev.ctrlKey ? 100 : 400)), p.x, p.y);
      } else { // two-finger scroll on a trackpad, shift+wheel: pan
        var s = state.view.w / screen().w;
        panBy((ev.deltaX || (ev.shiftKey ? ev.deltaY : 0)) * unit * s, (ev.shiftKey ? 0 : ev.deltaY) * unit * s);
      }
    }, { passive: false });
    var drag = null;
    ui.svg.addEventListener("pointerdown", function (ev) {
      if (ev.button !== 0) { return; }
      drag = { x: ev.clientX, y: ev.clientY, view: state.view, moved: false };
    });
    window.addEventListener("pointermove", function (ev) {
      if (!drag) { return; }
      var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; }
      if (drag.moved) { var s = drag.view.w / screen().w; setView({ x: drag.view.x - dx * s, y: drag.view.y - dy * s, w: drag.view.w, h: drag.view.h }); }
    });
    window.addEventListener("pointerup", function () { if (drag && drag.moved) { ui.svg.setAttribute("data-dragged", "1"); } drag = null; });
    ui.svg.addEventListener("click", function (ev) {
      // a drag that ends on a node or a box is a pan, not a click on it
      if (ui.svg.getAttribute("data-dragged")) { ui.svg.removeAttribute("data-dragged"); ev.stopPropagation(); return; }
      if (ev.target === ui.svg) { clearHighlight(); state.selected = null; applyClasses(); }
    }, true);
    var miniDrag = false;
    function miniMove(ev) {
      var r = ui.mini.getBoundingClientRect(), b = state.bounds, v = state.view;
      var scale = Math.max(b.w / r.width, b.h / r.height);
      var ox = (r.width - b.w / scale) / 2, oy = (r.height - b.h / scale) / 2;
      var x = (ev.clientX - r.left - ox) * scale, y = (ev.clientY - r.top - oy) * scale;
      setView({ x: x - v.w / 2, y: y - v.h / 2, w: v.w, h: v.h });
    }
    ui.mini.addEventListener("pointerdown", function (ev) { miniDrag = true; miniMove(ev); ev.stopPropagation(); });
    window.addEventListener("pointermove", function (ev) { if (miniDrag) { miniMove(ev); } });
    window.addEventListener("pointerup", function () { miniDrag = false; });
    ui.fit.addEventListener("click", fitAll);
    ui.reset.addEventListener("click", resetView);
    ui.zoomIn.addEventListener("click", function () { zoomBy(1.25); });
    ui.zoomOut.addEventListener("click", function () { zoomBy(0.8); });
    ui.expandAll.addEventListener("click", function () {
      // level by level, while the layout stays quick (nested boxes are what costs dagre most)
      var open = new Set(state.expanded), depth = 0, maxDepth = Math.max.apply(null, G.map(function (g) { return g.depth; }).concat([0]));
      for (; depth <= maxDepth; depth++) {
        var next = new Set(open);
        G.forEach(function (g, i) { if (g.depth === depth && g.kind !== "line") { next.add(i); } });
        if (shownCount(next) > OPEN_ALL_ITEMS || next.size > OPEN_ALL_BOXES || shownEdges(next) > OPEN_ALL_EDGES) { break; }
        open = next;
      }
      var closed = G.some(function (g, i) { return g.kind !== "line" && !open.has(i) && chain(G[i].parent).every(function (c) { return open.has(c); }); });
      state.expanded = open; redraw(); fitAll();
      if (closed) {
        var said = ui.note.textContent; // what the drawing itself said (parameters drawn without their edges)
        ui.note.textContent = "opened what can be laid out quickly; open the other boxes one by one" + (said ? "; " + said : "");
      }
    });
    ui.collapseAll.addEventListener("click", function () { state.expanded = new Set(); redraw(); fitAll(); });
    document.addEventListener("keydown", function (ev) {
      if (ev.altKey || ev.ctrlKey || ev.metaKey) { return; }
      var tag = ev.target && ev.target.tagName;
      if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") { return; }
      var v = state.view, step = v ? v.w / 8 : 0, used = true;
      if (ev.key === "+" || ev.key === "=") { zoomBy(1.25); }
      else if (ev.key === "-" || ev.key === "_") { zoomBy(0.8); }
      else if (ev.key === "0" || ev.key === "f") { fitAll(); }
      else if (ev.key === "r") { resetView(); }
      else if (ev.key === "ArrowLeft" && ev.shiftKey) { panBy(-step, 0); }
      else if (ev.key === "ArrowRight" && ev.shiftKey) { panBy(step, 0); }
      else if (ev.key === "ArrowUp") { panBy(0, -step); }
      else if (ev.key === "ArrowDown") { panBy(0, step); }
      else if (ev.key === "ArrowLeft") { scrubTo(state.pos - 1); }
      else if (ev.key === "ArrowRight") { scrubTo(state.pos + 1); }
      else if (ev.key === "/") { ui.search.focus(); }
      else { used = false; }
      if (used) { ev.preventDefault(); }
    });
  }
  function resetView() {
    clearHighlight(); state.selected = null; firstDepth(); firstView();
    showSummary(); setHash("");
  }

  // ------------------------------------------------------------------ details on demand
  function kv(table, key, value) {
    var tr = el("tr"); add(tr, el("th", null, key));
    var td = el("td"); if (value instanceof Node) { td.appendChild(value); } else { td.textContent = value; }
    tr.appendChild(td); table.appendChild(tr);
  }
  function tensorLink(t) {
    var a = el("button", "gv-link", T[t] ? T[t].name : "?"); a.type = "button";
    a.addEventListener("click", function () { showTensor(t); });
    return a;
  }
  function placeLink(file, line) {
    var a = el("button", "gv-link", where(file, line)); a.type = "button";
    a.addEventListener("click", function () { showSource(file, line); });
    return a;
  }
  function showSummary() {
    ui.details.textContent = "";
    ui.details.appendChild(el("h2", null, "Details"));
    ui.details.appendChild(el("p", "gv-none", N.length ? "Click a node for its op, module, line and saved tensors; click a box to open it; click a tensor for where it was made, written, aliased and read."
      : "No autograd graph was recorded: no operation of this run needed a gradient" + (D.facts.exception ? " before the program stopped." : ".")));
  }
  function showNode(i, keepHighlight) {
    var n = view(i);
    state.selected = i;
    if (!keepHighlight) { state.hits = new Set(); }
    applyClasses();
    var box = ui.details; box.textContent = "";
    box.appendChild(el("h2", null, n.label));
    var table = el("table", "gv-kv");
    kv(table, "kind", n.kind === "leaf" ? "leaf (receives .grad)" : n.kind === "output" ? "output: backward started here" : n.kind === "op" ? "backward node" : n.kind);
    if (n.step) { kv(table, "step", "step " + n.step + (n.absent ? " (this node is not in that step)" : "")); }
    if (n.module) { kv(table, "module", n.module); }
    if (n.file !== undefined) { kv(table, "made at", placeLink(n.file, n.line)); kv(table, "source", el("code", null, sourceLine(n.file, n.line))); }
    if (n.out !== undefined) { kv(table, "output", tensorLink(n.out)); }
    if (n.var !== undefined) { kv(table, "tensor", tensorLink(n.var)); }
    if (n.freed !== undefined) { kv(table, "graph freed", "by the backward at event " + eventOfSeq(n.freed)); }
    box.appendChild(table);
    if (n.saved) {
      box.appendChild(el("h3", null, "Saved for backward"));
      var st = el("table", "gv-grid");
      var head = el("tr"); ["name", "tensor", "shape", "bytes", "saved at", "now", "storage"].forEach(function (h) { head.appendChild(el("th", null, h)); });
      st.appendChild(head);
      n.saved.forEach(function (s) {
        var t = T[s.t] || {};
        var tr = el("tr", s.mark ? "gv-mark-" + s.mark : null);
        add(tr, el("td", null, s.name)); var td = el("td"); td.appendChild(tensorLink(s.t)); tr.appendChild(td);
        add(tr, el("td", null, t.dtype + shape(t)), el("td", null, bytes(t.bytes)), el("td", null, s.v === null ? "?" : "v" + s.v),
            el("td", null, versionAt(s.t) === null ? "?" : "v" + versionAt(s.t)), el("td", null, t.storage || "-"));
        st.appendChild(tr);
        if (s.note) { var nr = el("tr", "gv-note-row"); var c = el("td", null, s.note); c.colSpan = 7; nr.appendChild(c); st.appendChild(nr); }
      });
      box.appendChild(st);
    }
    var mine = F.map(function (f, k) { return [f, k]; }).filter(function (p) { return p[0].nodes.indexOf(i) >= 0; });
    if (mine.length) {
      box.appendChild(el("h3", null, "Findings at this node"));
      var ul = el("ul", "gv-plain");
      mine.forEach(function (p) {
        var li = el("li"); var b = el("button", "gv-link sev-" + p[0].severity, (p[1] + 1) + ". " + p[0].kind.replace(/_/g, " ")); b.type = "button";
        b.addEventListener("click", function () { selectFinding(p[1], true); });
        li.appendChild(b); ul.appendChild(li);
      });
      box.appendChild(ul);
    }
    if (n.file !== undefined) { showSource(n.file, n.line, true); }
  }
  function showTensor(t) {
    var r = T[t]; if (!r) { return; }
    var box = ui.details; box.textContent = "";
    box.appendChild(el("h2", null, r.name));
    var table = el("table", "gv-kv");
    kv(table, "shape", r.dtype + shape(r)); kv(table, "device", r.device); kv(table, "bytes", bytes(r.bytes));
    if (r.parameter) { kv(table, "parameter", r.parameter); }
    kv(table, "made by", r.origin + (r.made ? "" : "")); if (r.made) { kv(table, "made at", placeLink(r.made[0], r.made[1])); kv(table, "source", el("code", null, r.made[2])); }
    if (r.source !== undefined) { kv(table, "alias of", tensorLink(r.source)); }
    kv(table, "version now", versionAt(t) === null ? "?" : "v" + versionAt(t));
    if (r.storage) { kv(table, "storage", r.storage + (r.range ? " bytes " + r.range[0] + "-" + r.range[1] : "")); }
    box.appendChild(table);
    if (r.aliases && r.aliases.length) {
      box.appendChild(el("h3", null, "Other tensors in its storage"));
      var p = el("p"); r.aliases.forEach(function (a, k) { if (k) { p.appendChild(document.createTextNode(", ")); } p.appendChild(tensorLink(a)); });
      box.appendChild(p);
    }
    if (r.events) {
      box.appendChild(el("h3", null, "Written, aliased, used by backward"));
      var ul = el("ul", "gv-plain");
      r.events.forEach(function (e) { var li = el("li"); add(li, el("span", "gv-ekind", e[0].replace(/_/g, " ") + " "), placeLink(e[1], e[2]), el("code", null, " " + e[3])); ul.appendChild(li); });
      box.appendChild(ul);
    }
    if (r.reads) {
      box.appendChild(el("h3", null, "Read at"));
      var pr = el("p"); r.reads.forEach(function (x, k) { if (k) { pr.appendChild(document.createTextNode(", ")); } pr.appendChild(placeLink(x[0], x[1])); });
      box.appendChild(pr);
    }
    var nodes = []; N.forEach(function (n, i) { if (n.out === t || n.var === t || (n.saved || []).some(function (s) { return s.t === t; })) { nodes.push(i); } });
    if (nodes.length) {
      state.hits = new Set(nodes); nodes.forEach(reveal); redraw(); zoomTo(nodes.map(function (i) { return "n" + i; }), true);
    }
  }

  // ------------------------------------------------------------------ source
  var sourceFile = null;
  function showSource(file, line, quiet) {
    var f = FILES[file];
    if (!f) { return; }
    if (!quiet) { selectTab("source"); }
    if (sourceFile !== file) { drawSource(file); }
    [].forEach.call(ui.source.querySelectorAll(".gv-ln.gv-current"), function (x) { x.classList.remove("gv-current"); });
    var row = ui.source.querySelector('.gv-ln[data-line="' + (+line) + '"]');
    if (row) {
      row.classList.add("gv-current");
      var pre = ui.source.querySelector("pre");
      pre.scrollTop = row.offsetTop - pre.clientHeight / 2;
    }
  }
  function drawSource(file) {
    sourceFile = file;
    var f = FILES[file];
    ui.source.textContent = "";
    var head = el("div", "gv-source-head");
    if (FILES.length > 1) {
      var pick = el("select"); pick.setAttribute("aria-label", "file");
      FILES.forEach(function (x, k) { var o = option(String(k), x.name + (x.library ? " (library)" : "")); o.selected = k === file; pick.appendChild(o); });
      pick.addEventListener("change", function () { drawSource(+pick.value); });
      head.appendChild(pick);
    }
    head.appendChild(el("span", "gv-path", f.path));
    var pre = el("pre", "gv-code");
    var rows = f.lines ? f.lines.map(function (t, k) { return [k + 1, t]; }) : (f.excerpt || []);
    if (!rows.length) { pre.textContent = "The source of this file was not recorded."; }
    var events = new Set(f.events);
    rows.forEach(function (p) {
      var cls = "gv-ln" + (f.marks[p[0]] ? " gv-mark-" + f.marks[p[0]] : events.has(p[0]) ? " gv-mark-event" : "");
      var row = el("span", cls); row.setAttribute("data-line", String(p[0]));
      add(row, el("span", "gv-no", String(p[0])), document.createTextNode(p[1] || " "));
      pre.appendChild(row);
    });
    add(ui.source, head, pre);
  }
  function selectTab(name) {
    if (ui.lower.classList.contains("gv-folded")) { fold(false); }
    ui.memory.hidden = name !== "memory"; ui.source.hidden = name !== "source";
    ui.tabMemory.classList.toggle("gv-on", name === "memory"); ui.tabSource.classList.toggle("gv-on", name === "source");
    if (name === "source" && sourceFile === null && FILES.length) { drawSource(0); }
  }

  // ------------------------------------------------------------------ events and memory
  function currentSeq() { return state.pos === 0 ? -1 : E[state.pos - 1].last; }
  function eventOfSeq(seq) { for (var k = 0; k < E.length; k++) { if (E[k].seq >= seq) { return (k + 1) + " (line " + E[k].line + ")"; } } return "?"; }
  var versionCache = { pos: -1, v: {} };
  var counterOf = {};
  D.memory.counters.forEach(function (members) { members.forEach(function (t) { counterOf[t] = members; }); });
  function versions() {
    if (versionCache.pos === state.pos) { return versionCache.v; }
    var v = {};
    Object.keys(D.memory.start).forEach(function (k) { v[k] = D.memory.start[k]; });
    for (var k = 0; k < state.pos; k++) {
      E[k].versions.forEach(function (c) {
        if (c[2] === null) { return; }
        (counterOf[c[0]] || [c[0]]).forEach(function (t) { v[t] = c[2]; });
      });
    }
    versionCache = { pos: state.pos, v: v };
    return v;
  }
  function versionAt(t) {
    var v = versions();
    if (v[t] !== undefined) { return v[t]; }
    return T[t] ? T[t].version : null;
  }
  function scrubTo(p) {
    p = Math.max(0, Math.min(E.length, p));
    state.pos = p;
    ui.scrub.value = String(p);
    ui.prev.disabled = p === 0; ui.next.disabled = p === E.length;
    ui.eventText.textContent = "";
    if (p === 0) { ui.eventText.appendChild(el("span", "gv-ekind", "before the first event · " + E.length + " events")); }
    else {
      var e = E[p - 1];
      add(ui.eventText, el("strong", null, "event " + e.number + " of " + D.facts.events + (e.count > 1 ? " ×" + e.count : "") + " "),
          placeLink(e.file, e.line), el("code", null, " " + cut(e.code, 90) + " "), el("span", "gv-ekind", e.kind.replace(/_/g, " ")));
      if (e.text) { ui.eventText.appendChild(el("div", "gv-versions", e.text)); }
      if (e.outcome && e.outcome !== "ok") { ui.eventText.appendChild(el("div", "gv-outcome", e.outcome)); }
      if (e.findings.length) { ui.eventText.appendChild(el("div", "gv-outcome", "finding: " + e.findings.join(", "))); }
      ui.eventText.className = "gv-event" + (e.severity ? " sev-" + e.severity : "");
    }
    if (state.layout) { applyClasses(); }
    drawMemory();
  }
  function drawMemory() {
    var box = ui.memory; box.textContent = "";
    var M = D.memory;
    if (!M.storages.length) { box.appendChild(el("p", "gv-none", "No tensor memory was recorded.")); return; }
    var wrap = el("div", "gv-memory-grid");
    var tables = el("div", "gv-memory-tables");
    var changed = new Set();
    if (state.pos > 0) { E[state.pos - 1].versions.forEach(function (c) { (counterOf[c[0]] || [c[0]]).forEach(function (t) { changed.add(t); }); }); }
    var cur = currentSeq();
    var table = el("table", "gv-grid gv-memory-table");
    var head = el("tr"); ["storage / tensor", "shape", "bytes", "version", "counter shared with"].forEach(function (h) { head.appendChild(el("th", null, h)); });
    table.appendChild(head);
    M.storages.forEach(function (s) {
      var sr = el("tr", "gv-storage-row"); var c = el("td", null, s.name + " · " + bytes(s.bytes) + " · " + s.device); c.colSpan = 5; sr.appendChild(c); table.appendChild(sr);
      s.tensors.forEach(function (t) {
        var r = T[t];
        var tr = el("tr", changed.has(t) ? "gv-changed" : null); tr.setAttribute("data-tensor", String(t));
        var name = el("td"); name.appendChild(tensorLink(t));
        var v = versionAt(t);
        var shared = (counterOf[t] || []).filter(function (o) { return o !== t; }).map(function (o) { return T[o].name; }).join(", ");
        add(tr, name, el("td", null, r.dtype + shape(r)), el("td", null, r.range ? r.range[0] + "-" + r.range[1] : bytes(r.bytes)),
            el("td", "gv-version", v === null || v === undefined ? "-" : "v" + v), el("td", null, shared || "own"));
        table.appendChild(tr);
      });
    });
    tables.appendChild(table);
    if (M.left_out) { tables.appendChild(el("p", "gv-none", M.left_out.toLocaleString() + " more tensors are not listed (the search finds their nodes).")); }
    var map = el("div", "gv-storage-map");
    map.appendChild(el("h3", null, "Storage map"));
    M.storages.forEach(function (s) {
      var row = el("div", "gv-map-row");
      var label = el("span", "gv-map-name", s.name.replace(/^storage of /, "")); label.title = s.name; row.appendChild(label);
      var bar = el("div", "gv-map-bar"); bar.title = s.name + ": " + bytes(s.bytes);
      s.tensors.forEach(function (t, k) {
        var r = T[t]; if (!r.range || !s.bytes) { return; }
        var seg = el("div", "gv-map-seg" + (changed.has(t) ? " gv-changed" : ""));
        seg.style.left = (100 * r.range[0] / s.bytes) + "%";
        seg.style.width = Math.max(100 * (r.range[1] - r.range[0]) / s.bytes, 1) + "%";
        seg.style.top = (k % 3) * 6 + "px";
        seg.title = r.name + " bytes " + r.range[0] + "-" + r.range[1];
        seg.addEventListener("click", function () { showTensor(t); });
        bar.appendChild(seg);
      });
      row.appendChild(bar);
      map.appendChild(row);
    });
    add(wrap, tables, map);
    if (D.chart) { wrap.appendChild(drawChart(cur)); }
    box.appendChild(wrap);
  }
  function drawChart(cur) {
    var c = D.chart, box = el("div", "gv-chart");
    box.appendChild(el("h3", null, c.headline));
    box.appendChild(el("p", "gv-none", "bytes of saved tensors held by live autograd graphs over the run; dashed: backward calls; orange: the event shown"));
    var W = 600, H = 120;
    var svg = sv("svg", { viewBox: "0 0 " + W + " " + H, "class": "gv-chart-svg", preserveAspectRatio: "none" });
    var maxY = Math.max.apply(null, c.points.map(function (p) { return p[1]; }).concat([1]));
    var end = Math.max(c.end, 1);
    var X = function (s) { return s / end * W; }, Y = function (b) { return H - 4 - b / maxY * (H - 12); };
    var d = "M0," + Y(0), last = 0;
    c.points.forEach(function (p) { d += "L" + X(p[0]).toFixed(1) + "," + Y(last).toFixed(1) + "L" + X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1); last = p[1]; });
    d += "L" + W + "," + Y(last).toFixed(1);
    svg.appendChild(sv("path", { d: d, "class": "gv-chart-line", "vector-effect": "non-scaling-stroke" }));
    c.backwards.forEach(function (s) { svg.appendChild(sv("line", { x1: X(s), x2: X(s), y1: 0, y2: H, "class": "gv-chart-backward", "vector-effect": "non-scaling-stroke" })); });
    if (cur >= 0) { svg.appendChild(sv("line", { x1: X(cur), x2: X(cur), y1: 0, y2: H, "class": "gv-chart-now", "vector-effect": "non-scaling-stroke" })); }
    box.appendChild(svg);
    if (c.holders.length) { box.appendChild(el("p", "gv-none", "at the peak: " + c.holders.map(function (h) { return h[0] + " " + bytes(h[1]); }).join("; "))); }
    return box;
  }

  // ------------------------------------------------------------------ search
  var index = null;
  function searchIndex() {
    if (index) { return index; }
    index = N.map(function (n, i) {
      var words = [n.label, n.module || ""];
      if (n.var !== undefined && T[n.var]) { words.push(T[n.var].parameter || "", (T[n.var].names || []).join(" ")); }
      // the variables an op's output was stored in; not the made-up description of how it was computed, which
      // names its inputs ("x @ fc1.weight.T") and would make every use of a parameter match it
      if (n.out !== undefined && T[n.out]) { words.push((T[n.out].names || []).join(" ")); }
      return words.join(" ").toLowerCase();
    });
    return index;
  }
  function runSearch() {
    var q = ui.search.value.trim().toLowerCase();
    state.search = []; state.searchAt = -1;
    if (q) { searchIndex().forEach(function (text, i) { if (text.indexOf(q) >= 0) { state.search.push(i); } }); }
    state.found = new Set(state.search.length <= MAX_DRAW ? state.search : state.search.slice(0, MAX_DRAW));
    ui.searchCount.textContent = q ? (state.search.length ? state.search.length + " found" : "nothing found") : "";
    if (state.search.length) { stepSearch(1); } else if (state.layout) { applyClasses(); }
  }
  function stepSearch(dir) {
    if (!state.search.length) { return; }
    state.searchAt = (state.searchAt + dir + state.search.length) % state.search.length;
    var i = state.search[state.searchAt];
    var before = rep(i);
    reveal(i);
    if (rep(i) !== before) { redraw(); } else { applyClasses(); ui.note.textContent = state.note; state.note = ""; }
    ui.searchCount.textContent = (state.searchAt + 1) + " of " + state.search.length;
    zoomTo(["n" + i]);
    showNode(i, true);
    state.hits = new Set();
    applyClasses();
  }

  // ------------------------------------------------------------------ address (#finding=2, #node=n5)
  function setHash(h) { try { history.replaceState(null, "", h ? "#" + h : location.pathname + location.search); } catch (e) { /* about:srcdoc */ } }
  function fromHash() {
    var h = location.hash || "";
    var m = /finding=(\d+)/.exec(h);
    if (m) { selectFinding(parseInt(m[1], 10) - 1, false); return true; }
    m = /node=([^&]+)/.exec(h);
    if (m) {
      var i = D.ids.indexOf(decodeURIComponent(m[1]));
      if (i >= 0) { reveal(i); state.hits = new Set([i]); redraw(); zoomTo(["n" + i]); showNode(i, true); return true; }
    }
    return false;
  }

  // ------------------------------------------------------------------ start
  build();
  drawFindings();
  showSummary();
  wirePanZoom();
  ui.tabMemory.addEventListener("click", function () { selectTab("memory"); });
  ui.tabSource.addEventListener("click", function () { selectTab("source"); });
  ui.scrub.addEventListener("input", function () { scrubTo(+ui.scrub.value); });
  ui.prev.addEventListener("click", function () { scrubTo(state.pos - 1); });
  ui.next.addEventListener("click", function () { scrubTo(state.pos + 1); });
  ui.search.addEventListener("input", runSearch);
  ui.search.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { stepSearch(ev.shiftKey ? -1 : 1); ev.preventDefault(); } });
  ui.searchNext.addEventListener("click", function () { stepSearch(1); });
  ui.searchPrev.addEventListener("click", function () { stepSearch(-1); });
  if (ui.stepPick) {
    ui.stepPick.addEventListener("change", function () {
      var s = D.steps.filter(function (x) { return String(x.number) === ui.stepPick.value; })[0];
      if (!s) { return; }
      var k = 0; while (k < E.length && E[k].seq < s.seq) { k++; }
      scrubTo(Math.min(k + 1, E.length));
      var grp = G.map(function (g, i) { return [g, i]; }).filter(function (p) { return p[0].kind === "step" && p[0].numbers.indexOf(s.number) >= 0; })[0];
      if (grp) {
        state.expanded.add(grp[1]);
        if (grp[0].instances) { chosen[grp[1]] = grp[0].numbers.indexOf(s.number); }
        redraw(); zoomTo(["c" + grp[1]]);
      }
    });
  }
  selectTab("memory");
  scrubTo(E.length);
  if (N.length) {
    ui.empty.hidden = true;
    // a big graph takes the lower panel's room at first ("show", or the Memory and Source tabs, open it again)
    if (N.length > BIG) { fold(true); }
    firstDepth();
    if (!fromHash()) { firstView(); }
  } else {
    ui.svg.style.display = "none"; ui.mini.style.display = "none";
    ui.empty.textContent = "No autograd graph: " + (D.facts.exception ? "the program stopped before any operation that needs a gradient. " : "no operation of this run needed a gradient. ") +
      D.facts.tensors + " tensors and " + D.facts.events + " events were recorded.";
    fromHash();
  }
  window.addEventListener("resize", function () { if (state.view && state.bounds) { fitAll(); } });
  if (window.performance && performance.mark) { performance.mark("gv-ready"); } // benchmarks/bench_explorer.py
  app.setAttribute("data-ready", "1");
})();
