/* gradviz explorer, the first view (which boxes open, which direction, whole or in part) and the view's geometry. */
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
var SEVERITY = { error: 3, warning: 2, info: 1 };
function worst() { // the most severe finding with nodes in the graph (the first of them in the list), or -1
  var best = -1;
  F.forEach(function (f, k) { if (f.nodes.length && (best < 0 || (SEVERITY[f.severity] || 0) > (SEVERITY[F[best].severity] || 0))) { best = k; } });
  return best;
}
function withWorst(expanded) { // `expanded` and the boxes around the most severe finding's nodes, while they can be drawn
  var k = worst(), out = new Set(expanded);
  if (k < 0) { return out; }
  F[k].nodes.forEach(function (i) {
    var trial = new Set(out);
    chain(N[i].g).forEach(function (g) { trial.add(g); });
    if (trial.size !== out.size && shownCount(trial) <= MAX_DRAW) { out = trial; }
  });
  return out;
}
function mustSee(all) { // the layout keys the first view keeps on screen: the most severe finding's nodes (and outputs)
  var keys = new Set(), k = worst();
  if (k >= 0) { F[k].nodes.forEach(function (i) { keys.add(rep(i)); }); }
  if (all || k < 0) { N.forEach(function (n, i) { if (n.kind === "output") { keys.add(rep(i)); } }); }
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
  var pane = screen(), b = state.bounds, m = extent(mustSee(false)), pad = 32;
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
  // then the boxes around the most severe finding's nodes open too (one more layout; firstView keeps them in view)
  state.expanded = withWorst(levels[best.level]); state.rankdir = best.dir;
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


// ------------------------------------------------------------------ pan and zoom (the svg's viewBox)
function setView(v) {
  state.view = v;
  ui.svg.setAttribute("viewBox", [v.x, v.y, v.w, v.h].map(function (n) { return +n.toFixed(2); }).join(" "));
  ui.miniView.setAttribute("x", v.x); ui.miniView.setAttribute("y", v.y);
  ui.miniView.setAttribute("width", v.w); ui.miniView.setAttribute("height", v.h);
  var b = state.bounds;
  var whole = !b || (v.w >= b.w * 0.98 && v.h >= b.h * 0.98 && v.x <= 1 && v.y <= 1) || !N.length;
  ui.mini.classList.toggle("gv-hidden", whole || !placeMinimap());
}
function placeMinimap() { // into a corner of the pane where it covers no node or box; false when every corner would
  var layout = state.layout, m = ui.svg.getScreenCTM();
  if (!layout || !m || !m.a || !m.d) { return false; }
  var pane = ui.svg.getBoundingClientRect(), host = ui.mini.parentNode.getBoundingClientRect();
  var size = ui.mini.getBoundingClientRect(), gap = 8;
  var xs = [pane.right - gap - size.width, pane.left + gap], ys = [pane.bottom - gap - size.height, pane.top + gap];
  var boxes = Object.keys(layout.info).map(function (k) { var b = layout.g.node(k); return { x: b.x - b.width / 2, y: b.y - b.height / 2, w: b.width, h: b.height }; });
  // and each open box's title band, with the ‹ step › control just above it
  (layout.clusters || new Set()).forEach(function (c) {
    var b = layout.g.node("c" + c);
    if (b && b.width !== undefined) { boxes.push({ x: b.x - b.width / 2, y: b.y - b.height / 2 - 16, w: b.width, h: 32 }); }
  });
  for (var k = 0; k < 4; k++) {
    var x = xs[k % 2], y = ys[k < 2 ? 0 : 1];
    // the corner in graph units, with a margin of a few screen pixels
    var area = { x: (x - 4 - m.e) / m.a, y: (y - 4 - m.f) / m.d, w: (size.width + 8) / m.a, h: (size.height + 8) / m.d };
    if (!boxes.some(function (b) { return overlaps(area, b); })) {
      ui.mini.style.left = (x - host.left) + "px"; ui.mini.style.top = (y - host.top) + "px";
      return true;
    }
  }
  return false;
}
function screen() { var r = ui.svg.getBoundingClientRect(); return { w: Math.max(r.width, 50), h: Math.max(r.height, 50) }; }
function framed(x, y, w, h, maxScale) { return frame(screen(), x, y, w, h, maxScale); } // with the screen's aspect ratio
// the first view and "fit" show a small graph (BIG nodes at most) whole down to SMALL_READABLE (labels of 6.6 px), a
// big one down to READABLE; below, "fit" keeps that scale around the view's centre (a box just opened is there) and
// the first view shows the most severe finding's nodes (the minimap shows the rest)
var SMALL_READABLE = 0.6;
function wholeReadable(scale) { return scale >= READABLE || (N.length <= BIG && scale >= SMALL_READABLE); }
function fitAll() { // the whole graph when it can be read so; else at the smallest readable scale, where the view is
  var b = state.bounds, v = state.view;
  if (!b) { return; }
  if (wholeReadable(fitScale()) || !v) { setView(framed(b.x, b.y, b.w, b.h)); return; }
  setView(centred(screen(), b, v.x + v.w / 2, v.y + v.h / 2, N.length <= BIG ? SMALL_READABLE : READABLE));
}
function bringIntoView(keys) { // keep the view when `keys` are in it; else move it there, zooming out only if need be
  var m = extent(keys), v = state.view, pane = screen();
  if (!m || !v) { return; }
  if (contains(v, m)) { return; }
  var scale = pane.w / v.w;
  if ((m.w + 32) * scale <= pane.w && (m.h + 32) * scale <= pane.h) { setView(centred(pane, state.bounds, m.x + m.w / 2, m.y + m.h / 2, scale)); }
  else { setView(framed(m.x, m.y, m.w, m.h)); }
}
var READABLE = 0.85; // screen pixels per layout unit below which labels cannot be read
function firstView() {
  // the whole graph when it can be read fitted to the pane; else, at a readable scale, the most severe finding's nodes
  // with the outputs (the loss) when they fit together, else the finding's nodes alone; the minimap shows the rest
  var s = fitScale();
  if (wholeReadable(s) || !N.length) { fitAll(); return; }
  var pane = screen(), b = state.bounds;
  var m = extent(mustSee(true)), alone = extent(mustSee(false)) || b;
  var fits = function (x) { return x && (x.w + 32) * READABLE <= pane.w && (x.h + 32) * READABLE <= pane.h; };
  if (!fits(m)) { m = alone; }
  if (!fits(m)) { setView(framed(m.x, m.y, m.w, m.h)); return; } // too far apart to read: all of them, smaller
  setView(centred(pane, b, m.x + m.w / 2, m.y + m.h / 2, READABLE));
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
