// @ts-check
/* gradviz explorer, pan, zoom, drag, minimap, toolbar buttons and keys. */
/** @param {import("./core.js").Helpers} h @param {import("./core.js").Core} core @param {import("./store.js").Store} store */
function controlsPanel(h, core, store) {
  var ui = core.ui;
  function screenWidth() { return store.ask("view.screen").w; }
  ui.svg.addEventListener("wheel", function (/** @type {WheelEvent} */ ev) {
    ev.preventDefault();
    var unit = ev.deltaMode === 1 ? 16 : ev.deltaMode === 2 ? 400 : 1;
    if (ev.ctrlKey || ev.metaKey || (!ev.shiftKey && ev.deltaX === 0)) { // pinch, ctrl+wheel, a mouse wheel: zoom at the pointer
      var p = store.ask("view.toGraph", ev);
      store.ask("view.zoomBy", Math.exp(-ev.deltaY * unit / (ev.ctrlKey ? 100 : 400)), p.x, p.y);
    } else { // two-finger scroll on a trackpad, shift+wheel: pan
      var s = store.get("view").w / screenWidth();
      store.ask("view.panBy", (ev.deltaX || (ev.shiftKey ? ev.deltaY : 0)) * unit * s, (ev.shiftKey ? 0 : ev.deltaY) * unit * s);
    }
  }, { passive: false });
  /** @type {{x: number, y: number, view: any, moved: boolean} | null} */
  var drag = null;
  ui.svg.addEventListener("pointerdown", function (/** @type {PointerEvent} */ ev) {
    if (ev.button !== 0) { return; }
    drag = { x: ev.clientX, y: ev.clientY, view: store.get("view"), moved: false };
  });
  window.addEventListener("pointermove", function (ev) {
    if (!drag) { return; }
    var dx = ev.clientX - drag.x, dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; }
    if (drag.moved) { var v = drag.view, s = v.w / screenWidth(); store.ask("view.set", { x: v.x - dx * s, y: v.y - dy * s, w: v.w, h: v.h }); }
  });
  window.addEventListener("pointerup", function () { if (drag && drag.moved) { ui.svg.setAttribute("data-dragged", "1"); } drag = null; });
  ui.svg.addEventListener("click", function (/** @type {MouseEvent} */ ev) {
    // a drag that ends on a node or a box is a pan, not a click on it
    if (ui.svg.getAttribute("data-dragged")) { ui.svg.removeAttribute("data-dragged"); ev.stopPropagation(); return; }
    if (ev.target === ui.svg) { store.ask("findings.clear"); store.ask("details.unselect"); store.ask("graph.classes"); }
  }, true);
  var miniDrag = false;
  /** @param {PointerEvent} ev */
  function miniMove(ev) {
    var r = ui.mini.getBoundingClientRect(), b = store.get("bounds"), v = store.get("view");
    var scale = Math.max(b.w / r.width, b.h / r.height);
    var ox = (r.width - b.w / scale) / 2, oy = (r.height - b.h / scale) / 2;
    var x = (ev.clientX - r.left - ox) * scale, y = (ev.clientY - r.top - oy) * scale;
    store.ask("view.set", { x: x - v.w / 2, y: y - v.h / 2, w: v.w, h: v.h });
  }
  ui.mini.addEventListener("pointerdown", function (/** @type {PointerEvent} */ ev) { miniDrag = true; miniMove(ev); ev.stopPropagation(); });
  window.addEventListener("pointermove", function (ev) { if (miniDrag) { miniMove(ev); } });
  window.addEventListener("pointerup", function () { miniDrag = false; });
  ui.fit.addEventListener("click", function () { store.ask("view.fit"); });
  ui.reset.addEventListener("click", resetView);
  ui.zoomIn.addEventListener("click", function () { store.ask("view.zoomBy", 1.25); });
  ui.zoomOut.addEventListener("click", function () { store.ask("view.zoomBy", 0.8); });
  ui.expandAll.addEventListener("click", function () { store.ask("graph.openAll"); });
  ui.collapseAll.addEventListener("click", function () { store.ask("graph.closeAll"); });
  document.addEventListener("keydown", function (ev) {
    if (ev.altKey || ev.ctrlKey || ev.metaKey) { return; }
    var tag = ev.target && /** @type {Element} */ (ev.target).tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") { return; }
    var v = store.get("view"), step = v ? v.w / 8 : 0, used = true, pos = store.get("pos");
    if (ev.key === "+" || ev.key === "=") { store.ask("view.zoomBy", 1.25); }
    else if (ev.key === "-" || ev.key === "_") { store.ask("view.zoomBy", 0.8); }
    else if (ev.key === "0" || ev.key === "f") { store.ask("view.fit"); }
    else if (ev.key === "r") { resetView(); }
    else if (ev.key === "ArrowLeft" && ev.shiftKey) { store.ask("view.panBy", -step, 0); }
    else if (ev.key === "ArrowRight" && ev.shiftKey) { store.ask("view.panBy", step, 0); }
    else if (ev.key === "ArrowUp") { store.ask("view.panBy", 0, -step); }
    else if (ev.key === "ArrowDown") { store.ask("view.panBy", 0, step); }
    else if (ev.key === "ArrowLeft") { store.ask("time.scrub", pos - 1); }
    else if (ev.key === "ArrowRight") { store.ask("time.scrub", pos + 1); }
    else if (ev.key === "/") { store.ask("search.focus"); }
    else { used = false; }
    if (used) { ev.preventDefault(); }
  });
  /** "reset": the first view again, nothing picked */
  function resetView() {
    store.ask("findings.clear"); store.ask("details.unselect"); store.ask("view.firstDepth"); store.ask("view.first");
    store.ask("details.summary"); store.ask("address.set", "");
  }
  return {};
}
module.exports = { controlsPanel: controlsPanel };
