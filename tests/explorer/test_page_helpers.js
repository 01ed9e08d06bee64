// The explorer's pure modules below the panels (gradviz/explorer/assets/panels/: store.js, hierarchy.js, steps.js,
// replay.js, firstview.js), run by `node --test` from tests/explorer/test_panels.py, on one small document: a rolled
// step box (steps 1 and 2, drawn from step 2) holding a module `model` with a module `fc` and a loop.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const dir = path.join(__dirname, "..", "..", "gradviz", "explorer", "assets", "panels");
const { createStore, FIELDS, REQUESTS } = require(path.join(dir, "store.js"));
const { hierarchy } = require(path.join(dir, "hierarchy.js"));
const { stepSwap } = require(path.join(dir, "steps.js"));
const { replay } = require(path.join(dir, "replay.js"));
const fv = require(path.join(dir, "firstview.js"));
const { PANEL_FACTORIES } = require(path.join(dir, "start.js"));

function documentOf() {
  const tensor = (name, version) => ({ name, version, shape: [2], dtype: "float32", device: "cpu", bytes: 8 });
  return {
    nodes: [
      { label: "AddmmBackward0", kind: "op", seq: 11, g: 2, out: 6, saved: [{ name: "mat1", t: 8, v: 1 }] },
      { label: "weight", kind: "leaf", seq: 10, g: 2 },
      { label: "MulBackward0", kind: "op", seq: 12, g: 3, mark: "corrupted" },
      { label: "loss", kind: "output", seq: 14, g: -1 },
    ],
    edges: [[1, 0], [0, 2], [2, 3], [1, 2]],
    groups: [
      { label: "step ×2", kind: "step", parent: -1, depth: 0, numbers: [1, 2], drawn: 1, instances: [
        { number: 1, nodes: [[0, 1, 5, [[7, 0]], null, null], [1, 0, null, [], 9, 3]] },
        { number: 2, nodes: [[0, 11, 6, [[8, 1]], null, null], [1, 10, null, [], null, null], [2, 12, null, [], null, null]] }] },
      { label: "model", kind: "module", parent: 0, depth: 1 },
      { label: "fc", kind: "module", parent: 1, depth: 2 },
      { label: "loop ×3", kind: "loop", parent: 1, depth: 2 },
    ],
    findings: [{ kind: "a", severity: "warning", nodes: [0] }, { kind: "b", severity: "error", nodes: [2] },
               { kind: "c", severity: "error", nodes: [3] }, { kind: "d", severity: "error", nodes: [] }],
    events: [
      { number: 1, seq: 11, last: 11, line: 3, findings: [], versions: [[8, 0, 1]] },
      { number: 2, seq: 13, last: 13, line: 4, findings: ["silently_corrupted_saved_tensor"], versions: [[6, null, null]] },
      { number: 3, seq: 20, last: 21, line: 9, findings: [], versions: [[5, 0, 2]] },
    ],
    memory: { counters: [[5, 6]], start: { 5: 0, 6: 0, 8: 0 }, storages: [] },
    tensors: [0, 1, 2, 3, 4, 5, 6, 7, 8].map((t) => tensor("t" + t, t === 7 ? 4 : 0)),
    steps: [{ number: 1, seq: 1 }, { number: 2, seq: 11 }],
  };
}

test("the store: a field is written by its owner only, and its followers hear of it", () => {
  const store = createStore({ pos: "time", view: "view" }, {}, { pos: 0, view: null });
  const heard = [];
  store.as("graph").on("pos", (v) => heard.push(v));
  store.as("time").set("pos", 3);
  assert.equal(store.as("details").get("pos"), 3);
  assert.deepEqual(heard, [3]);
  assert.throws(() => store.as("graph").set("pos", 1), /graph cannot write pos: time owns it/);
  assert.throws(() => store.as("time").get("nothing"), /no field nothing/);
  assert.equal(store.as("view").get("pos"), 3);  // the refused write changed nothing
});

test("the store: a request is answered by its owner only, with its arguments and result", () => {
  const store = createStore({}, { "time.scrub": "time", "view.fit": "view" }, {});
  assert.throws(() => store.as("graph").answer("time.scrub", () => 0), /graph cannot answer time.scrub: time does/);
  assert.throws(() => store.as("time").answer("time.other", () => 0), /no such request/);
  store.as("time").answer("time.scrub", (a, b) => a + b);
  assert.equal(store.as("controls").ask("time.scrub", 2, 5), 7);
  assert.deepEqual(store.unanswered(), ["view.fit"]);
  assert.throws(() => store.as("controls").ask("view.fit"), /nobody answers view.fit/);
});

