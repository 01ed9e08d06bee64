/* gradviz explorer, the scrubber (events, versions at a moment) and the memory panel. */
function currentSeq() { return state.pos === 0 ? -1 : E[state.pos - 1].last; }
function eventOfSeq(seq) { for (var k = 0; k < E.length; k++) { if (E[k].seq >= seq) { return E[k].number + " (line " + E[k].line + ")"; } } return "?"; }
var versionCache = { pos: -1, v: {} };
var counterOf = {};
D.memory.counters.forEach(function (members) { members.forEach(function (t) { counterOf[t] = members; }); });
function versions() {
  if (versionCache.pos === state.pos) { return versionCache.v; }
  var v = {};
  Object.keys(D.memory.start).forEach(function (k) { v[k] = D.memory.start[k]; });
  for (var k = 0; k < state.pos; k++) {
    E[k].versions.forEach(function (c) {
      if (c[2] === null) { return; }
      (counterOf[c[0]] || [c[0]]).forEach(function (t) { v[t] = c[2]; });
    });
  }
  versionCache = { pos: state.pos, v: v };
  return v;
}
function versionAt(t) {
  var v = versions();
  if (v[t] !== undefined) { return v[t]; }
  return T[t] ? T[t].version : null;
}
function scrubTo(p) {
  p = Math.max(0, Math.min(E.length, p));
  state.pos = p;
  ui.scrub.value = String(p);
  ui.prev.disabled = p === 0; ui.next.disabled = p === E.length;
  ui.eventText.textContent = "";
  if (p === 0) { ui.eventText.appendChild(el("span", "gv-ekind", "before the first event · " + D.facts.events + " events")); }
  else {
    var e = E[p - 1];
    add(ui.eventText, el("strong", null, "event " + e.number + " of " + D.facts.events + (e.count > 1 ? " ×" + e.count : "") + " "),
        placeLink(e.file, e.line), el("code", null, " " + cut(e.code, 90) + " "), el("span", "gv-ekind", e.kind.replace(/_/g, " ")));
    if (e.text) { ui.eventText.appendChild(el("div", "gv-versions", e.text)); }
    if (e.outcome && e.outcome !== "ok") { ui.eventText.appendChild(el("div", "gv-outcome", e.outcome)); }
    if (e.findings.length) { ui.eventText.appendChild(el("div", "gv-outcome", "finding: " + e.findings.map(function (k) { return k.replace(/_/g, " "); }).join(", "))); }
    ui.eventText.className = "gv-event" + (e.severity ? " sev-" + e.severity : "");
    if (e.file !== null && e.file !== undefined) { showSource(e.file, e.line, true); } // the source panel follows
  }
  if (state.layout) { if (followSteps(currentSeq())) { redraw(); } else { applyClasses(); } }
  drawMemory();
}
// a step box never shows a step not run yet at the event shown (its nodes would all fade as "not run yet"): it shows
// the last of its steps begun by then; true when a box changed step
var stepStarts = {};
function followSteps(cur) {
  var changed = false;
  G.forEach(function (grp, g) {
    if (grp.kind !== "step" || !grp.instances) { return; }
    var start = stepStarts[g] || (stepStarts[g] = grp.instances.map(function (inst) {
      return inst.nodes.reduce(function (m, r) { return Math.min(m, r[1]); }, Infinity);
    }));
    if (start[shownInstance(g)] <= cur) { return; }
    var best = -1;
    start.forEach(function (s, k) { if (s <= cur && (best < 0 || s > start[best])) { best = k; } });
    if (best >= 0) { chosen[g] = best; changed = true; }
  });
  return changed;
}
function drawMemory() {
  var box = ui.memory; box.textContent = "";
  var M = D.memory;
  if (!M.storages.length) { box.appendChild(el("p", "gv-none", "No tensor memory was recorded.")); return; }
  var wrap = el("div", "gv-memory-grid");
  var tables = el("div", "gv-memory-tables");
  var changed = new Set();
  if (state.pos > 0) { E[state.pos - 1].versions.forEach(function (c) { (counterOf[c[0]] || [c[0]]).forEach(function (t) { changed.add(t); }); }); }
  var cur = currentSeq();
  var table = el("table", "gv-grid gv-memory-table");
  var head = el("tr"); ["storage / tensor", "shape", "bytes", "version", "counter shared with"].forEach(function (h) { head.appendChild(el("th", null, h)); });
  table.appendChild(head);
  M.storages.forEach(function (s) {
    var sr = el("tr", "gv-storage-row"); var c = el("td", null, s.name + " · " + bytes(s.bytes) + " · " + s.device); c.colSpan = 5; sr.appendChild(c); table.appendChild(sr);
    s.tensors.forEach(function (t) {
      var r = T[t];
      var tr = el("tr", changed.has(t) ? "gv-changed" : null); tr.setAttribute("data-tensor", String(t));
      var name = el("td"); name.appendChild(tensorLink(t));
      var v = versionAt(t);
      var shared = (counterOf[t] || []).filter(function (o) { return o !== t; }).map(function (o) { return T[o].name; }).join(", ");
      add(tr, name, el("td", null, r.dtype + shape(r)), el("td", null, r.range ? r.range[0] + "-" + r.range[1] : bytes(r.bytes)),
          el("td", "gv-version", versionText(v)), el("td", null, shared || "own"));
      table.appendChild(tr);
    });
  });
  tables.appendChild(table);
  if (M.left_out) { tables.appendChild(el("p", "gv-none", M.left_out.toLocaleString() + " more tensors are not listed (the search finds their nodes).")); }
  var map = el("div", "gv-storage-map");
  map.appendChild(el("h3", null, "Storage map"));
  M.storages.forEach(function (s) {
    var row = el("div", "gv-map-row");
    var label = el("span", "gv-map-name", s.name.replace(/^storage of /, "")); label.title = s.name; row.appendChild(label);
    var bar = el("div", "gv-map-bar"); bar.title = s.name + ": " + bytes(s.bytes);
    s.tensors.forEach(function (t, k) {
      var r = T[t]; if (!r.range || !s.bytes) { return; }
      var seg = el("div", "gv-map-seg" + (changed.has(t) ? " gv-changed" : ""));
      seg.style.left = (100 * r.range[0] / s.bytes) + "%";
      seg.style.width = Math.max(100 * (r.range[1] - r.range[0]) / s.bytes, 1) + "%";
      seg.style.top = (k % 3) * 6 + "px";
      seg.title = r.name + " bytes " + r.range[0] + "-" + r.range[1];
      seg.addEventListener("click", function () { showTensor(t); });
      bar.appendChild(seg);
    });
    row.appendChild(bar);
    map.appendChild(row);
  });
  add(wrap, tables, map);
  if (D.chart) { wrap.appendChild(drawChart(cur)); }
  box.appendChild(wrap);
}
function drawChart(cur) {
  var c = D.chart, box = el("div", "gv-chart");
  box.appendChild(el("h3", null, c.headline));
  box.appendChild(el("p", "gv-none", "bytes of saved tensors held by live autograd graphs over the run; dashed: backward calls; orange: the event shown"));
  var W = 600, H = 120;
  var svg = sv("svg", { viewBox: "0 0 " + W + " " + H, "class": "gv-chart-svg", preserveAspectRatio: "none" });
  var maxY = Math.max.apply(null, c.points.map(function (p) { return p[1]; }).concat([1]));
  var end = Math.max(c.end, 1);
  var X = function (s) { return s / end * W; }, Y = function (b) { return H - 4 - b / maxY * (H - 12); };
  var d = "M0," + Y(0), last = 0;
  c.points.forEach(function (p) { d += "L" + X(p[0]).toFixed(1) + "," + Y(last).toFixed(1) + "L" + X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1); last = p[1]; });
  d += "L" + W + "," + Y(last).toFixed(1);
  svg.appendChild(sv("path", { d: d, "class": "gv-chart-line", "vector-effect": "non-scaling-stroke" }));
  c.backwards.forEach(function (s) { svg.appendChild(sv("line", { x1: X(s), x2: X(s), y1: 0, y2: H, "class": "gv-chart-backward", "vector-effect": "non-scaling-stroke" })); });
  if (cur >= 0) { svg.appendChild(sv("line", { x1: X(cur), x2: X(cur), y1: 0, y2: H, "class": "gv-chart-now", "vector-effect": "non-scaling-stroke" })); }
  box.appendChild(svg);
  if (c.holders.length) { box.appendChild(el("p", "gv-none", "at the peak: " + c.holders.map(function (h) { return h[0] + " " + bytes(h[1]); }).join("; "))); }
  return box;
}
