// @ts-check
/* gradviz explorer, pure helpers: formatting, the address, view geometry. No DOM, no document: the page inlines this
   file first, and `node --test` loads it on its own (tests/explorer/test_helpers.js), through the export at its end. */
/** @typedef {{ x: number, y: number, w: number, h: number }} Box */
/** @param {number | null | undefined} n */
function bytes(n) {
  if (n === null || n === undefined) { return "?"; }
  var units = ["B", "KB", "MB", "GB", "TB"], i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(n < 10 ? 1 : 0) : String(n)) + " " + units[i];
}
/** @param {{ shape: number[] }} t */
function shape(t) { return t.shape.length ? "[" + t.shape.join("×") + "]" : " scalar"; }
/** @param {any} text @param {number} n */
function cut(text, n) { text = String(text); return text.length > n ? text.slice(0, n - 1) + "…" : text; }
/* a version as every view spells it: `v3`, or `v?` where it is not known (analysis/findings.py, version_text) */
/** @param {number | null | undefined} v */
function versionText(v) { return v === null || v === undefined ? "v?" : "v" + v; }
/* a finding's message in parts: ["code", text], ["strong", text] or ["text", text]; backticks and ** dropped */
/** @param {any} text @returns {string[][]} */
function richParts(text) {
  /** @type {string[][]} */
  var out = [];
  String(text).split(/(`[^`]+`|\*\*[^*]+\*\*)/).forEach(function (part) {
    if (/^`[^`]+`$/.test(part)) { out.push(["code", part.slice(1, -1)]); }
    else if (/^\*\*[^*]+\*\*$/.test(part)) { out.push(["strong", part.slice(2, -2)]); }
    else if (part) { out.push(["text", part]); }
  });
  return out;
}
/* code in pieces that a line may end after (a `.`, `(`, `[`, `,`, `/`, `=`, `:`): the page puts a <wbr> between them,
   so a line breaks between tokens (`self.` | `norm(x)`), never inside an identifier (`requir` | `es_grad_`) */
/** @param {any} text @returns {string[]} */
function codePieces(text) {
  var out = [], start = 0;
  text = String(text);
  for (var k = 0; k < text.length; k++) {
    if (".([,/=:".indexOf(text[k]) >= 0 && k + 1 < text.length) { out.push(text.slice(start, k + 1)); start = k + 1; }
  }
  out.push(text.slice(start));
  return out;
}
/* the longest start of `text` whose width (by `width(text)`) is at most `limit`, with an ellipsis when cut */
/** @param {string} text @param {number} limit @param {(text: string) => number} width */
function fitText(text, limit, width) {
  if (width(text) <= limit) { return text; }
  var lo = 0, hi = text.length;
  while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (width(text.slice(0, mid) + "…") <= limit) { lo = mid; } else { hi = mid - 1; } }
  return text.slice(0, lo) + "…";
}
/* the page's address (location.hash) as {finding: number} (1-based), {node: id}, or null; never throws, whatever
   the fragment holds (a lone `%` is not valid percent-encoding: it is taken as written) */
/** @param {string | undefined} hash @returns {{ finding?: number, node?: string } | null} */
function parseAddress(hash) {
  var h = String(hash || "").replace(/^#/, "");
  var m = /(?:^|&)finding=(\d+)(?:&|$)/.exec(h);
  if (m) { return { finding: parseInt(m[1], 10) }; }
  m = /(?:^|&)node=([^&]+)/.exec(h);
  if (m) {
    var id = m[1];
    try { id = decodeURIComponent(id); } catch (e) { /* not percent-encoded: the text as written */ }
    return { node: id };
  }
  return null;
}
/** @param {number} v @param {number} lo @param {number} hi */
function clamp(v, lo, hi) { return hi < lo ? (lo + hi) / 2 : Math.max(lo, Math.min(hi, v)); }
/* a view box showing [x, y, w, h] (padded) on a screen of {w, h} pixels, never above maxScale pixels per unit */
/** @param {{ w: number, h: number }} screen @param {number} x @param {number} y @param {number} w @param {number} h @param {number} [maxScale] @returns {Box} */
function frame(screen, x, y, w, h, maxScale) {
  var pad = 16;
  w = Math.max(w, 1) + 2 * pad; h = Math.max(h, 1) + 2 * pad; x -= pad; y -= pad;
  var scale = Math.min(screen.w / w, screen.h / h, maxScale || 1.25);
  var vw = screen.w / scale, vh = screen.h / scale;
  return { x: x + w / 2 - vw / 2, y: y + h / 2 - vh / 2, w: vw, h: vh };
}
/* a view at `scale` pixels per unit centred on (cx, cy), moved so that it shows as much of `bounds` as it can */
/** @param {{ w: number, h: number }} screen @param {Box} bounds @param {number} cx @param {number} cy @param {number} scale @returns {Box} */
function centred(screen, bounds, cx, cy, scale) {
  var pad = 16, vw = screen.w / scale, vh = screen.h / scale;
  return { x: clamp(cx - vw / 2, bounds.x - pad, bounds.x + bounds.w + pad - vw),
           y: clamp(cy - vh / 2, bounds.y - pad, bounds.y + bounds.h + pad - vh), w: vw, h: vh };
}
/* the smallest box around boxes given as {x, y, w, h} (null when there are none) */
/** @param {(Box | null | undefined)[]} boxes @returns {Box | null} */
function union(boxes) {
  var x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  boxes.forEach(function (b) {
    if (!b) { return; }
    x0 = Math.min(x0, b.x); y0 = Math.min(y0, b.y); x1 = Math.max(x1, b.x + b.w); y1 = Math.max(y1, b.y + b.h);
  });
  return x0 === Infinity ? null : { x: x0, y: y0, w: x1 - x0, h: y1 - y0 };
}
/** @param {Box} outer @param {Box} inner */
function contains(outer, inner) {
  return inner.x >= outer.x - 0.5 && inner.y >= outer.y - 0.5 && inner.x + inner.w <= outer.x + outer.w + 0.5 &&
    inner.y + inner.h <= outer.y + outer.h + 0.5;
}
/** @param {Box} a @param {Box} b */
function overlaps(a, b) { return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h; }
/* of `targets` ({key, x, y}), the one nearest to `from` ({x, y}), along the direction (dx, dy) first: arrow keys */
/** @template {{ x: number, y: number }} P @param {{ x: number, y: number }} from @param {P[]} targets @param {number} dx @param {number} dy @returns {P | null} */
function nearest(from, targets, dx, dy) {
  /** @type {P | null} */
  var best = null, score = Infinity;
  targets.forEach(function (t) {
    var along = (t.x - from.x) * dx + (t.y - from.y) * dy;
    var across = Math.abs((t.x - from.x) * dy) + Math.abs((t.y - from.y) * dx);
    var s = (along < 0 ? 1e6 : 0) + across * 2 + Math.abs(along);
    if (s < score) { score = s; best = t; }
  });
  return best;
}
module.exports = { bytes: bytes, shape: shape, cut: cut, versionText: versionText, richParts: richParts, codePieces: codePieces,
                   fitText: fitText, parseAddress: parseAddress, clamp: clamp, frame: frame, centred: centred,
                   union: union, contains: contains, overlaps: overlaps, nearest: nearest };