test("the page's store: every field and request belongs to a panel that start.js makes, named by its prefix", () => {
  const panels = new Set(PANEL_FACTORIES.map((p) => p[0]));
  Object.values(FIELDS).forEach((owner) => assert.ok(panels.has(owner), owner));
  Object.entries(REQUESTS).forEach(([request, owner]) => assert.equal(request.split(".")[0], owner));
  assert.equal(FIELDS.expanded, "graph");
  assert.equal(FIELDS.pos, "time");
});

test("hierarchy: chains, what stands for a node, what is drawn", () => {
  const hier = hierarchy(documentOf());
  assert.deepEqual(hier.chain(2), [0, 1, 2]);
  assert.deepEqual(hier.total, [3, 3, 2, 1]);
  assert.deepEqual(hier.childGroups, [[1], [2, 3], [], []]);
  assert.equal(hier.maxDepth, 2);
  assert.equal(hier.rep(0, new Set()), "g0");
  assert.equal(hier.rep(0, new Set([0])), "g1");
  assert.equal(hier.rep(0, new Set([0, 1, 2])), "n0");
  assert.equal(hier.rep(3, new Set()), "n3");
  assert.equal(hier.shownCount(new Set()), 2);  // the step box and the loss
  assert.equal(hier.shownCount(new Set([0, 1])), 3);  // fc, the loop, the loss
  assert.equal(hier.shownEdges(new Set()), 1);
  assert.equal(hier.shownEdges(new Set([0, 1, 2])), 4);
});

test("version replay: counters shared, unknown writes skipped, the last known version where no event says", () => {
  const r = replay(documentOf());
  assert.deepEqual(r.versions(0), { 5: 0, 6: 0, 8: 0 });
  assert.equal(r.versionAt(1, 8), 1);
  assert.equal(r.versionAt(2, 6), 0);  // [6, null, null]: the write's version is not known, nothing moves
  assert.equal(r.versionAt(3, 6), 2);  // 5 was written to v2, and 6 shares its counter
  assert.equal(r.versionAt(0, 8), 0);
  assert.equal(r.versionAt(3, 7), 4);  // no event names 7: its tensor's own version
  assert.deepEqual([...r.changed(3)].sort(), [5, 6]);
  assert.deepEqual([...r.changed(0)], []);
  assert.deepEqual(r.sharing(5), [6]);
  assert.deepEqual(r.sharing(8), []);
});

test("version replay: the moment shown, and the event of a seq", () => {
  const r = replay(documentOf());
  assert.equal(r.currentSeq(0), -1);
  assert.equal(r.currentSeq(3), 21);
  assert.equal(r.eventOfSeq(12), "2 (line 4)");
  assert.equal(r.eventOfSeq(99), "?");
});

test("a saved tensor's mark holds from the event that raised its finding, and always at the end", () => {
  const r = replay(documentOf());
  assert.equal(r.markShown(2, 12, "corrupted", 1), false);
  assert.equal(r.markShown(2, 12, "corrupted", 2), true);
  assert.equal(r.markShown(2, 12, "corrupted", 3), true);
  assert.equal(r.markShown(0, 11, "poisoned", 0), true);  // no event says when: from the start
  assert.equal(r.markShown(2, 13, "corrupted", 1), true);  // the step shown ran it after event 2: no event says when
});

test("step swap: the drawn step is the node itself; another step swaps seq, output, saved versions, freeing", () => {
  const doc = documentOf();
  const s = stepSwap(doc, hierarchy(doc));
  assert.equal(s.stepGroup(0), 0);
  assert.equal(s.stepGroup(3), -1);
  assert.equal(s.nodeAt({}, 0), doc.nodes[0]);
  assert.equal(s.shownInstance({}, 0), 1);
  const first = s.nodeAt({ 0: 0 }, 0);
  assert.deepEqual([first.step, first.seq, first.out, first.saved[0].t, first.saved[0].v], [1, 1, 5, 7, 0]);
  assert.equal(first.saved[0].name, "mat1");
  assert.equal(doc.nodes[0].saved[0].t, 8);  // the document is left as it was
  const leaf = s.nodeAt({ 0: 0 }, 1);
  assert.deepEqual([leaf.freed, leaf.freed_by], [9, 3]);
  assert.deepEqual([s.nodeAt({ 0: 0 }, 2).absent, s.nodeAt({ 0: 0 }, 2).step], [true, 1]);
  assert.equal(s.nodeAt({ 0: 0 }, 3), doc.nodes[3]);
});

