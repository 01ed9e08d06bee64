// @ts-check
/* gradviz explorer, the version replay: the version of every tensor at a scrubber position (the memory panel, a saved
   tensor's "saved → now"), the tensors an event changed, and from which event a saved tensor's finding mark holds.
   Pure: `node --test` loads it (tests/explorer/test_page_helpers.js). */
/** @typedef {import("./core.js").GvDocument} GvDocument */
/** a saved-tensor finding's mark holds from the write its finding is about: the finding kind of each such mark */
var MARK_FINDING = { corrupted: "silently_corrupted_saved_tensor", corrupted_unread: "silently_corrupted_saved_tensor", poisoned: "poisoned_saved_tensor", detached_saved: "detach_inplace_saved" };
/** @param {GvDocument} doc */
function replay(doc) {
  var E = doc.events, T = doc.tensors;
  /** @type {Object<number, number[]>} tensor -> the tensors sharing its version counter */
  var counterOf = {};
  doc.memory.counters.forEach(function (members) { members.forEach(function (t) { counterOf[t] = members; }); });
  /** @type {{ pos: number, v: Object<string, number | null> }} */
  var cache = { pos: -1, v: {} };
  /** every tensor's version after the first `pos` events (the scrubber at `pos`) @param {number} pos */
  function versions(pos) {
    if (cache.pos === pos) { return cache.v; }
    /** @type {Object<string, number | null>} */
    var v = {};
    Object.keys(doc.memory.start).forEach(function (k) { v[k] = doc.memory.start[k]; });
    for (var k = 0; k < pos; k++) {
      E[k].versions.forEach(function (c) {
        if (c[2] === null) { return; }
        (counterOf[c[0]] || [c[0]]).forEach(function (t) { v[t] = c[2]; });
      });
    }
    cache = { pos: pos, v: v };
    return v;
  }
  /** tensor t's version at `pos` (its last known version where no event says) @param {number} pos @param {number} t */
  function versionAt(pos, t) {
    var v = versions(pos);
    if (v[t] !== undefined) { return v[t]; }
    return T[t] ? T[t].version : null;
  }
  /** the tensors whose version the event before `pos` changed (with those sharing their counters) @param {number} pos */
  function changed(pos) {
    var out = new Set();
    if (pos > 0) { E[pos - 1].versions.forEach(function (c) { (counterOf[c[0]] || [c[0]]).forEach(function (t) { out.add(t); }); }); }
    return out;
  }
  /** the tensors sharing t's version counter, t itself left out @param {number} t */
  function sharing(t) { return (counterOf[t] || []).filter(function (o) { return o !== t; }); }
  /** the last seq the event before `pos` covers; -1 before the first event @param {number} pos */
  function currentSeq(pos) { return pos === 0 ? -1 : E[pos - 1].last; }
  /** "number (line n)" of the first event at or after `seq`, "?" for none @param {number} seq */
  function eventOfSeq(seq) { for (var k = 0; k < E.length; k++) { if (E[k].seq >= seq) { return E[k].number + " (line " + E[k].line + ")"; } } return "?"; }
  /** @type {Object<string, number>} */
  var markFrom = {};
  /** whether node i's finding mark (`mark`) holds at `pos`, the node run at `seq` (the step shown may move it):
   * from the first event after it that raised the mark's finding, from the start where no event says when
   * @param {number} i @param {number} seq @param {string} mark @param {number} pos */
  function markShown(i, seq, mark, pos) {
    if (!E.length || pos === E.length) { return true; }
    var key = i + ":" + seq;
    if (markFrom[key] === undefined) {
      markFrom[key] = 0;
      var kind = /** @type {Object<string, string>} */ (MARK_FINDING)[mark];
      for (var k = 0; k < E.length; k++) {
        if (E[k].seq > seq && E[k].findings.indexOf(kind) >= 0) { markFrom[key] = k + 1; break; }
      }
    }
    return pos >= markFrom[key];
  }
  return { versions: versions, versionAt: versionAt, changed: changed, sharing: sharing, currentSeq: currentSeq,
           eventOfSeq: eventOfSeq, markShown: markShown };
}
module.exports = { replay: replay, MARK_FINDING: MARK_FINDING };
