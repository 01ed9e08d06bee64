// @ts-check
/* gradviz explorer, start: the page's one composition root. It reads the document, makes the helpers, the core and
   the store, hands each panel those three (the store as that panel sees it: it writes only its own fields and answers
   only its own requests), then draws the first view. page.py calls it after every file has defined its module. */
/** the panels, each a factory (h, core, store) -> its small API: [module, factory] */
var PANEL_FACTORIES = [["findings", "findingsPanel"], ["graph", "graphPanel"], ["view", "viewPanel"],
                       ["legend", "legendPanel"], ["keys", "keysPanel"], ["controls", "controlsPanel"],
                       ["details", "detailsPanel"], ["source", "sourcePanel"], ["time", "timePanel"],
                       ["search", "searchPanel"], ["address", "addressPanel"]];
/** @param {Object<string, {exports: any}>} modules @param {any} dagre @param {Document} page @param {Window} win */
function start(modules, dagre, page, win) {
  var h = Object.assign({}, modules.helpers.exports, modules.hierarchy.exports, modules.steps.exports,
                        modules.replay.exports, modules.firstview.exports);
  var app = /** @type {HTMLElement} */ (page.getElementById("gv-app"));
  var D = JSON.parse(/** @type {string} */ (/** @type {HTMLElement} */ (page.getElementById("gv-data")).textContent));
  var core = modules.core.exports.createCore(h, D, page, dagre);
  core.ui = modules.skeleton.exports.buildFrame(core, page, app);
  var S = modules.store.exports;
  var store = S.createStore(S.FIELDS, S.REQUESTS, {
    expanded: new Set(), rankdir: "TB", chosen: {}, layout: null, bounds: null, note: "", hits: new Set(), view: null,
    finding: null, selected: null, found: new Set(), pos: 0 });
  /** @type {Object<string, any>} */
  var panels = {};
  PANEL_FACTORIES.forEach(function (p) { panels[p[0]] = modules[p[0]].exports[p[1]](h, core, store.as(p[0])); });
  var missing = store.unanswered();
  if (missing.length) { throw new Error("no panel answers " + missing.join(", ")); }
  var ask = store.as("start").ask, ui = core.ui, N = core.N;
  panels.findings.draw();
  ask("details.summary");
  ask("source.tab", "memory");
  ask("time.scrub", core.E.length);
  if (N.length) {
    ui.empty.hidden = true;
    // a big graph takes the lower panel's room at first ("show", or the Memory and Source tabs, open it again)
    if (N.length > core.LIMITS.BIG) { ask("source.fold", true); }
    ask("view.firstDepth");
    if (!ask("address.open")) { ask("view.first"); }
  } else {
    ui.svg.style.display = "none"; ui.mini.style.display = "none";
    ui.empty.textContent = "No autograd graph: " + (D.facts.exception ? "the program stopped before any operation that needs a gradient. " : "no operation of this run needed a gradient. ") +
      D.facts.tensors + " tensors and " + D.facts.events + " events were recorded.";
    ask("address.open");
  }
  win.addEventListener("resize", function () { if (store.as("start").get("view") && store.as("start").get("bounds")) { ask("view.fit"); } });
  if (win.performance && win.performance.mark) { win.performance.mark("gv-ready"); } // benchmarks/bench_explorer.py
  app.setAttribute("data-ready", "1");
}
module.exports = { start: start, PANEL_FACTORIES: PANEL_FACTORIES };
