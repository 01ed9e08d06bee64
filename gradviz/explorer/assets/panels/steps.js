// @ts-check
/* gradviz explorer, the step swap: a rolled step box (`step ×N`) draws one step's nodes and shows any of its steps on
   that structure (the box's ‹ step k › control, the toolbar's step picker). Pure: `node --test` loads it. */
/**
 * @typedef {import("./core.js").GvDocument} GvDocument
 * @typedef {import("./core.js").GvNode} GvNode
 * @typedef {import("./hierarchy.js").Hierarchy} Hierarchy
 * @typedef {Object<number, number>} Chosen  step box -> index into its `instances` (absent: the drawn one)
 * @typedef {GvNode & { step?: number, absent?: boolean }} NodeView  a node as the step picked in its box has it
 */
/** @param {GvDocument} doc @param {Hierarchy} hier */
function stepSwap(doc, hier) {
  var N = doc.nodes, G = doc.groups;
  /** @type {Object<string, Object<number, any[]>>} */
  var lookups = {};
  /** the rolled step box around node i, or -1 @param {number} i */
  function stepGroup(i) { var c = hier.chain(N[i].g); return c.length && G[c[0]].kind === "step" && G[c[0]].instances ? c[0] : -1; }
  /** which of its steps box g shows @param {Chosen} chosen @param {number} g */
  function shownInstance(chosen, g) { return chosen[g] !== undefined ? chosen[g] : /** @type {number} */ (G[g].drawn); }
  /** node i as the step picked in its box has it: its seq, output, saved versions, freeing
   * @param {Chosen} chosen @param {number} i @returns {NodeView} */
  function nodeAt(chosen, i) {
    var n = N[i], g = stepGroup(i);
    if (g < 0 || shownInstance(chosen, g) === G[g].drawn) { return n; }
    var k = shownInstance(chosen, g), key = g + ":" + k, instances = /** @type {any[]} */ (G[g].instances);
    if (!lookups[key]) { var rows = lookups[key] = {}; instances[k].nodes.forEach(function (/** @type {any[]} */ r) { rows[r[0]] = r; }); }
    var r = lookups[key][i];
    /** @type {NodeView} */
    var out = Object.assign({}, n, { step: instances[k].number });
    if (!r) { out.absent = true; return out; }
    out.seq = r[1];
    if (r[2] !== null) { out.out = r[2]; }
    if (n.saved) { out.saved = n.saved.map(function (s, j) { var x = r[3][j]; return x ? Object.assign({}, s, { t: x[0], v: x[1] }) : s; }); }
    if (r[4] !== null) { out.freed = r[4]; } else { delete out.freed; }
    if (r[5] !== null && r[5] !== undefined) { out.freed_by = r[5]; } else { delete out.freed_by; }
    return out;
  }
  /** `chosen` with box g showing its k-th step (k wraps around) @param {Chosen} chosen @param {number} g @param {number} k */
  function pick(chosen, g, k) {
    var count = /** @type {any[]} */ (G[g].instances).length, out = Object.assign({}, chosen);
    out[g] = ((k % count) + count) % count;
    return out;
  }
  /** where the toolbar's step picker goes for step `number`: the scrubber position just after the step starts, the
   * step box holding it (or -1) and `chosen` with that box showing it @param {number} number @param {Chosen} chosen */
  function stepPicked(number, chosen) {
    var s = doc.steps.filter(function (x) { return x.number === number; })[0], E = doc.events;
    if (!s) { return null; }
    var k = 0; while (k < E.length && E[k].seq < s.seq) { k++; }
    var box = -1;
    G.forEach(function (g, i) { if (box < 0 && g.kind === "step" && (g.numbers || []).indexOf(number) >= 0) { box = i; } });
    var out = Object.assign({}, chosen);
    if (box >= 0 && G[box].instances) { out[box] = (/** @type {number[]} */ (G[box].numbers)).indexOf(number); }
    return { pos: Math.min(k + 1, E.length), box: box, chosen: out };
  }
  /** @type {Object<number, number[]>} */
  var starts = {};
  /** a step box never shows a step not run yet at the event shown (its nodes would all fade as "not run yet"): `chosen`
   * with each such box showing the last of its steps begun by `cur` (a seq), or null when no box changes
   * @param {Chosen} chosen @param {number} cur */
  function follow(chosen, cur) {
    /** @type {Chosen | null} */
    var out = null;
    G.forEach(function (grp, g) {
      if (grp.kind !== "step" || !grp.instances) { return; }
      var start = starts[g] || (starts[g] = grp.instances.map(function (/** @type {any} */ inst) {
        return inst.nodes.reduce(function (/** @type {number} */ m, /** @type {any[]} */ r) { return Math.min(m, r[1]); }, Infinity);
      }));
      if (start[shownInstance(chosen, g)] <= cur) { return; }
      var best = -1;
      start.forEach(function (s, k) { if (s <= cur && (best < 0 || s > start[best])) { best = k; } });
      if (best >= 0) { out = out || Object.assign({}, chosen); out[g] = best; }
    });
    return out;
  }
  return { stepGroup: stepGroup, shownInstance: shownInstance, nodeAt: nodeAt, pick: pick, stepPicked: stepPicked, follow: follow };
}
module.exports = { stepSwap: stepSwap };
