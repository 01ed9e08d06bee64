/* gradviz explorer, start: build the page, wire it, draw the first view. */
build();
drawFindings();
showSummary();
wirePanZoom();
ui.tabMemory.addEventListener("click", function () { selectTab("memory"); });
ui.tabSource.addEventListener("click", function () { selectTab("source"); });
ui.scrub.addEventListener("input", function () { scrubTo(+ui.scrub.value); });
ui.prev.addEventListener("click", function () { scrubTo(state.pos - 1); });
ui.next.addEventListener("click", function () { scrubTo(state.pos + 1); });
ui.search.addEventListener("input", runSearch);
ui.search.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { stepSearch(ev.shiftKey ? -1 : 1); ev.preventDefault(); } });
ui.searchNext.addEventListener("click", function () { stepSearch(1); });
ui.searchPrev.addEventListener("click", function () { stepSearch(-1); });
if (ui.stepPick) {
  ui.stepPick.addEventListener("change", function () {
    var s = D.steps.filter(function (x) { return String(x.number) === ui.stepPick.value; })[0];
    if (!s) { return; }
    var k = 0; while (k < E.length && E[k].seq < s.seq) { k++; }
    scrubTo(Math.min(k + 1, E.length));
    var grp = G.map(function (g, i) { return [g, i]; }).filter(function (p) { return p[0].kind === "step" && p[0].numbers.indexOf(s.number) >= 0; })[0];
    if (grp) {
      state.expanded.add(grp[1]);
      if (grp[0].instances) { chosen[grp[1]] = grp[0].numbers.indexOf(s.number); }
      redraw(); zoomTo(["c" + grp[1]]);
    }
  });
}
selectTab("memory");
scrubTo(E.length);
if (N.length) {
  ui.empty.hidden = true;
  // a big graph takes the lower panel's room at first ("show", or the Memory and Source tabs, open it again)
  if (N.length > BIG) { fold(true); }
  firstDepth();
  if (!fromHash()) { firstView(); }
} else {
  ui.svg.style.display = "none"; ui.mini.style.display = "none";
  ui.empty.textContent = "No autograd graph: " + (D.facts.exception ? "the program stopped before any operation that needs a gradient. " : "no operation of this run needed a gradient. ") +
    D.facts.tensors + " tensors and " + D.facts.events + " events were recorded.";
  fromHash();
}
window.addEventListener("resize", function () { if (state.view && state.bounds) { fitAll(); } });
if (window.performance && performance.mark) { performance.mark("gv-ready"); } // benchmarks/bench_explorer.py
app.setAttribute("data-ready", "1");