test("step swap: ‹ › wrap around, the step picker scrubs to the step and picks it in its box", () => {
  const doc = documentOf();
  const s = stepSwap(doc, hierarchy(doc));
  assert.deepEqual(s.pick({}, 0, -1), { 0: 1 });
  assert.deepEqual(s.pick({ 0: 1 }, 0, 2), { 0: 0 });
  assert.deepEqual(s.stepPicked(1, {}), { pos: 1, box: 0, chosen: { 0: 0 } });
  assert.deepEqual(s.stepPicked(2, { 0: 0 }), { pos: 1, box: 0, chosen: { 0: 1 } });
  assert.equal(s.stepPicked(7, {}), null);
});

test("first view: the most severe finding with nodes, the first of them", () => {
  const doc = documentOf();
  assert.equal(fv.worst(doc.findings), 1);
  assert.equal(fv.worst([{ severity: "info", nodes: [1] }, { severity: "error", nodes: [] }]), 0);
  assert.equal(fv.worst([]), -1);
  const hier = hierarchy(doc);
  assert.deepEqual(fv.mustSee(doc, hier, new Set([0]), true), ["g1", "n3"]);
  assert.deepEqual(fv.mustSee(doc, hier, new Set([0]), false), ["g1"]);
});

test("first view: levels open the spine depth by depth, loops stay closed, the limit ends them", () => {
  const doc = documentOf();
  const hier = hierarchy(doc);
  const levels = (limit) => fv.firstLevels(doc, hier, limit).map((s) => [...s].sort());
  assert.deepEqual(levels(60), [[], [0], [0, 1], [0, 1, 2]]);
  assert.deepEqual(levels(3), [[], [0], [0, 1]]);
  assert.deepEqual([...fv.withWorst(doc, hier, new Set([0]), 3)].sort(), [0, 1, 3]);  // the finding's loop opens
  assert.deepEqual([...fv.withWorst(doc, hier, new Set([0]), 2)], [0]);  // unless too much would be drawn
});

test("first view: whole when readable, in part when it fits across and not far along, else not at all", () => {
  const base = { readable: 0.85, nodes: 500, big: 100, pane: { w: 1000, h: 500 }, must: { x: 0, y: 0, w: 50, h: 100 }, rankdir: "TB" };
  assert.deepEqual(fv.firstFit({ ...base, scale: 0.9, bounds: { x: 0, y: 0, w: 10, h: 10 } }), { mode: "all", scale: 0.9 });
  assert.equal(fv.firstFit({ ...base, scale: 0.5, nodes: 100, bounds: { x: 0, y: 0, w: 1000, h: 800 } }), null);
  assert.deepEqual(fv.firstFit({ ...base, scale: 0.5, bounds: { x: 0, y: 0, w: 1000, h: 800 } }), { mode: "part", scale: 0.85 });
  assert.equal(fv.firstFit({ ...base, scale: 0.5, bounds: { x: 0, y: 0, w: 1000, h: 1000 } }), null);  // 1.7 panes long
  assert.equal(fv.firstFit({ ...base, scale: 0.5, bounds: { x: 0, y: 0, w: 1000, h: 800 }, rankdir: "LR" }), null);
  const limits = { readable: 0.85, small: 0.6, big: 100 };
  assert.deepEqual([fv.wholeReadable(0.7, 100, limits), fv.wholeReadable(0.7, 101, limits), fv.wholeReadable(0.5, 5, limits)], [true, false, false]);
});

test("first view: the deepest level shown, whole top-down kept, left-right when only it fits", () => {
  const answers = { "0TB": { mode: "all", scale: 1 }, "1TB": null, "1LR": { mode: "part", scale: 0.85 }, "2TB": null, "2LR": null, "3TB": { mode: "all", scale: 1 } };
  const tried = [];
  const pick = fv.pickFirst(4, (level, dir) => { tried.push(level + dir); return answers[level + dir]; });
  assert.deepEqual(pick, { level: 1, dir: "LR", mode: "part", scale: 0.85 });
  assert.deepEqual(tried, ["0TB", "1TB", "1LR", "2TB", "2LR"]);  // level 0 whole top-down: LR not tried; 2 ends it
  assert.deepEqual(fv.pickFirst(2, () => null), { level: 0, dir: "TB", mode: "all" });  // nothing fits: the top level
});

test("every module loads on its own, as the page wraps it: no file needs another's names", () => {
  const fs = require("node:fs");
  const names = fs.readdirSync(dir).filter((f) => f.endsWith(".js"));
  assert.ok(names.length >= 20, names.join(" "));
  names.forEach((name) => {
    const module = { exports: {} };
    new Function("module", fs.readFileSync(path.join(dir, name), "utf8"))(module);  // defines, runs nothing
    assert.ok(Object.keys(module.exports).length >= 1, name);
  });
});
