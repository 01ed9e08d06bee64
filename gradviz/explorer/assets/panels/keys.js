/* gradviz explorer, the graph by keyboard: Tab reaches nodes and boxes, Enter selects a node or opens a box, the arrow
   keys move along edges (down or right to the ops that use a node, up or left to its inputs). */
var ARROWS = { ArrowDown: [0, 1, true], ArrowRight: [1, 0, true], ArrowUp: [0, -1, false], ArrowLeft: [-1, 0, false] };
function nodeKey(ev, key) {
  if (ev.altKey || ev.ctrlKey || ev.metaKey) { return; }
  var idx = +key.slice(1);
  if (ev.key === "Enter" || ev.key === " ") {
    ev.preventDefault(); ev.stopPropagation();
    if (key[0] === "n") { showNode(idx, false); setHash("node=" + D.ids[idx]); }
    else if (expand(idx)) { focusInside(idx); }
    return;
  }
  var d = ARROWS[ev.key];
  if (!d || ev.shiftKey) { return; }
  ev.preventDefault(); ev.stopPropagation();
  var g = state.layout.g, info = state.layout.info;
  var next = ((d[2] ? g.successors(key) : g.predecessors(key)) || []).filter(function (k) { return info[k]; });
  var from = g.node(key);
  var to = nearest({ x: from.x, y: from.y }, next.map(function (k) { var b = g.node(k); return { key: k, x: b.x, y: b.y }; }), d[0], d[1]);
  if (to) { focusKey(to.key); }
}
function focusKey(key) {
  var node = ui.layer.querySelector('.gv-node[data-key="' + key + '"]');
  if (node) { node.focus({ preventScroll: true }); }
}
function focusInside(g) { // after a box opened from the keyboard: its first drawn node or box, top to bottom
  var layout = state.layout, best = null;
  Object.keys(layout.info).forEach(function (k) {
    var first = layout.info[k].members[0];
    if (chain(N[first].g).indexOf(g) < 0) { return; }
    var b = layout.g.node(k);
    if (!best || b.y < best.y || (b.y === best.y && b.x < best.x)) { best = { key: k, x: b.x, y: b.y }; }
  });
  if (best) { focusKey(best.key); }
}
function keepInView(key) { // a node or box reached by keyboard is panned into the view, at the same scale
  var b = state.layout.g.node(key), v = state.view;
  if (!b || !v) { return; }
  var box = { x: b.x - b.width / 2, y: b.y - b.height / 2, w: b.width, h: b.height };
  if (!contains(v, box)) { setView({ x: b.x - v.w / 2, y: b.y - v.h / 2, w: v.w, h: v.h }); }
}
