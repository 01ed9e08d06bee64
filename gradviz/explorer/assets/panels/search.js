/* gradviz explorer, search by parameter, variable, module or op. */
var index = null;
function searchIndex() {
  if (index) { return index; }
  index = N.map(function (n, i) {
    var words = [n.label, n.module || ""];
    if (n.var !== undefined && T[n.var]) { words.push(T[n.var].parameter || "", (T[n.var].names || []).join(" ")); }
    // the variables an op's output was stored in; not the made-up description of how it was computed, which
    // names its inputs ("x @ fc1.weight.T") and would make every use of a parameter match it
    if (n.out !== undefined && T[n.out]) { words.push((T[n.out].names || []).join(" ")); }
    return words.join(" ").toLowerCase();
  });
  return index;
}
function runSearch() {
  var q = ui.search.value.trim().toLowerCase();
  state.search = []; state.searchAt = -1;
  if (q) { searchIndex().forEach(function (text, i) { if (text.indexOf(q) >= 0) { state.search.push(i); } }); }
  state.found = new Set(state.search.length <= MAX_DRAW ? state.search : state.search.slice(0, MAX_DRAW));
  ui.searchCount.textContent = q ? (state.search.length ? state.search.length + " found" : "nothing found") : "";
  if (state.search.length) { stepSearch(1); } else if (state.layout) { applyClasses(); }
}
function stepSearch(dir) {
  if (!state.search.length) { return; }
  state.searchAt = (state.searchAt + dir + state.search.length) % state.search.length;
  var i = state.search[state.searchAt];
  var before = rep(i);
  reveal(i);
  if (rep(i) !== before) { redraw(); } else { applyClasses(); ui.note.textContent = state.note; state.note = ""; }
  ui.searchCount.textContent = (state.searchAt + 1) + " of " + state.search.length;
  zoomTo(["n" + i]);
  showNode(i, true);
  state.hits = new Set();
  applyClasses();
}
