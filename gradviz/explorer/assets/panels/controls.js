/* gradviz explorer, pan, zoom, drag, minimap, toolbar buttons and keys. */
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
