// @ts-check
/* gradviz explorer, the first view's decisions: which boxes open level by level, how a laid-out level can be shown
   (whole, in part, not at all) and which level wins. Pure: the page hands it layouts, `node --test` loads it. */
/**
 * @typedef {import("./core.js").GvDocument} GvDocument
 * @typedef {import("./hierarchy.js").Hierarchy} Hierarchy
 * @typedef {{ x: number, y: number, w: number, h: number }} Box
 * @typedef {{ mode: string, scale: number }} Fit
 * @typedef {{ level: number, dir: string, mode: string, scale?: number }} Pick
 */
var SEVERITY = { error: 3, warning: 2, info: 1 };
/** @param {string} s */
function severity(s) { return /** @type {Object<string, number>} */ (SEVERITY)[s] || 0; }
/** the most severe finding with nodes in the graph (the first of them in the list), or -1
 * @param {GvDocument["findings"]} findings */
function worst(findings) {
  var best = -1;
  findings.forEach(function (f, k) { if (f.nodes.length && (best < 0 || severity(f.severity) > severity(findings[best].severity))) { best = k; } });
  return best;
}
/** the levels of boxes the first view tries, shallow first: of several step boxes only the one with a finding (else
 * the last, the steady state) opens, loops stay `loop ×N` boxes; the boxes that hold other boxes open depth by depth
 * (model > transformer > h > h.0: the module tree's spine), then the boxes that hold only nodes, while at most
 * `limit` things are drawn @param {GvDocument} doc @param {Hierarchy} hier @param {number} limit @returns {Set<number>[]} */
function firstLevels(doc, hier, limit) {
  var G = doc.groups, N = doc.nodes;
  /** @type {number[]} */
  var steps = []; G.forEach(function (g, i) { if (g.kind === "step") { steps.push(i); } });
  var chosen = steps[steps.length - 1];
  doc.findings.forEach(function (f) { f.nodes.forEach(function (i) { var c = hier.chain(N[i].g); if (c.length && G[c[0]].kind === "step" && chosen === steps[steps.length - 1]) { chosen = c[0]; } }); });
  var skip = new Set(steps.filter(function (s) { return s !== chosen; }));
  G.forEach(function (g, i) { if (g.kind === "loop") { skip.add(i); } });
  /** @param {number} i */
  var inside = function (i) { return !hier.chain(i).some(function (c) { return skip.has(c); }); };
  /** @param {number} i */
  var holds = function (i) { return hier.childGroups[i].some(function (c) { return G[c].kind !== "line"; }); };
  /** @type {Set<number>} */
  var open = new Set();
  var levels = [open];
  /** @param {(g: GvDocument["groups"][number], i: number) => boolean} test */
  var grow = function (test) {
    var next = new Set(open);
    G.forEach(function (g, i) { if (g.kind !== "line" && inside(i) && test(g, i)) { next.add(i); } });
    if (next.size === open.size) { return true; }
    if (hier.shownCount(next) > limit) { return false; }
    open = next; levels.push(open); return true;
  };
  for (var depth = 0; depth <= hier.maxDepth; depth++) {
    var d = depth;
    if (!grow(function (g, i) { return g.depth === d && (holds(i) || !hier.childGroups[i].length && g.kind === "step"); })) { return levels; }
  }
  grow(function () { return true; });
  return levels;
}
/** `expanded` and the boxes around the most severe finding's nodes, while at most `limit` things are drawn
 * @param {GvDocument} doc @param {Hierarchy} hier @param {Set<number>} expanded @param {number} limit */
function withWorst(doc, hier, expanded, limit) {
  var k = worst(doc.findings), out = new Set(expanded);
  if (k < 0) { return out; }
  doc.findings[k].nodes.forEach(function (i) {
    var trial = new Set(out);
    hier.chain(doc.nodes[i].g).forEach(function (g) { trial.add(g); });
    if (trial.size !== out.size && hier.shownCount(trial) <= limit) { out = trial; }
  });
  return out;
}
/** the layout keys the first view keeps on screen: the most severe finding's nodes, and the outputs (the loss) when
 * `all` or there is no such finding @param {GvDocument} doc @param {Hierarchy} hier @param {Set<number>} expanded @param {boolean} all */
function mustSee(doc, hier, expanded, all) {
  var keys = new Set(), k = worst(doc.findings);
  if (k >= 0) { doc.findings[k].nodes.forEach(function (i) { keys.add(hier.rep(i, expanded)); }); }
  if (all || k < 0) { doc.nodes.forEach(function (n, i) { if (n.kind === "output") { keys.add(hier.rep(i, expanded)); } }); }
  return Array.from(keys);
}
/** how a layout of `bounds` can be shown first on a pane of `pane` pixels: whole (fitted at `scale` pixels per unit,
 * at least `readable`), in part (at `readable`: across the pane, `must` along it, at most half a pane past it), or
 * not at all (null; a graph of at most `big` nodes is always seen whole)
 * @param {{ scale: number, readable: number, nodes: number, big: number, pane: {w: number, h: number}, bounds: Box,
 *           must: Box | null, rankdir: string }} o @returns {Fit | null} */
function firstFit(o) {
  if (o.scale >= o.readable) { return { mode: "all", scale: o.scale }; }
  if (o.nodes <= o.big) { return null; }
  var pane = o.pane, b = o.bounds, m = o.must, pad = 32, r = o.readable, wide = o.rankdir === "LR";
  var across = wide ? b.h + pad <= pane.h / r : b.w + pad <= pane.w / r;
  var along = !m || (wide ? m.w + pad <= pane.w / r : m.h + pad <= pane.h / r);
  var length = wide ? b.w / (pane.w / r) : b.h / (pane.h / r);
  return across && along && length <= 1.5 ? { mode: "part", scale: r } : null;
}
/** the deepest level that can be shown first at a readable size: shallow levels first (their layouts are quick; the
 * first that cannot be shown ends the search), each laid out top-down and left-right by `tryLevel(level, dir)`,
 * which answers its firstFit; the direction that suits the pane is kept (whole before in part)
 * @param {number} count @param {(level: number, dir: string) => Fit | null} tryLevel @returns {Pick} */
function pickFirst(count, tryLevel) {
  /** @type {Pick | null} */
  var best = null;
  for (var k = 0; k < count; k++) {
    /** @type {Pick | null} */
    var pick = null;
    for (var d = 0; d < 2; d++) {
      var dir = d ? "LR" : "TB";
      if (pick && pick.mode === "all") { break; } // seen whole top-down: the usual direction is kept
      var f = tryLevel(k, dir);
      if (f && (!pick || +(f.mode === "all") > +(pick.mode === "all") || (f.mode === pick.mode && f.scale > /** @type {number} */ (pick.scale)))) {
        pick = { level: k, dir: dir, mode: f.mode, scale: f.scale };
      }
    }
    if (!pick) { if (best) { break; } pick = { level: k, dir: "TB", mode: "all" }; }
    best = pick;
  }
  return best || { level: 0, dir: "TB", mode: "all" };
}
/** whether a whole layout at `scale` can be read: at least `readable`, or `small` for a graph of at most `big` nodes
 * @param {number} scale @param {number} nodes @param {{ readable: number, small: number, big: number }} limits */
function wholeReadable(scale, nodes, limits) { return scale >= limits.readable || (nodes <= limits.big && scale >= limits.small); }
module.exports = { SEVERITY: SEVERITY, worst: worst, firstLevels: firstLevels, withWorst: withWorst, mustSee: mustSee,
                   firstFit: firstFit, pickFirst: pickFirst, wholeReadable: wholeReadable };
