// @ts-check
/* gradviz explorer, the view panel: the svg's viewBox (pan, zoom, fit, frame a set of nodes), the minimap's place, and
   the first view (which level of boxes opens, whole or in part: firstview.js decides, this panel lays out). */
/** @param {import("./core.js").Helpers} h @param {import("./core.js").Core} core @param {import("./store.js").Store} store */
function viewPanel(h, core, store) {
  var N = core.N, ui = core.ui, L = core.LIMITS;
  var limits = { readable: L.READABLE, small: L.SMALL_READABLE, big: L.BIG };
  /** @param {{x: number, y: number, w: number, h: number}} v */
  function setView(v) {
    store.set("view", v);
    ui.svg.setAttribute("viewBox", [v.x, v.y, v.w, v.h].map(function (n) { return +n.toFixed(2); }).join(" "));
    ui.miniView.setAttribute("x", v.x); ui.miniView.setAttribute("y", v.y);
    ui.miniView.setAttribute("width", v.w); ui.miniView.setAttribute("height", v.h);
    var b = store.get("bounds");
    var whole = !b || (v.w >= b.w * 0.98 && v.h >= b.h * 0.98 && v.x <= 1 && v.y <= 1) || !N.length;
    ui.mini.classList.toggle("gv-hidden", whole || !placeMinimap());
  }
  /** into a corner of the pane where it covers no node or box; false when every corner would */
  function placeMinimap() {
    var layout = store.get("layout"), m = ui.svg.getScreenCTM();
    if (!layout || !m || !m.a || !m.d) { return false; }
    var pane = ui.svg.getBoundingClientRect(), host = ui.mini.parentNode.getBoundingClientRect();
    var size = ui.mini.getBoundingClientRect(), gap = 8;
    var xs = [pane.right - gap - size.width, pane.left + gap], ys = [pane.bottom - gap - size.height, pane.top + gap];
    var boxes = Object.keys(layout.info).map(function (k) { var b = layout.g.node(k); return { x: b.x - b.width / 2, y: b.y - b.height / 2, w: b.width, h: b.height }; });
    // and each open box's title band, with the ‹ step › control just above it
    (layout.clusters || new Set()).forEach(function (/** @type {number} */ c) {
      var b = layout.g.node("c" + c);
      if (b && b.width !== undefined) { boxes.push({ x: b.x - b.width / 2, y: b.y - b.height / 2 - 16, w: b.width, h: 32 }); }
    });
    for (var k = 0; k < 4; k++) {
      var x = xs[k % 2], y = ys[k < 2 ? 0 : 1];
      // the corner in graph units, with a margin of a few screen pixels
      var area = { x: (x - 4 - m.e) / m.a, y: (y - 4 - m.f) / m.d, w: (size.width + 8) / m.a, h: (size.height + 8) / m.d };
      if (!boxes.some(function (b) { return h.overlaps(area, b); })) {
        ui.mini.style.left = (x - host.left) + "px"; ui.mini.style.top = (y - host.top) + "px";
        return true;
      }
    }
    return false;
  }
  function screen() { var r = ui.svg.getBoundingClientRect(); return { w: Math.max(r.width, 50), h: Math.max(r.height, 50) }; }
  /** a view of the box, with the screen's aspect ratio @param {number} x @param {number} y @param {number} w @param {number} ht @param {number} [maxScale] */
  function framed(x, y, w, ht, maxScale) { return h.frame(screen(), x, y, w, ht, maxScale); }
  /** screen pixels per layout unit when the whole layout is fitted to the graph pane */
  function fitScale() {
    var b = store.get("bounds"), all = framed(b.x, b.y, b.w, b.h);
    return screen().w / all.w;
  }
  /** the box around the layout keys drawn, or null @param {string[]} keys */
  function extent(keys) {
    var g = store.get("layout").g;
    return h.union(keys.map(function (k) {
      var b = g.hasNode(k) ? g.node(k) : null;
      return !b || b.x === undefined ? null : { x: b.x - b.width / 2, y: b.y - b.height / 2, w: b.width, h: b.height };
    }));
  }
  /** the whole graph when it can be read so; else at the smallest readable scale, where the view is */
  function fitAll() {
    var b = store.get("bounds"), v = store.get("view");
    if (!b) { return; }
    if (h.wholeReadable(fitScale(), N.length, limits) || !v) { setView(framed(b.x, b.y, b.w, b.h)); return; }
    setView(h.centred(screen(), b, v.x + v.w / 2, v.y + v.h / 2, N.length <= L.BIG ? L.SMALL_READABLE : L.READABLE));
  }
  /** keep the view when `keys` are in it; else move it there, zooming out only if need be @param {string[]} keys */
  function bringIntoView(keys) {
    var m = extent(keys), v = store.get("view"), pane = screen();
    if (!m || !v) { return; }
    if (h.contains(v, m)) { return; }
    var scale = pane.w / v.w;
    if ((m.w + 32) * scale <= pane.w && (m.h + 32) * scale <= pane.h) { setView(h.centred(pane, store.get("bounds"), m.x + m.w / 2, m.y + m.h / 2, scale)); }
    else { setView(framed(m.x, m.y, m.w, m.h)); }
  }
  /** @param {boolean} all */
  function mustSee(all) { return h.mustSee(core.D, core.hier, store.get("expanded"), all); }
  /** the whole graph when it can be read fitted to the pane; else, at a readable scale, the most severe finding's
   * nodes with the outputs (the loss) when they fit together, else the finding's nodes alone; the minimap shows the rest */
  function firstView() {
    var s = fitScale();
    if (h.wholeReadable(s, N.length, limits) || !N.length) { fitAll(); return; }
    var pane = screen(), b = store.get("bounds");
    var m = extent(mustSee(true)), alone = extent(mustSee(false)) || b;
    /** @param {any} x */
    var fits = function (x) { return x && (x.w + 32) * L.READABLE <= pane.w && (x.h + 32) * L.READABLE <= pane.h; };
    if (!fits(m)) { m = alone; }
    if (!fits(m)) { setView(framed(m.x, m.y, m.w, m.h)); return; } // too far apart to read: all of them, smaller
    setView(h.centred(pane, b, m.x + m.w / 2, m.y + m.h / 2, L.READABLE));
  }
  /** the deepest level of boxes that can be shown first at a readable size (firstview.js), with the boxes around the
   * most severe finding's nodes open too (one more layout; firstView keeps them in view) */
  function firstDepth() {
    var levels = h.firstLevels(core.D, core.hier, L.FIRST_VIEW);
    var best = h.pickFirst(levels.length, function (/** @type {number} */ k, /** @type {string} */ dir) {
      store.ask("graph.draw", new Set(levels[k]), dir);
      return h.firstFit({ scale: fitScale(), readable: L.READABLE, nodes: N.length, big: L.BIG, pane: screen(),
                          bounds: store.get("bounds"), must: extent(mustSee(false)), rankdir: dir });
    });
    store.ask("graph.draw", h.withWorst(core.D, core.hier, levels[best.level], L.MAX_DRAW), best.dir);
  }
  /** frame `keys` (nodes drawn inside closed boxes stand for those); `gently`: the whole graph when it fits readably
   * @param {string[]} keys @param {boolean} [gently] */
  function zoomTo(keys, gently) {
    var layout = store.get("layout"), g = layout && layout.g;
    if (!g) { return; }
    var m = extent(keys.map(function (k) { return k[0] === "n" && !g.hasNode(k) ? core.hier.rep(+k.slice(1), store.get("expanded")) : k; }));
    if (!m) { fitAll(); return; }
    if (gently) { // keep the whole graph in view when it fits at a readable size
      var b = store.get("bounds"), all = framed(0, 0, b.w, b.h);
      if (screen().w / all.w >= 0.55) { setView(all); return; }
    }
    setView(framed(m.x, m.y, m.w, m.h));
  }
  /** @param {number} factor @param {number} [cx] @param {number} [cy] */
  function zoomBy(factor, cx, cy) {
    var v = store.get("view"); if (!v) { return; }
    var x = cx === undefined ? v.x + v.w / 2 : cx, y = cy === undefined ? v.y + v.h / 2 : cy;
    setView({ x: x - (x - v.x) / factor, y: y - (y - v.y) / factor, w: v.w / factor, h: v.h / factor });
  }
  /** @param {number} dx @param {number} dy */
  function panBy(dx, dy) { var v = store.get("view"); if (v) { setView({ x: v.x + dx, y: v.y + dy, w: v.w, h: v.h }); } }
  /** a pointer event's place in graph units @param {MouseEvent} ev */
  function toGraph(ev) { var r = ui.svg.getBoundingClientRect(), v = store.get("view"); return { x: v.x + (ev.clientX - r.left) / r.width * v.w, y: v.y + (ev.clientY - r.top) / r.height * v.h }; }
  store.answer("view.set", setView);
  store.answer("view.fit", fitAll);
  store.answer("view.first", firstView);
  store.answer("view.firstDepth", firstDepth);
  store.answer("view.zoomTo", zoomTo);
  store.answer("view.zoomBy", zoomBy);
  store.answer("view.panBy", panBy);
  store.answer("view.bringIntoView", bringIntoView);
  store.answer("view.toGraph", toGraph);
  store.answer("view.screen", screen);
  return {};
}
module.exports = { viewPanel: viewPanel };
