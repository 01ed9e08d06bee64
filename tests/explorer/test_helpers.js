// The explorer's pure helpers (gradviz/explorer/assets/panels/helpers.js), run by `node --test` from
// tests/explorer/test_panels.py. Each assertion is a value the page shows or a view it sets.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const h = require(path.join(__dirname, "..", "..", "gradviz", "explorer", "assets", "panels", "helpers.js"));

test("bytes are written in binary units, unknown as ?", () => {
  assert.equal(h.bytes(512), "512 B");
  assert.equal(h.bytes(2048), "2.0 KB");
  assert.equal(h.bytes(15 * 1024 * 1024), "15 MB");
  assert.equal(h.bytes(null), "?");
  assert.equal(h.bytes(undefined), "?");
});

test("shapes, versions and cut text", () => {
  assert.equal(h.shape({ shape: [3, 4] }), "[3×4]");
  assert.equal(h.shape({ shape: [] }), " scalar");
  assert.equal(h.versionText(0), "v0");
  assert.equal(h.versionText(null), "v?");  // UNKNOWN_VERSION, as in text and pictures
  assert.equal(h.cut("abcdef", 4), "abc…");
  assert.equal(h.cut("abc", 4), "abc");
});

test("a message's `code` and **bold** become parts, without their marks", () => {
  assert.deepEqual(h.richParts("write to `c` is **silent**."),
    [["text", "write to "], ["code", "c"], ["text", " is "], ["strong", "silent"], ["text", "."]]);
  assert.deepEqual(h.richParts("a lone ` stays"), [["text", "a lone ` stays"]]);
  assert.deepEqual(h.richParts("<img src=x>"), [["text", "<img src=x>"]]);
});

test("code breaks after . ( [ , / = : only, never inside an identifier", () => {
  assert.deepEqual(h.codePieces("h = torch.relu(self.norm(x))"), ["h =", " torch.", "relu(", "self.", "norm(", "x))"]);
  assert.deepEqual(h.codePieces("requires_grad_(False)"), ["requires_grad_(", "False)"]);
  assert.deepEqual(h.codePieces("x."), ["x."]);  // nothing after the last mark: no empty piece
  assert.equal(h.codePieces("a.b, c[0]/d:e").join(""), "a.b, c[0]/d:e");
});

test("fitText keeps the longest start that fits, with an ellipsis", () => {
  const width = (t) => t.length * 10;
  assert.equal(h.fitText("abcdef", 60, width), "abcdef");
  assert.equal(h.fitText("abcdef", 40, width), "abc…");
  assert.equal(h.fitText("abcdef", 5, width), "…");
});

test("the address: findings by number, nodes by id, hostile fragments never throw", () => {
  assert.deepEqual(h.parseAddress("#finding=2"), { finding: 2 });
  assert.deepEqual(h.parseAddress("#node=n5"), { node: "n5" });
  assert.deepEqual(h.parseAddress("#node=a%20b"), { node: "a b" });
  assert.deepEqual(h.parseAddress("#node=%"), { node: "%" });  // decodeURIComponent("%") throws URIError
  assert.deepEqual(h.parseAddress("#node=%E0%A4%A"), { node: "%E0%A4%A" });
  assert.deepEqual(h.parseAddress("#node=%3Cscript%3E"), { node: "<script>" });
  assert.equal(h.parseAddress("#finding=abc"), null);
  assert.equal(h.parseAddress("#xfinding=2"), null);
  assert.equal(h.parseAddress(""), null);
  assert.equal(h.parseAddress(undefined), null);
});

test("frame fits a box with padding and the screen's aspect ratio, never above the largest scale", () => {
  const v = h.frame({ w: 1000, h: 500 }, 0, 0, 968, 100);  // 1000 px across 968 + 2*16 units: scale 1
  assert.deepEqual([v.w, v.h], [1000, 500]);
  assert.equal(v.x, -16);
  assert.equal(v.y + v.h / 2, 50);  // centred on the box
  const small = h.frame({ w: 1000, h: 500 }, 0, 0, 10, 10);
  assert.equal(small.w, 800);  // 1.25 px per unit at most
});

test("centred clamps the view to the layout's ends, or centres a layout smaller than the view", () => {
  const bounds = { x: 0, y: 0, w: 2000, h: 300 };
  const v = h.centred({ w: 850, h: 425 }, bounds, 0, 150, 0.85);
  assert.deepEqual([v.w, v.h], [1000, 500]);
  assert.equal(v.x, -16);  // not left of the layout's padded edge
  assert.equal(v.y, (-16 + 300 + 16 - 500) / 2);  // taller than the layout: centred
  assert.equal(h.centred({ w: 850, h: 425 }, bounds, 5000, 150, 0.85).x, 2016 - 1000);
});

test("boxes: union, containment, overlap", () => {
  assert.deepEqual(h.union([{ x: 0, y: 0, w: 1, h: 1 }, null, { x: 5, y: -2, w: 1, h: 1 }]), { x: 0, y: -2, w: 6, h: 3 });
  assert.equal(h.union([]), null);
  assert.ok(h.contains({ x: 0, y: 0, w: 10, h: 10 }, { x: 2, y: 2, w: 8, h: 8 }));
  assert.ok(!h.contains({ x: 0, y: 0, w: 10, h: 10 }, { x: 2, y: 2, w: 9, h: 8 }));
  assert.ok(h.overlaps({ x: 0, y: 0, w: 10, h: 10 }, { x: 9, y: 9, w: 5, h: 5 }));
  assert.ok(!h.overlaps({ x: 0, y: 0, w: 10, h: 10 }, { x: 10, y: 0, w: 5, h: 5 }));  // touching is not overlapping
});

test("nearest prefers targets ahead in the arrow's direction, then the closest across", () => {
  const targets = [{ key: "up", x: 0, y: -50 }, { key: "down-far", x: 0, y: 200 }, { key: "down-side", x: 80, y: 60 }];
  assert.equal(h.nearest({ x: 0, y: 0 }, targets, 0, 1).key, "down-far");
  assert.equal(h.nearest({ x: 0, y: 0 }, targets, 0, -1).key, "up");
  assert.equal(h.nearest({ x: 0, y: 0 }, [], 0, 1), null);
});
