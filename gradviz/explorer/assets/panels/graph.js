// @ts-check
/* gradviz explorer, the graph panel: what is drawn, dagre layout, painting, hover tips, classes, opening and closing
   boxes, which step a rolled step box shows. It owns the open boxes, the layout and the outlined nodes. */
/** @param {import("./core.js").Helpers} h @param {import("./core.js").Core} core @param {import("./store.js").Store} store */
function graphPanel(h, core, store) {
  var N = core.N, G = core.G, D = core.D, E = core.E, ui = core.ui, L = core.LIMITS, hier = core.hier;
  var el = core.el, sv = core.sv, add = core.add, measure = core.measure;
  /** @param {number} i */
  function rep(i) { return hier.rep(i, store.get("expanded")); }
  /** @param {number} i */
  function nodeAt(i) { return core.steps.nodeAt(store.get("chosen"), i); }
  function visible() {
    var items = new Map(), clusters = new Set(), expanded = store.get("expanded");
    for (var i = 0; i < N.length; i++) {
      var key = rep(i);
      if (!items.has(key)) { items.set(key, []); }
      items.get(key).push(i);
      var c = hier.chain(N[i].g);
      for (var k = 0; k < c.length && expanded.has(c[k]); k++) { clusters.add(c[k]); }
    }
    return { items: items, clusters: clusters };
  }
  /** @param {number} i */
  function nodeLines(i) {
    var n = N[i];
    var sub = [];
    if (n.line) { sub.push("line " + n.line); }
    if (n.module && N[i].kind !== "leaf") { sub.push(n.module.split(".").slice(-2).join(".")); }
    if (n.saved) { sub.push("saved " + n.saved.map(function (/** @type {any} */ s) { return s.name; }).join(", ")); }
    return [h.cut(n.label, 44), h.cut(sub.join(" · "), 52)];
  }
  /** @param {number} g */
  function boxLines(g) {
    var grp = G[g], total = hier.total;
    var sub = grp.kind === "step" ? (grp.detail || "") + " · " + total[g] + " nodes"
      : grp.kind === "line" ? total[g] + " ops at " + core.where(grp.file, grp.line)
      : total[g] + " node" + (total[g] === 1 ? "" : "s") + (grp.path && grp.path !== grp.label ? " · " + grp.path : "");
    return ["▸ " + h.cut(grp.label, 40), h.cut(sub, 52)];
  }
  function redraw() {
    var vis = visible();
    var pending = store.get("note"); store.set("note", "");
    var hits = store.get("hits"), found = store.get("found");
    if (vis.items.size > L.MAX_DRAW) { // a flat graph too big to draw: the nearest the outputs and every finding
      var keys = Array.from(vis.items.keys());
      /** @param {string} k */
      var score = function (k) { var m = vis.items.get(k); return Math.max.apply(null, m.map(function (/** @type {number} */ i) { return N[i].seq; })); };
      var must = new Set(); hits.forEach(function (/** @type {number} */ i) { must.add(rep(i)); }); found.forEach(function (/** @type {number} */ i) { must.add(rep(i)); });
      keys.sort(function (a, b) { return score(b) - score(a); });
      var keep = new Set(keys.filter(function (k) { return must.has(k); }).concat(keys.slice(0, L.MAX_DRAW)));
      keys.forEach(function (k) { if (!keep.has(k)) { vis.items.delete(k); } });
      store.set("note", "showing " + vis.items.size.toLocaleString() + " of " + keys.length.toLocaleString() + " nodes (the latest; search finds the rest)");
    }
    var g = new core.dagre.graphlib.Graph({ compound: true });
    g.setGraph({ rankdir: store.get("rankdir"), nodesep: 16, ranksep: 30, edgesep: 8, marginx: 12, marginy: 18 });
    g.setDefaultEdgeLabel(function () { return {}; });
    /** @type {Object<string, {lines: string[], members: number[]}>} */
    var info = {};
    vis.items.forEach(function (members, key) {
      var lines = key[0] === "n" ? nodeLines(+key.slice(1)) : boxLines(+key.slice(1));
      var w = Math.max(measure(lines[0], 11), lines[1] ? measure(lines[1], 9.5) : 0) + 18;
      var ht = lines[1] ? 34 : 22;
      info[key] = { lines: lines, members: members };
      g.setNode(key, { width: Math.ceil(w), height: ht });
    });
    vis.clusters.forEach(function (c) { g.setNode("c" + c, {}); });
    vis.clusters.forEach(function (c) { if (G[c].parent >= 0 && vis.clusters.has(G[c].parent)) { g.setParent("c" + c, "c" + G[c].parent); } });
    vis.items.forEach(function (members, key) {
      var parent = key[0] === "n" ? N[+key.slice(1)].g : G[+key.slice(1)].parent;
      if (parent >= 0 && vis.clusters.has(parent)) { g.setParent(key, "c" + parent); }
    });
    /** @type {Object<string, number>} */
    var edgeCount = {};
    /** @type {string[][]} */
    var pairs = [];
    D.edges.forEach(function (/** @type {number[]} */ e) {
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
    if (pairs.length > L.FAN_EDGES) {
      /** @type {Object<string, number>} */
      var fan = {};
      /** @param {string} key */
      var parameters = function (key) { return info[key].members.every(function (i) { return core.LEAF_KINDS.has(N[i].kind); }); };
      pairs.forEach(function (p) { if (parameters(p[0])) { fan[p[0]] = (fan[p[0]] || 0) + 1; } });
      Object.keys(fan).forEach(function (k) { if (fan[k] > L.LEAF_FANOUT) { fanned.add(k); } });
    }
    pairs.forEach(function (p) { if (!fanned.has(p[0])) { g.setEdge(p[0], p[1]); } });
    if (fanned.size) {
      var said = store.get("note");
      store.set("note", (said ? said + "; " : "") + "parameters feeding more than " + L.LEAF_FANOUT +
        " boxes each are drawn without their edges (" + fanned.size + ")");
    }
    /** @type {any[][]} */
    var cuts = [];
    D.cuts.forEach(function (/** @type {any} */ c) {
      var a = c.from !== null ? rep(c.from) : null, b = c.to !== null ? rep(c.to) : null;
      if (a && b && a !== b && info[a] && info[b] && !g.hasEdge(a, b)) { g.setEdge(a, b, { cut: true }); cuts.push([a, b, c.label]); }
    });
    // clusters that lost every child (their members were cut by MAX_DRAW) cannot be laid out
    vis.clusters.forEach(function (c) { if (!g.children("c" + c).length) { g.removeNode("c" + c); vis.clusters.delete(c); } });
    core.dagre.layout(g);
    store.set("layout", { g: g, info: info, clusters: vis.clusters });
    paint(g, info, vis.clusters, cuts);
    ui.note.textContent = store.get("note") || pending;
  }
  /** @param {any} g @param {Object<string, {lines: string[], members: number[]}>} info @param {Set<number>} clusters @param {any[][]} cuts */
  function paint(g, info, clusters, cuts) {
    var layer = ui.layer;
    layer.textContent = "";
    var cl = sv("g", { "class": "gv-clusters" }), ed = sv("g", { "class": "gv-edges" }), nd = sv("g", { "class": "gv-nodes" });
    add(layer, cl, ed, nd);
    var order = Array.from(clusters).sort(function (a, b) { return G[a].depth - G[b].depth; });
    /** @type {{x: number, y: number, w: number, h: number}[]} */
    var taken = [], titles = []; // boxes of what is drawn (nodes, box titles, step controls): a cut's label goes beside them
    order.forEach(function (c) {
      var b = g.node("c" + c);
      if (!b || b.width === undefined) { return; }
      var grp = sv("g", { "class": "gv-cluster gv-kind-" + G[c].kind, "data-group": c });
      var x = b.x - b.width / 2, y = b.y - b.height / 2;
      var rect = sv("rect", { x: x, y: y, width: b.width, height: b.height, rx: 6 });
      var title = "▾ " + G[c].label + (G[c].kind === "step" && G[c].detail ? " · " + G[c].detail : "");
      // a box nested right at its parent's top starts its title after the parent's (titles never overlap)
      var left = x + 6, right = x + b.width - 6;
      titles.forEach(function (t) { if (h.overlaps(t, { x: left, y: y + 2, w: right - left, h: 12 }) && t.x + t.w + 8 > left) { left = t.x + t.w + 8; } });
      var shown = right - left >= 24 ? core.fit(title, 10, right - left) : "▾";
      if (shown === "▾") { left = right - measure("▾", 10); }
      var text = sv("text", { x: left, y: y + 12, "class": "gv-cluster-label" });
      var control = G[c].instances ? 30 + measure("step " + G[c].numbers[G[c].numbers.length - 1] + " (" + G[c].numbers.length + "/" + G[c].numbers.length + ")", 10) : 0;
      text.textContent = shown;
      titles.push({ x: left, y: y + 2, w: measure(shown, 10), h: 12 });
      taken.push(titles[titles.length - 1]);
      var tip = sv("title", {}); tip.textContent = "close " + (G[c].path || G[c].label);
      add(grp, rect, text, tip);
      // which of its steps a rolled box shows: just above the box's top right corner, clear of its title
      if (control) { grp.appendChild(instanceControl(c, x + b.width - control, y - 3)); taken.push({ x: x + b.width - control, y: y - 14, w: control + 10, h: 13 }); }
      text.addEventListener("click", function (/** @type {Event} */ ev) { ev.stopPropagation(); collapse(c); });
      rect.addEventListener("dblclick", function (/** @type {Event} */ ev) { ev.stopPropagation(); collapse(c); });
      cl.appendChild(grp);
    });
    Object.keys(info).forEach(function (key) { var b = g.node(key); taken.push({ x: b.x - b.width / 2, y: b.y - b.height / 2, w: b.width, h: b.height }); });
    g.edges().forEach(function (/** @type {any} */ e) {
      var edge = g.edge(e);
      var pts = edge.points || [];
      if (!pts.length) { return; }
      var d = "M" + pts.map(function (/** @type {any} */ p) { return p.x.toFixed(1) + "," + p.y.toFixed(1); }).join("L");
      var path = sv("path", { d: d, "class": edge.cut ? "gv-edge gv-cut" : "gv-edge", "data-from": e.v, "data-to": e.w, "marker-end": "url(#gv-arrow)" });
      ed.appendChild(path);
      if (edge.cut) {
        var mid = pts[Math.floor(pts.length / 2)];
        var label = cuts.filter(function (c) { return c[0] === e.v && c[1] === e.w; })[0];
        if (label) {
          var at = cutLabelAt(mid, measure(label[2], 10), taken);
          var t = sv("text", { x: at.x, y: at.y, "class": "gv-cut-label" }); t.textContent = label[2]; ed.appendChild(t);
        }
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
      var cls = "gv-node gv-" + kind; // a finding's mark (gv-mark-*) is set by classes(): from its moment on
      var grp = sv("g", { "class": cls, "data-key": key, transform: "translate(" + (b.x - b.width / 2) + "," + (b.y - b.height / 2) + ")",
                          tabindex: 0, role: "button", "aria-label": info[key].lines.join(" · ") + (isNode ? "" : " (closed box: Enter opens it)") });
      if (isNode) { grp.setAttribute("data-node", D.ids[idx]); } else { grp.setAttribute("data-group", idx); }
      var rect = sv("rect", { width: b.width, height: b.height, rx: isNode ? 3 : 7, "class": "gv-shape" });
      var l1 = sv("text", { x: 9, y: info[key].lines[1] ? 14 : 15, "class": "gv-label" }); l1.textContent = info[key].lines[0];
      add(grp, rect, l1);
      if (info[key].lines[1]) { var l2 = sv("text", { x: 9, y: 28, "class": "gv-sub" }); l2.textContent = info[key].lines[1]; grp.appendChild(l2); }
      grp.addEventListener("mouseenter", function (/** @type {MouseEvent} */ ev) { showTip(key, ev); });
      grp.addEventListener("mousemove", function (/** @type {MouseEvent} */ ev) { placeTip(ev); });
      grp.addEventListener("mouseleave", function () { ui.tip.hidden = true; });
      grp.addEventListener("click", function (/** @type {Event} */ ev) {
        ev.stopPropagation();
        if (isNode) { store.ask("details.node", idx, false); store.ask("address.set", "node=" + D.ids[idx]); } else { expand(idx); }
      });
      grp.addEventListener("keydown", function (/** @type {KeyboardEvent} */ ev) { store.ask("keys.node", ev, key); });
      grp.addEventListener("focus", function () { store.ask("keys.keepInView", key); });
      nd.appendChild(grp);
    });
    var gr = g.graph();
    var bounds = { x: 0, y: 0, w: Math.max(gr.width || 1, 1), h: Math.max(gr.height || 1, 1) };
    store.set("bounds", bounds);
    ui.mini.setAttribute("viewBox", "0 0 " + bounds.w + " " + bounds.h);
    drawMinimap(g, info, clusters);
    classes();
  }
  /** the boxes and nodes as rectangles, in their kinds' colours
   * @param {any} g @param {Object<string, any>} info @param {Set<number>} clusters */
  function drawMinimap(g, info, clusters) {
    ui.miniLayer.textContent = "";
    /** @param {any} b @param {string} cls */
    var box = function (b, cls) {
      ui.miniLayer.appendChild(sv("rect", { x: b.x - b.width / 2, y: b.y - b.height / 2, width: b.width, height: b.height, "class": cls }));
    };
    clusters.forEach(function (c) { var b = g.node("c" + c); if (b && b.width !== undefined) { box(b, "gv-mini-cluster"); } });
    Object.keys(info).forEach(function (key) {
      box(g.node(key), "gv-mini-node gv-mini-" + (key[0] === "n" ? N[+key.slice(1)].kind : "box"));
    });
  }
  /** right of the edge, else left, else above or below: where nothing else is
   * @param {{x: number, y: number}} mid @param {number} width @param {{x: number, y: number, w: number, h: number}[]} taken */
  function cutLabelAt(mid, width, taken) {
    var tries = [[4, 0], [-4 - width, 0], [4, -14], [4, 14], [-4 - width, -14], [-4 - width, 14], [4, -28], [4, 28]];
    for (var k = 0; k < tries.length; k++) {
      var box = { x: mid.x + tries[k][0], y: mid.y + tries[k][1] - 10, w: width, h: 12 };
      if (!taken.some(function (t) { return h.overlaps(t, box); })) { taken.push(box); return { x: box.x, y: mid.y + tries[k][1] }; }
    }
    return { x: mid.x + 4, y: mid.y };
  }
  /** ‹ step 2 › in a rolled step box's title: which of its steps is shown @param {number} c @param {number} x @param {number} y */
  function instanceControl(c, x, y) {
    var box = sv("g", { "class": "gv-instances", "data-group": c });
    var k = core.steps.shownInstance(store.get("chosen"), c), inst = G[c].instances;
    var prev = sv("text", { x: x, y: y, "class": "gv-inst-prev" }); prev.textContent = "‹";
    var label = sv("text", { x: x + 14, y: y, "class": "gv-inst-label" });
    label.textContent = "step " + inst[k].number + " (" + (k + 1) + "/" + inst.length + ")";
    var next = sv("text", { x: x + 18 + measure(label.textContent, 10), y: y, "class": "gv-inst-next" }); next.textContent = "›";
    var t1 = sv("title", {}); t1.textContent = "show the previous step of this box"; prev.appendChild(t1);
    var t2 = sv("title", {}); t2.textContent = "show the next step of this box"; next.appendChild(t2);
    prev.addEventListener("click", function (/** @type {Event} */ ev) { ev.stopPropagation(); pickStep(c, k - 1); });
    next.addEventListener("click", function (/** @type {Event} */ ev) { ev.stopPropagation(); pickStep(c, k + 1); });
    add(box, prev, label, next);
    return box;
  }
  /** box g shows its k-th step (wrapping around) @param {number} g @param {number} k */
  function pickStep(g, k) {
    store.set("chosen", core.steps.pick(store.get("chosen"), g, k));
    if (store.get("layout")) { redraw(); }
    var selected = store.get("selected");
    if (selected !== null && core.steps.stepGroup(selected) === g) { store.ask("details.node", selected, true); }
  }
  /** the step picker's choice: box g open, showing what `chosen` says @param {number} g @param {Object<number, number>} chosen */
  function choose(g, chosen) {
    var open = new Set(store.get("expanded")); open.add(g);
    store.set("expanded", open); store.set("chosen", chosen);
    redraw(); store.ask("view.zoomTo", ["c" + g]);
  }

  // ------------------------------------------------------------------ hover: op, module, file and line
  /** @param {string} key @param {MouseEvent} ev */
  function showTip(key, ev) {
    var tip = ui.tip, idx = +key.slice(1);
    tip.textContent = "";
    if (key[0] === "n") {
      var n = nodeAt(idx);
      tip.appendChild(el("strong", "gv-tip-op", n.label));
      if (n.module) { tip.appendChild(el("div", "gv-tip-module", "module " + n.module)); }
      if (n.file !== undefined) {
        tip.appendChild(el("div", "gv-tip-where", core.where(n.file, n.line)));
        var code = core.sourceLine(n.file, n.line);
        if (code) { tip.appendChild(el("code", "gv-tip-code", h.cut(code, 90))); }
      }
      if (n.step) { tip.appendChild(el("div", "gv-tip-module", "as in step " + n.step + (n.absent ? ": not in this step" : ""))); }
      if (n.saved) { tip.appendChild(el("div", "gv-tip-saved", "saved: " + n.saved.map(function (/** @type {any} */ s) { return s.name + (s.v === null ? "" : " v" + s.v); }).join(", "))); }
    } else {
      var grp = G[idx];
      tip.appendChild(el("strong", "gv-tip-op", grp.label));
      tip.appendChild(el("div", "gv-tip-module", (grp.path ? grp.path + " · " : "") + hier.total[idx] + " nodes · click to open"));
    }
    tip.hidden = false;
    placeTip(ev);
  }
  /** @param {MouseEvent} ev */
  function placeTip(ev) {
    var box = ui.tip.parentNode.getBoundingClientRect(), w = ui.tip.offsetWidth, ht = ui.tip.offsetHeight;
    var x = ev.clientX - box.left + 14, y = ev.clientY - box.top + 14;
    if (x + w > box.width - 4) { x = Math.max(4, ev.clientX - box.left - w - 14); }
    if (y + ht > box.height - 4) { y = Math.max(4, ev.clientY - box.top - ht - 14); }
    ui.tip.style.left = x + "px"; ui.tip.style.top = y + "px";
  }
  /** the drawn nodes' classes: outlined, matched, selected, not run yet, freed, a finding's mark from its moment on */
  function classes() {
    var hits = store.get("hits"), found = store.get("found"), layout = store.get("layout"), selected = store.get("selected");
    var pos = store.get("pos");
    var any = hits.size > 0 || found.size > 0;
    ui.svg.classList.toggle("gv-focus", any);
    var cur = core.replay.currentSeq(pos);
    [].forEach.call(ui.layer.querySelectorAll(".gv-node"), function (/** @type {Element} */ node) {
      var key = /** @type {string} */ (node.getAttribute("data-key"));
      /** @type {number[]} */
      var members = layout.info[key].members;
      var hit = members.some(function (i) { return hits.has(i); });
      var isFound = members.some(function (i) { return found.has(i); });
      node.classList.toggle("gv-hit", hit && key[0] === "n");
      node.classList.toggle("gv-hit-box", hit && key[0] === "g");
      node.classList.toggle("gv-found", isFound);
      node.classList.toggle("gv-selected", key === "n" + selected);
      var future = E.length && members.every(function (i) { return nodeAt(i).seq > cur; });
      var freed = members.every(function (i) { var v = nodeAt(i); return v.freed !== undefined && v.freed <= cur; });
      node.classList.toggle("gv-future", !!future);
      node.classList.toggle("gv-freed", !future && freed);
      var i = +key.slice(1);
      if (key[0] === "n" && N[i].mark) { node.classList.toggle("gv-mark-" + N[i].mark, core.replay.markShown(i, nodeAt(i).seq, N[i].mark, pos)); }
    });
    [].forEach.call(ui.layer.querySelectorAll(".gv-edge"), function (/** @type {Element} */ path) {
      var a = /** @type {string} */ (path.getAttribute("data-from")), b = /** @type {string} */ (path.getAttribute("data-to"));
      /** @param {string} k */
      var lit = function (k) { return layout.info[k] && layout.info[k].members.some(function (/** @type {number} */ i) { return hits.has(i); }); };
      path.classList.toggle("gv-hit", lit(a) && lit(b));
    });
    store.ask("legend.draw");
  }
  /** open box g and bring it into view; false when it holds too many nodes to draw @param {number} g */
  function expand(g) {
    var trial = new Set(store.get("expanded")); trial.add(g);
    var count = hier.shownCount(trial);
    if (count > L.MAX_DRAW) {
      ui.note.textContent = "“" + G[g].label + "” holds " + hier.total[g].toLocaleString() + " nodes: too many to draw at once; search finds them";
      return false;
    }
    store.set("expanded", trial);
    redraw();
    store.ask("view.bringIntoView", ["c" + g]);
    return true;
  }
  /** close box g and what is inside it @param {number} g */
  function collapse(g) {
    var open = new Set(store.get("expanded"));
    open.delete(g);
    var stack = hier.childGroups[g].slice();
    while (stack.length) { var c = stack.pop(); open.delete(c); stack.push.apply(stack, hier.childGroups[c]); }
    store.set("expanded", open);
    redraw();
    store.ask("view.zoomTo", ["g" + g], true);
  }
  /** open the boxes around node i, unless that would draw more than MAX_DRAW things @param {number} i */
  function reveal(i) {
    var expanded = store.get("expanded"), trial = new Set(expanded);
    hier.chain(N[i].g).forEach(function (/** @type {number} */ g) { trial.add(g); });
    if (trial.size === expanded.size) { return true; }
    if (hier.shownCount(trial) > L.MAX_DRAW) {
      var box = +rep(i).slice(1);
      store.set("note", "“" + N[i].label + "” is inside “" + G[box].label + "”: too many nodes to open; the box is outlined");
      return false;
    }
    store.set("expanded", trial);
    return true;
  }
  /** "open all": level by level, while the layout stays quick (nested boxes are what costs dagre most) */
  function openAll() {
    var open = new Set(store.get("expanded"));
    for (var depth = 0; depth <= hier.maxDepth; depth++) {
      var next = new Set(open), d = depth;
      G.forEach(function (/** @type {any} */ g, /** @type {number} */ i) { if (g.depth === d && g.kind !== "line") { next.add(i); } });
      if (hier.shownCount(next) > L.OPEN_ALL_ITEMS || next.size > L.OPEN_ALL_BOXES || hier.shownEdges(next) > L.OPEN_ALL_EDGES) { break; }
      open = next;
    }
    var closed = G.some(function (/** @type {any} */ g, /** @type {number} */ i) { return g.kind !== "line" && !open.has(i) && hier.chain(G[i].parent).every(function (/** @type {number} */ c) { return open.has(c); }); });
    store.set("expanded", open); redraw(); store.ask("view.fit");
    if (closed) {
      var said = ui.note.textContent; // what the drawing itself said (parameters drawn without their edges)
      ui.note.textContent = "opened what can be laid out quickly; open the other boxes one by one" + (said ? "; " + said : "");
    }
  }
  store.answer("graph.redraw", redraw);
  store.answer("graph.draw", function (/** @type {Set<number>} */ expanded, /** @type {string} */ rankdir) {
    store.set("expanded", expanded); store.set("rankdir", rankdir); redraw();
  });
  store.answer("graph.classes", classes);
  store.answer("graph.expand", expand);
  store.answer("graph.collapse", collapse);
  store.answer("graph.reveal", reveal);
  store.answer("graph.highlight", function (/** @type {Set<number>} */ nodes) { store.set("hits", nodes); });
  store.answer("graph.pickStep", pickStep);
  store.answer("graph.choose", choose);
  store.answer("graph.openAll", openAll);
  store.answer("graph.closeAll", function () { store.set("expanded", new Set()); redraw(); store.ask("view.fit"); });
  store.answer("graph.flushNote", function () { ui.note.textContent = store.get("note"); store.set("note", ""); });
  // the scrubber moved: what has run, what is freed, which marks hold
  store.on("pos", function () {
    if (!store.get("layout")) { return; }
    var next = core.steps.follow(store.get("chosen"), core.replay.currentSeq(store.get("pos")));
    if (next) { store.set("chosen", next); redraw(); } else { classes(); }
  });
  return {};
}
module.exports = { graphPanel: graphPanel };
