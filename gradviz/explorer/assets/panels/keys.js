// @ts-check
/* gradviz explorer, the graph by keyboard: Tab reaches nodes and boxes, Enter selects a node or opens a box, the arrow
   keys move along edges (down or right to the ops that use a node, up or left to its inputs). */
/** @param {import("./core.js").Helpers} h @param {import("./core.js").Core} core @param {import("./store.js").Store} store */
function keysPanel(h, core, store) {
  var ui = core.ui;
  var ARROWS = { ArrowDown: [0, 1, true], ArrowRight: [1, 0, true], ArrowUp: [0, -1, false], ArrowLeft: [-1, 0, false] };
  /** a key pressed on a drawn node or box @param {KeyboardEvent} ev @param {string} key */
  function nodeKey(ev, key) {
    if (ev.altKey || ev.ctrlKey || ev.metaKey) { return; }
    var idx = +key.slice(1);
    if (ev.key === "Enter" || ev.key === " ") {
      ev.preventDefault(); ev.stopPropagation();
      if (key[0] === "n") { store.ask("details.node", idx, false); store.ask("address.set", "node=" + core.D.ids[idx]); }
      else if (store.ask("graph.expand", idx)) { focusInside(idx); }
      return;
    }
    var d = /** @type {Object<string, any[]>} */ (ARROWS)[ev.key];
    if (!d || ev.shiftKey) { return; }
    ev.preventDefault(); ev.stopPropagation();
    var layout = store.get("layout"), g = layout.g, info = layout.info;
    var next = ((d[2] ? g.successors(key) : g.predecessors(key)) || []).filter(function (/** @type {string} */ k) { return info[k]; });
    var from = g.node(key);
    var to = /** @type {any} */ (h.nearest({ x: from.x, y: from.y }, next.map(function (/** @type {string} */ k) { var b = g.node(k); return { key: k, x: b.x, y: b.y }; }), d[0], d[1]));
    if (to) { focusKey(to.key); }
  }
  /** @param {string} key */
  function focusKey(key) {
    var node = ui.layer.querySelector('.gv-node[data-key="' + key + '"]');
    if (node) { node.focus({ preventScroll: true }); }
  }
  /** after a box opened from the keyboard: its first drawn node or box, top to bottom @param {number} g */
  function focusInside(g) {
    var layout = store.get("layout");
    /** @type {{key: string, x: number, y: number} | null} */
    var best = null;
    Object.keys(layout.info).forEach(function (k) {
      var first = layout.info[k].members[0];
      if (core.hier.chain(core.N[first].g).indexOf(g) < 0) { return; }
      var b = layout.g.node(k);
      if (!best || b.y < best.y || (b.y === best.y && b.x < best.x)) { best = { key: k, x: b.x, y: b.y }; }
    });
    if (best) { focusKey(/** @type {{key: string}} */ (best).key); }
  }
  /** a node or box reached by keyboard is panned into the view, at the same scale @param {string} key */
  function keepInView(key) {
    var b = store.get("layout").g.node(key), v = store.get("view");
    if (!b || !v) { return; }
    var box = { x: b.x - b.width / 2, y: b.y - b.height / 2, w: b.width, h: b.height };
    if (!h.contains(v, box)) { store.ask("view.set", { x: b.x - v.w / 2, y: b.y - v.h / 2, w: v.w, h: v.h }); }
  }
  store.answer("keys.node", nodeKey);
  store.answer("keys.keepInView", keepInView);
  return {};
}
module.exports = { keysPanel: keysPanel };
