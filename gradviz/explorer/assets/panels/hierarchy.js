// @ts-check
/* gradviz explorer, the box hierarchy of a document: each node's chain of boxes, and what stands for a node when some
   boxes are open. Pure (no DOM): the page inlines it, `node --test` loads it (tests/explorer/test_page_helpers.js). */
/**
 * @typedef {import("./core.js").GvDocument} GvDocument
 * @typedef {{ chain: (g: number) => number[], total: number[], childGroups: number[][], maxDepth: number,
 *             rep: (i: number, expanded: Set<number>) => string, shownCount: (expanded: Set<number>) => number,
 *             shownEdges: (expanded: Set<number>) => number }} Hierarchy
 */
/** @param {GvDocument} doc @returns {Hierarchy} */
function hierarchy(doc) {
  var N = doc.nodes, G = doc.groups;
  /** @type {(number[] | null)[]} */
  var chains = G.map(function () { return null; });
  /** group indexes from the outermost to g @param {number} g @returns {number[]} */
  function chain(g) {
    if (g < 0) { return []; }
    var known = chains[g];
    if (!known) { known = chains[g] = chain(G[g].parent).concat([g]); }
    return known;
  }
  var total = G.map(function () { return 0; });
  /** @type {number[][]} */
  var childGroups = G.map(function () { return []; });
  G.forEach(function (g, i) { if (g.parent >= 0) { childGroups[g.parent].push(i); } });
  N.forEach(function (n) { chain(n.g).forEach(function (g) { total[g]++; }); });
  /** what stands for node i when the boxes of `expanded` are open: "n<i>" or the outermost closed box "g<k>"
   * @param {number} i @param {Set<number>} expanded */
  function rep(i, expanded) {
    var c = chain(N[i].g);
    for (var k = 0; k < c.length; k++) { if (!expanded.has(c[k])) { return "g" + c[k]; } }
    return "n" + i;
  }
  /** how many nodes and boxes `expanded` draws @param {Set<number>} expanded */
  function shownCount(expanded) {
    var seen = new Set();
    for (var i = 0; i < N.length; i++) { seen.add(rep(i, expanded)); }
    return seen.size;
  }
  /** the distinct edges between what `expanded` shows: a parameter feeding every call of a cell inside a loop fans
   * out across boxes, and dagre's time grows with those edges far faster than with the boxes themselves
   * @param {Set<number>} expanded */
  function shownEdges(expanded) {
    var seen = new Set();
    doc.edges.forEach(function (e) { var a = rep(e[0], expanded), b = rep(e[1], expanded); if (a !== b) { seen.add(a + ">" + b); } });
    return seen.size;
  }
  var maxDepth = Math.max.apply(null, G.map(function (g) { return g.depth; }).concat([0]));
  return { chain: chain, total: total, childGroups: childGroups, maxDepth: maxDepth, rep: rep, shownCount: shownCount,
           shownEdges: shownEdges };
}
module.exports = { hierarchy: hierarchy };
