// @ts-check
/* gradviz explorer, the scrubber (events, versions at a moment: replay.js), the toolbar's step picker and the memory
   panel. It owns the scrubber's position. */
/** @param {import("./core.js").Helpers} h @param {import("./core.js").Core} core @param {import("./store.js").Store} store */
function timePanel(h, core, store) {
  var ui = core.ui, D = core.D, E = core.E, T = core.T, el = core.el, add = core.add, sv = core.sv, replay = core.replay;
  /** @param {number} t */
  function tensorLink(t) { return core.link(T[t] ? T[t].name : "?", function () { store.ask("details.tensor", t); }); }
  /** @param {number} file @param {number} line */
  function placeLink(file, line) { return core.link(core.where(file, line), function () { store.ask("source.show", file, line); }); }
  /** the scrubber after `p` events (clamped): the event's text, its line in the source panel, the graph and memory then
   * @param {number} p */
  function scrubTo(p) {
    p = Math.max(0, Math.min(E.length, p));
    store.set("pos", p);
    ui.scrub.value = String(p);
    ui.prev.disabled = p === 0; ui.next.disabled = p === E.length;
    ui.eventText.textContent = "";
    if (p === 0) { ui.eventText.appendChild(el("span", "gv-ekind", "before the first event · " + D.facts.events + " events")); }
    else {
      var e = E[p - 1];
      add(ui.eventText, el("strong", null, "event " + e.number + " of " + D.facts.events + (e.count > 1 ? " ×" + e.count : "") + " "),
          placeLink(e.file, e.line), el("code", null, " " + h.cut(e.code, 90) + " "), el("span", "gv-ekind", e.kind.replace(/_/g, " ")));
      if (e.text) { ui.eventText.appendChild(el("div", "gv-versions", e.text)); }
      if (e.outcome && e.outcome !== "ok") { ui.eventText.appendChild(el("div", "gv-outcome", e.outcome)); }
      if (e.findings.length) { ui.eventText.appendChild(el("div", "gv-outcome", "finding: " + e.findings.map(function (/** @type {string} */ k) { return k.replace(/_/g, " "); }).join(", "))); }
      ui.eventText.className = "gv-event" + (e.severity ? " sev-" + e.severity : "");
      if (e.file !== null && e.file !== undefined) { store.ask("source.show", e.file, e.line, true); } // the source panel follows
    }
    drawMemory();
  }
  function drawMemory() {
    var box = ui.memory; box.textContent = "";
    var M = D.memory, pos = store.get("pos");
    if (!M.storages.length) { box.appendChild(el("p", "gv-none", "No tensor memory was recorded.")); return; }
    var wrap = el("div", "gv-memory-grid");
    var tables = el("div", "gv-memory-tables");
    var changed = replay.changed(pos);
    var cur = replay.currentSeq(pos);
    var table = el("table", "gv-grid gv-memory-table");
    var head = el("tr"); ["storage / tensor", "shape", "bytes", "version", "counter shared with"].forEach(function (t) { head.appendChild(el("th", null, t)); });
    table.appendChild(head);
    M.storages.forEach(function (/** @type {any} */ s) {
      var sr = el("tr", "gv-storage-row"); var c = el("td", null, s.name + " · " + h.bytes(s.bytes) + " · " + s.device); c.colSpan = 5; sr.appendChild(c); table.appendChild(sr);
      s.tensors.forEach(function (/** @type {number} */ t) {
        var r = T[t];
        var tr = el("tr", changed.has(t) ? "gv-changed" : null); tr.setAttribute("data-tensor", String(t));
        var name = el("td"); name.appendChild(tensorLink(t));
        var v = replay.versionAt(pos, t);
        var shared = replay.sharing(t).map(function (/** @type {number} */ o) { return T[o].name; }).join(", ");
        add(tr, name, el("td", null, r.dtype + h.shape(r)), el("td", null, r.range ? r.range[0] + "-" + r.range[1] : h.bytes(r.bytes)),
            el("td", "gv-version", h.versionText(v)), el("td", null, shared || "own"));
        table.appendChild(tr);
      });
    });
    tables.appendChild(table);
    if (M.left_out) { tables.appendChild(el("p", "gv-none", M.left_out.toLocaleString() + " more tensors are not listed (the search finds their nodes).")); }
    var map = el("div", "gv-storage-map");
    map.appendChild(el("h3", null, "Storage map"));
    M.storages.forEach(function (/** @type {any} */ s) {
      var row = el("div", "gv-map-row");
      var label = el("span", "gv-map-name", s.name.replace(/^storage of /, "")); label.title = s.name; row.appendChild(label);
      var bar = el("div", "gv-map-bar"); bar.title = s.name + ": " + h.bytes(s.bytes);
      s.tensors.forEach(function (/** @type {number} */ t, /** @type {number} */ k) {
        var r = T[t]; if (!r.range || !s.bytes) { return; }
        var seg = el("div", "gv-map-seg" + (changed.has(t) ? " gv-changed" : ""));
        seg.style.left = (100 * r.range[0] / s.bytes) + "%";
        seg.style.width = Math.max(100 * (r.range[1] - r.range[0]) / s.bytes, 1) + "%";
        seg.style.top = (k % 3) * 6 + "px";
        seg.title = r.name + " bytes " + r.range[0] + "-" + r.range[1];
        seg.addEventListener("click", function () { store.ask("details.tensor", t); });
        bar.appendChild(seg);
      });
      row.appendChild(bar);
      map.appendChild(row);
    });
    add(wrap, tables, map);
    if (D.chart) { wrap.appendChild(drawChart(cur)); }
    box.appendChild(wrap);
  }
  /** the graph-memory curve, the event shown marked @param {number} cur */
  function drawChart(cur) {
    var c = D.chart, box = el("div", "gv-chart");
    box.appendChild(el("h3", null, c.headline));
    box.appendChild(el("p", "gv-none", "bytes of saved tensors held by live autograd graphs over the run; dashed: backward calls; orange: the event shown"));
    var W = 600, H = 120;
    var svg = sv("svg", { viewBox: "0 0 " + W + " " + H, "class": "gv-chart-svg", preserveAspectRatio: "none" });
    var maxY = Math.max.apply(null, c.points.map(function (/** @type {number[]} */ p) { return p[1]; }).concat([1]));
    var end = Math.max(c.end, 1);
    /** @param {number} s */
    var X = function (s) { return s / end * W; };
    /** @param {number} b */
    var Y = function (b) { return H - 4 - b / maxY * (H - 12); };
    var d = "M0," + Y(0), last = 0;
    c.points.forEach(function (/** @type {number[]} */ p) { d += "L" + X(p[0]).toFixed(1) + "," + Y(last).toFixed(1) + "L" + X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1); last = p[1]; });
    d += "L" + W + "," + Y(last).toFixed(1);
    svg.appendChild(sv("path", { d: d, "class": "gv-chart-line", "vector-effect": "non-scaling-stroke" }));
    c.backwards.forEach(function (/** @type {number} */ s) { svg.appendChild(sv("line", { x1: X(s), x2: X(s), y1: 0, y2: H, "class": "gv-chart-backward", "vector-effect": "non-scaling-stroke" })); });
    if (cur >= 0) { svg.appendChild(sv("line", { x1: X(cur), x2: X(cur), y1: 0, y2: H, "class": "gv-chart-now", "vector-effect": "non-scaling-stroke" })); }
    box.appendChild(svg);
    if (c.holders.length) { box.appendChild(el("p", "gv-none", "at the peak: " + c.holders.map(function (/** @type {any[]} */ x) { return x[0] + " " + h.bytes(x[1]); }).join("; "))); }
    return box;
  }
  ui.scrub.addEventListener("input", function () { scrubTo(+ui.scrub.value); });
  ui.prev.addEventListener("click", function () { scrubTo(store.get("pos") - 1); });
  ui.next.addEventListener("click", function () { scrubTo(store.get("pos") + 1); });
  if (ui.stepPick) {
    ui.stepPick.addEventListener("change", function () {
      if (ui.stepPick.value === "") { return; }
      var go = core.steps.stepPicked(+ui.stepPick.value, store.get("chosen"));
      if (!go) { return; }
      scrubTo(go.pos);
      if (go.box >= 0) { store.ask("graph.choose", go.box, go.chosen); }
    });
  }
  store.answer("time.scrub", scrubTo);
  return {};
}
module.exports = { timePanel: timePanel };
