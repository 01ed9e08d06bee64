// @ts-check
/* gradviz explorer, search by parameter, variable, module or op. It owns the matches outlined. */
/** @param {import("./core.js").Helpers} h @param {import("./core.js").Core} core @param {import("./store.js").Store} store */
function searchPanel(h, core, store) {
  var ui = core.ui, N = core.N, T = core.T, L = core.LIMITS;
  /** @type {string[] | null} */
  var index = null;
  /** @type {number[]} */
  var matches = [];
  var at = -1;
  function searchIndex() {
    if (index) { return index; }
    index = N.map(function (/** @type {any} */ n) {
      var words = [n.label, n.module || ""];
      if (n.var !== undefined && T[n.var]) { words.push(T[n.var].parameter || "", (T[n.var].names || []).join(" ")); }
      // the variables an op's output was stored in; not the made-up description of how it was computed, which
      // names its inputs ("x @ fc1.weight.T") and would make every use of a parameter match it
      if (n.out !== undefined && T[n.out]) { words.push((T[n.out].names || []).join(" ")); }
      return words.join(" ").toLowerCase();
    });
    return /** @type {string[]} */ (index);
  }
  function runSearch() {
    var q = ui.search.value.trim().toLowerCase();
    matches = []; at = -1;
    if (q) { searchIndex().forEach(function (text, i) { if (text.indexOf(q) >= 0) { matches.push(i); } }); }
    store.set("found", new Set(matches.length <= L.MAX_DRAW ? matches : matches.slice(0, L.MAX_DRAW)));
    ui.searchCount.textContent = q ? (matches.length ? matches.length + " found" : "nothing found") : "";
    if (matches.length) { stepSearch(1); } else if (store.get("layout")) { store.ask("graph.classes"); }
  }
  /** the next (1) or previous (-1) match: revealed, framed, its details @param {number} dir */
  function stepSearch(dir) {
    if (!matches.length) { return; }
    at = (at + dir + matches.length) % matches.length;
    var i = matches[at];
    var before = core.hier.rep(i, store.get("expanded"));
    store.ask("graph.reveal", i);
    if (core.hier.rep(i, store.get("expanded")) !== before) { store.ask("graph.redraw"); } else { store.ask("graph.classes"); store.ask("graph.flushNote"); }
    ui.searchCount.textContent = (at + 1) + " of " + matches.length;
    store.ask("view.zoomTo", ["n" + i]);
    store.ask("details.node", i, true);
    store.ask("graph.highlight", new Set());
    store.ask("graph.classes");
  }
  ui.search.addEventListener("input", runSearch);
  ui.search.addEventListener("keydown", function (/** @type {KeyboardEvent} */ ev) { if (ev.key === "Enter") { stepSearch(ev.shiftKey ? -1 : 1); ev.preventDefault(); } });
  ui.searchNext.addEventListener("click", function () { stepSearch(1); });
  ui.searchPrev.addEventListener("click", function () { stepSearch(-1); });
  store.answer("search.focus", function () { ui.search.focus(); });
  store.answer("search.forget", function () { store.set("found", new Set()); });
  return {};
}
module.exports = { searchPanel: searchPanel };
