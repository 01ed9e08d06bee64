/* gradviz explorer, the document, the page's state, DOM helpers and the box hierarchy (what stands for a node now). */
var SVGNS = "http://www.w3.org/2000/svg";
var FONT = "'DejaVu Sans Mono', monospace";
var MAX_DRAW = 1500; // boxes and nodes drawn at once; more is refused with a message (search still finds them)
var FIRST_VIEW = 60;
var BIG = 100; // nodes of a graph that opens with the lower panel folded, and may be seen in part at first
var FAN_EDGES = 150, LEAF_FANOUT = 8; // past FAN_EDGES edges, a parameter feeding more than LEAF_FANOUT boxes keeps its node, not its edges
var OPEN_ALL_ITEMS = 260, OPEN_ALL_BOXES = 24, OPEN_ALL_EDGES = 300; // what "open all" opens at most: nested boxes and edges between them cost the layout most // the first view opens modules level by level while at most this many things are drawn
var D = JSON.parse(document.getElementById("gv-data").textContent);
var app = document.getElementById("gv-app");
var LEAF_KINDS = new Set(["leaf", "dead", "updated"]);
var N = D.nodes, G = D.groups, T = D.tensors, F = D.findings, E = D.events, FILES = D.files;
var state = { expanded: new Set(), hits: new Set(), found: new Set(), selected: null, finding: null, pos: 0,
              view: null, bounds: null, layout: null, rankdir: "TB", first: "all", search: [], searchAt: -1, note: "" };

// ------------------------------------------------------------------ small helpers
function el(tag, cls, text) {
  var e = document.createElement(tag);
  if (cls) { e.className = cls; }
  if (text !== undefined && text !== null) { e.textContent = String(text); }
  return e;
}
function sv(tag, attrs) {
  var e = document.createElementNS(SVGNS, tag);
  for (var k in attrs) { if (attrs[k] !== undefined) { e.setAttribute(k, String(attrs[k])); } }
  return e;
}
function add(parent) { for (var i = 1; i < arguments.length; i++) { if (arguments[i]) { parent.appendChild(arguments[i]); } } return parent; }
function fileName(i) { return i === null || i === undefined || !FILES[i] ? "?" : FILES[i].name; }
function where(file, line) { return fileName(file) + (line ? ":" + line : ""); }
function sourceLine(file, line) {
  var f = FILES[file];
  if (!f || !line) { return ""; }
  if (f.lines) { return (f.lines[line - 1] || "").trim(); }
  var hit = (f.excerpt || []).filter(function (p) { return p[0] === line; })[0];
  return hit ? hit[1].trim() : "";
}
/* `code` and **bold** of a finding's message as elements; everything else as text */
function breakable(e, text) { // `text` into element e, wrapping between tokens only (codePieces: a <wbr> between them)
  codePieces(text).forEach(function (piece, k) { if (k) { e.appendChild(el("wbr")); } e.appendChild(document.createTextNode(piece)); });
  return e;
}
function codeEl(text) { return breakable(el("code"), text); }
function rich(text) {
  var span = el("span");
  richParts(text).forEach(function (p) {
    span.appendChild(p[0] === "text" ? document.createTextNode(p[1]) : p[0] === "code" ? codeEl(p[1]) : el(p[0], null, p[1]));
  });
  return span;
}
var canvas = document.createElement("canvas").getContext("2d");
function measure(text, size) { canvas.font = size + "px " + FONT; return canvas.measureText(text).width; }
function fit(text, size, width) { return fitText(text, width, function (t) { return measure(t, size); }); }

// ------------------------------------------------------------------ hierarchy
var chains = G.map(function () { return null; });
function chain(g) { // group indexes from the outermost to g
  if (g < 0) { return []; }
  if (!chains[g]) { chains[g] = chain(G[g].parent).concat([g]); }
  return chains[g];
}
var total = G.map(function () { return 0; }), childGroups = G.map(function () { return []; });
G.forEach(function (g, i) { if (g.parent >= 0) { childGroups[g.parent].push(i); } });
N.forEach(function (n) { chain(n.g).forEach(function (g) { total[g]++; }); });
function rep(i) { // what stands for node i now: "n<i>" or the outermost closed box "g<k>"
  var c = chain(N[i].g);
  for (var k = 0; k < c.length; k++) { if (!state.expanded.has(c[k])) { return "g" + c[k]; } }
  return "n" + i;
}
// a rolled step box shows one of its steps at a time: the drawn one, or the one picked with ‹ ›
var chosen = {}; // step group -> index into G[g].instances
var lookups = {};
function stepGroup(i) { var c = chain(N[i].g); return c.length && G[c[0]].kind === "step" && G[c[0]].instances ? c[0] : -1; }
function shownInstance(g) { return chosen[g] !== undefined ? chosen[g] : G[g].drawn; }
function view(i) { // node i as the step picked in its box has it: its seq, output, saved versions, freeing
  var n = N[i], g = stepGroup(i);
  if (g < 0 || shownInstance(g) === G[g].drawn) { return n; }
  var k = shownInstance(g), key = g + ":" + k;
  if (!lookups[key]) { lookups[key] = {}; G[g].instances[k].nodes.forEach(function (r) { lookups[key][r[0]] = r; }); }
  var r = lookups[key][i];
  var out = Object.assign({}, n, { step: G[g].instances[k].number });
  if (!r) { out.absent = true; return out; }
  out.seq = r[1];
  if (r[2] !== null) { out.out = r[2]; }
  if (n.saved) { out.saved = n.saved.map(function (s, j) { var x = r[3][j]; return x ? Object.assign({}, s, { t: x[0], v: x[1] }) : s; }); }
  if (r[4] !== null) { out.freed = r[4]; } else { delete out.freed; }
  if (r[5] !== null && r[5] !== undefined) { out.freed_by = r[5]; } else { delete out.freed_by; }
  return out;
}
function pickInstance(g, k) {
  var count = G[g].instances.length;
  chosen[g] = ((k % count) + count) % count;
  if (state.layout) { redraw(); }
  if (state.selected !== null && stepGroup(state.selected) === g) { showNode(state.selected, true); }
}
function shownCount(expanded) {
  var keep = state.expanded; state.expanded = expanded;
  var seen = new Set();
  for (var i = 0; i < N.length; i++) { seen.add(rep(i)); }
  state.expanded = keep;
  return seen.size;
}
function shownEdges(expanded) {
  // the distinct edges between what `expanded` shows: a parameter feeding every call of a cell inside a loop fans
  // out across boxes, and dagre's time grows with those edges far faster than with the boxes themselves
  var keep = state.expanded; state.expanded = expanded;
  var seen = new Set();
  D.edges.forEach(function (e) { var a = rep(e[0]), b = rep(e[1]); if (a !== b) { seen.add(a + ">" + b); } });
  state.expanded = keep;
  return seen.size;
}
