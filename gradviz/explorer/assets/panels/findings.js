// @ts-check
/* gradviz explorer, the findings panel: the list, and picking a finding (its nodes outlined and shown, its line). */
/** @param {import("./core.js").Helpers} h @param {import("./core.js").Core} core @param {import("./store.js").Store} store */
function findingsPanel(h, core, store) {
  var F = core.F, ui = core.ui, el = core.el, add = core.add;
  function draw() {
    var box = ui.findings;
    box.textContent = "";
    box.appendChild(el("h2", null, "Findings"));
    if (!F.length) { box.appendChild(el("p", "gv-none", "No findings: nothing wrong was seen in this run.")); return; }
    var list = el("ol", "gv-finding-list");
    F.forEach(function (/** @type {any} */ f, /** @type {number} */ i) {
      var item = el("li", "gv-finding sev-" + f.severity);
      item.setAttribute("data-finding", String(i + 1));
      item.tabIndex = 0;
      var head = el("div", "gv-finding-head");
      add(head, el("span", "gv-badge", f.severity), el("span", "gv-kind", f.kind.replace(/_/g, " ")),
          el("span", "gv-where", core.where(f.file, f.line) + (f.count > 1 ? " · " + f.count + "×" : "")));
      var msg = el("p", "gv-message"); msg.appendChild(core.rich(f.message));
      add(item, head, msg);
      if (f.fix) { var fix = el("p", "gv-fix"); add(fix, el("strong", null, "Fix: "), core.rich(f.fix)); item.appendChild(fix); }
      item.addEventListener("click", function () { select(i, true); });
      item.addEventListener("keydown", function (/** @type {KeyboardEvent} */ ev) { if (ev.key === "Enter") { select(i, true); } });
      list.appendChild(item);
    });
    box.appendChild(list);
  }
  /** finding i: its nodes outlined, revealed and framed, its first node's details, its line @param {number} i @param {boolean} remember */
  function select(i, remember) {
    var f = F[i];
    if (!f) { return; }
    store.set("finding", i);
    store.ask("search.forget");
    store.ask("graph.highlight", new Set(f.nodes));
    f.nodes.forEach(function (/** @type {number} */ n) { store.ask("graph.reveal", n); });
    [].forEach.call(ui.findings.querySelectorAll(".gv-finding"), function (/** @type {Element} */ li, /** @type {number} */ k) { li.classList.toggle("gv-current", k === i); });
    store.ask("graph.redraw");
    store.ask("view.zoomTo", f.nodes.map(function (/** @type {number} */ n) { return "n" + n; }));
    if (f.nodes.length) { store.ask("details.node", f.nodes[0], true); }
    if (f.file !== null && f.file !== undefined) { store.ask("source.show", f.file, f.line); } // the finding's line, not the node's
    if (remember) { store.ask("address.set", "finding=" + (i + 1)); }
  }
  /** no finding picked, nothing outlined */
  function clear() {
    store.ask("graph.highlight", new Set()); store.ask("search.forget"); store.set("finding", null);
    [].forEach.call(ui.findings.querySelectorAll(".gv-finding"), function (/** @type {Element} */ li) { li.classList.remove("gv-current"); });
  }
  store.answer("findings.select", select);
  store.answer("findings.clear", clear);
  return { draw: draw };
}
module.exports = { findingsPanel: findingsPanel };
