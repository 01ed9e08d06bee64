// @ts-check
/* gradviz explorer, the legend: every mark drawn in the graph now, named, and when a finding's mark starts to hold. */
/** @param {import("./core.js").Helpers} h @param {import("./core.js").Core} core @param {import("./store.js").Store} store */
function legendPanel(h, core, store) {
  var ui = core.ui, D = core.D, el = core.el, sv = core.sv;
  // [the class after "gv-", what the swatch draws, its name, what it means (the item's title)]: a mark the static views
  // draw too takes their words (picture/palette.py, D.legend, by the palette's name of it: the fifth element)
  var LEGEND = [
    ["output", "node", "output", null, "output"],
    ["leaf", "node", "leaf", null, "leaf"],
    ["dead", "node", "dead parameter", null, "dead"],
    ["updated", "node", "updated, no grad", null, "updated"],
    ["kept", "node", "kept alive", null, "kept"],
    ["mark-corrupted", "node", "corrupted saved", null, "corrupted"],
    ["mark-corrupted_unread", "node", "corrupted, unread", null, "corrupted_unread"],
    ["mark-poisoned", "node", "changed saved", null, "poisoned"],
    ["mark-detached_saved", "node", "detach_ saved", null, "detached_saved"],
    ["box", "node", "closed box", null, "group"],
    ["cut", "edge", "cut", null, "cut"],
    ["future", "node", "not run yet", "faded: not run yet at the event shown"],
    ["freed", "node", "freed", null, "freed"],
    ["hit", "node", "finding's nodes", "outlined orange: the nodes of the finding (or tensor) picked; the rest fades"],
    ["found", "node", "search match", "outlined blue: a match of the search"]
  ];
  /** @param {any[]} row */
  function legendMeaning(row) { return row[4] && D.legend && D.legend[row[4]] ? D.legend[row[4]] : row[3] || row[2]; }
  function marksInUse() {
    var used = new Set();
    [].forEach.call(ui.layer.querySelectorAll(".gv-node"), function (/** @type {Element} */ node) {
      node.classList.forEach(function (c) { if (c.slice(0, 3) === "gv-") { used.add(c === "gv-hit-box" ? "hit" : c.slice(3)); } });
    });
    if (ui.layer.querySelector("path.gv-cut")) { used.add("cut"); }
    return LEGEND.filter(function (row) { return used.has(row[0]); });
  }
  function draw() {
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
      item.title = legendMeaning(row);
      core.add(item, swatch, el("span", null, row[2]));
      ui.legend.appendChild(item);
    });
  }
  store.answer("legend.draw", draw);
  return {};
}
module.exports = { legendPanel: legendPanel };
