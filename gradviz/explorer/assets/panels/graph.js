/* gradviz explorer, the graph: what is drawn, dagre layout, painting, hover tips, classes, opening and closing boxes. */
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
    titles.forEach(function (t) { if (overlaps(t, { x: left, y: y + 2, w: right - left, h: 12 }) && t.x + t.w + 8 > left) { left = t.x + t.w + 8; } });
    var shown = right - left >= 24 ? fit(title, 10, right - left) : "▾";
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
    text.addEventListener("click", function (ev) { ev.stopPropagation(); collapse(c); });
    rect.addEventListener("dblclick", function (ev) { ev.stopPropagation(); collapse(c); });
    cl.appendChild(grp);
  });
  Object.keys(info).forEach(function (key) { var b = g.node(key); taken.push({ x: b.x - b.width / 2, y: b.y - b.height / 2, w: b.width, h: b.height }); });
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
    var cls = "gv-node gv-" + kind; // a finding's mark (gv-mark-*) is set by applyClasses: from its moment on
    var grp = sv("g", { "class": cls, "data-key": key, transform: "translate(" + (b.x - b.width / 2) + "," + (b.y - b.height / 2) + ")",
                        tabindex: 0, role: "button", "aria-label": info[key].lines.join(" · ") + (isNode ? "" : " (closed box: Enter opens it)") });
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
    grp.addEventListener("keydown", function (ev) { nodeKey(ev, key); });
    grp.addEventListener("focus", function () { keepInView(key); });
    nd.appendChild(grp);
  });
  var gr = g.graph();
  state.bounds = { x: 0, y: 0, w: Math.max(gr.width || 1, 1), h: Math.max(gr.height || 1, 1) };
  ui.mini.setAttribute("viewBox", "0 0 " + state.bounds.w + " " + state.bounds.h);
  drawMinimap(g, info, clusters);
  applyClasses();
}
function drawMinimap(g, info, clusters) { // the boxes and nodes as rectangles, in their kinds' colours
  ui.miniLayer.textContent = "";
  var box = function (b, cls) {
    ui.miniLayer.appendChild(sv("rect", { x: b.x - b.width / 2, y: b.y - b.height / 2, width: b.width, height: b.height, "class": cls }));
  };
  clusters.forEach(function (c) { var b = g.node("c" + c); if (b && b.width !== undefined) { box(b, "gv-mini-cluster"); } });
  Object.keys(info).forEach(function (key) {
    box(g.node(key), "gv-mini-node gv-mini-" + (key[0] === "n" ? N[+key.slice(1)].kind : "box"));
  });
}
function cutLabelAt(mid, width, taken) { // right of the edge, else left, else above or below: where nothing else is
  var tries = [[4, 0], [-4 - width, 0], [4, -14], [4, 14], [-4 - width, -14], [-4 - width, 14], [4, -28], [4, 28]];
  for (var k = 0; k < tries.length; k++) {
    var box = { x: mid.x + tries[k][0], y: mid.y + tries[k][1] - 10, w: width, h: 12 };
    if (!taken.some(function (t) { return overlaps(t, box); })) { taken.push(box); return { x: box.x, y: mid.y + tries[k][1] }; }
  }
  return { x: mid.x + 4, y: mid.y };
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
    if (key[0] === "n" && N[+key.slice(1)].mark) { node.classList.toggle("gv-mark-" + N[+key.slice(1)].mark, markShown(+key.slice(1), cur)); }
  });
  [].forEach.call(ui.layer.querySelectorAll(".gv-edge"), function (path) {
    var a = path.getAttribute("data-from"), b = path.getAttribute("data-to");
    var lit = function (k) { return state.layout.info[k] && state.layout.info[k].members.some(function (i) { return state.hits.has(i); }); };
    path.classList.toggle("gv-hit", lit(a) && lit(b));
  });
  drawLegend();
}
function expand(g) { // open box g and bring it into view; false when it holds too many nodes to draw
  var trial = new Set(state.expanded); trial.add(g);
  var count = shownCount(trial);
  if (count > MAX_DRAW) {
    ui.note.textContent = "“" + G[g].label + "” holds " + total[g].toLocaleString() + " nodes: too many to draw at once; search finds them";
    return false;
  }
  state.expanded.add(g);
  redraw();
  bringIntoView(["c" + g]);
  return true;
}
function collapse(g) {
  state.expanded.delete(g);
  // closing a box closes what is inside it too
  var stack = childGroups[g].slice();
  while (stack.length) { var c = stack.pop(); state.expanded.delete(c); stack.push.apply(stack, childGroups[c]); }
  redraw();
  zoomTo(["g" + g], true);
}
