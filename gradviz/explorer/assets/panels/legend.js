/* gradviz explorer, the legend: every mark drawn in the graph now, named, and when a finding's mark starts to hold. */
// [the class after "gv-", what the swatch draws, its name, what it means (the item's title)]
var LEGEND = [
  ["output", "node", "output", "output: a backward started here"],
  ["leaf", "node", "leaf", "leaf: a parameter or input, receives .grad"],
  ["dead", "node", "dead parameter", "dead parameter: no gradient reaches it"],
  ["updated", "node", "updated, no grad", "updated by the optimizer without a gradient"],
  ["kept", "node", "kept alive", "a graph kept alive by a reference"],
  ["mark-corrupted", "node", "corrupted saved", "a saved tensor changed silently: its gradient is wrong"],
  ["mark-poisoned", "node", "changed saved", "a saved tensor changed: backward raises"],
  ["mark-detached_saved", "node", "detach_ saved", "a saved tensor detached in place: backward raises"],
  ["box", "node", "closed box", "a closed box: click it or press Enter to open it"],
  ["cut", "edge", "cut", "a cut edge: no gradient flows through it"],
  ["future", "node", "not run yet", "faded: not run yet at the event shown"],
  ["freed", "node", "freed", "dashed: its graph was freed by a backward"],
  ["hit", "node", "finding's nodes", "outlined orange: the nodes of the finding (or tensor) picked; the rest fades"],
  ["found", "node", "search match", "outlined blue: a match of the search"]
];
function marksInUse() {
  var used = new Set();
  [].forEach.call(ui.layer.querySelectorAll(".gv-node"), function (node) {
    node.classList.forEach(function (c) { if (c.slice(0, 3) === "gv-") { used.add(c === "gv-hit-box" ? "hit" : c.slice(3)); } });
  });
  if (ui.layer.querySelector("path.gv-cut")) { used.add("cut"); }
  return LEGEND.filter(function (row) { return used.has(row[0]); });
}
function drawLegend() {
  var rows = marksInUse(), said = rows.map(function (r) { return r[0]; }).join(" ");
  if (ui.legend.getAttribute("data-marks") === said) { return; }
  ui.legend.setAttribute("data-marks", said);
  ui.legend.textContent = "";
  rows.forEach(function (row) {
    var item = el("span", "gv-legend-item"); item.setAttribute("data-mark", row[0]);
    var swatch = sv("svg", { "class": "gv-swatch", width: 18, height: 12, "aria-hidden": "true" });
    if (row[1] === "edge") { swatch.appendChild(sv("path", { d: "M1,6L17,6", "class": "gv-edge gv-cut" })); }
    else {
      var cls = row[0] === "future" || row[0] === "freed" ? "gv-swatch-op gv-" + row[0] : row[0] === "box" ? "gv-box gv-kind-module" : "gv-" + row[0];
      var g = sv("g", { "class": cls }); // not .gv-node: the swatch is no node of the graph
      g.appendChild(sv("rect", { x: 1, y: 1, width: 16, height: 10, rx: 2, "class": "gv-shape" }));
      swatch.appendChild(g);
    }
    item.title = row[3];
    add(item, swatch, el("span", null, row[2]));
    ui.legend.appendChild(item);
  });
}
// a saved-tensor finding's mark holds from the write its finding is about: before that moment the node is plain
var MARK_FINDING = { corrupted: "silently corrupted saved tensor", poisoned: "poisoned saved tensor", detached_saved: "detach inplace saved" };
var markFrom = {};
function markShown(i, cur) {
  if (!E.length || state.pos === E.length) { return true; }
  var seq = view(i).seq, key = i + ":" + seq;
  if (markFrom[key] === undefined) {
    markFrom[key] = 0; // no event says when: from the start
    for (var k = 0; k < E.length; k++) {
      if (E[k].seq > seq && E[k].findings.indexOf(MARK_FINDING[N[i].mark]) >= 0) { markFrom[key] = k + 1; break; }
    }
  }
  return state.pos >= markFrom[key];
}
