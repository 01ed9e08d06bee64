/* gradviz explorer, details on demand: a node, a tensor, the summary. */
function kv(table, key, value) {
  var tr = el("tr"); add(tr, el("th", null, key));
  var td = el("td"); if (value instanceof Node) { td.appendChild(value); } else { td.textContent = value; }
  tr.appendChild(td); table.appendChild(tr);
}
function tensorLink(t) {
  var a = breakable(el("button", "gv-link"), T[t] ? T[t].name : "?"); a.type = "button";
  a.addEventListener("click", function () { showTensor(t); });
  return a;
}
function placeLink(file, line) {
  var a = breakable(el("button", "gv-link"), where(file, line)); a.type = "button";
  a.addEventListener("click", function () { showSource(file, line); });
  return a;
}
function showSummary() {
  ui.details.textContent = "";
  ui.details.appendChild(el("h2", null, "Details"));
  ui.details.appendChild(el("p", "gv-none", N.length ? "Click a node for its op, module, line and saved tensors; click a box to open it; click a tensor for where it was made, written, aliased and read."
    : "No autograd graph was recorded: no operation of this run needed a gradient" + (D.facts.exception ? " before the program stopped." : ".")));
}
function showNode(i, keepHighlight) {
  var n = view(i);
  state.selected = i;
  if (!keepHighlight) { state.hits = new Set(); }
  applyClasses();
  var box = ui.details; box.textContent = "";
  box.appendChild(el("h2", null, n.label));
  var table = el("table", "gv-kv");
  kv(table, "kind", n.kind === "leaf" ? "leaf (receives .grad)" : n.kind === "output" ? "output: backward started here" : n.kind === "op" ? "backward node" : n.kind);
  if (n.step) { kv(table, "step", "step " + n.step + (n.absent ? " (this node is not in that step)" : "")); }
  if (n.module) { kv(table, "module", n.module); }
  if (n.file !== undefined) { kv(table, "made at", placeLink(n.file, n.line)); kv(table, "source", codeEl(sourceLine(n.file, n.line))); }
  if (n.out !== undefined) { kv(table, "output", tensorLink(n.out)); }
  if (n.var !== undefined) { kv(table, "tensor", tensorLink(n.var)); }
  if (n.freed_by !== undefined) { kv(table, "saved tensors freed", "by the backward at event " + eventOfSeq(n.freed_by)); }
  if (n.freed !== undefined) { kv(table, "node freed", "at event " + eventOfSeq(n.freed) + " (its last holder let go)"); }
  box.appendChild(table);
  if (n.saved) {
    box.appendChild(el("h3", null, "Saved for backward"));
    // three columns that fit the sidebar (a row per tensor, its shape, size and storage on a line under it): seven
    // columns scrolled sideways showed two, the rest cut off behind a scrollbar
    var st = el("table", "gv-grid gv-saved");
    var head = el("tr"); ["name", "tensor", "saved → now"].forEach(function (h) { head.appendChild(el("th", null, h)); });
    st.appendChild(head);
    n.saved.forEach(function (s) {
      var t = T[s.t] || {};
      var mark = s.mark ? "gv-mark-" + s.mark : null;
      var tr = el("tr", mark);
      var td = el("td"); td.appendChild(tensorLink(s.t));
      add(tr, el("td", null, s.name), td, el("td", null, versionText(s.v) + " → " + versionText(versionAt(s.t))));
      st.appendChild(tr);
      var more = el("tr", "gv-saved-more" + (mark ? " " + mark : "")), cell = el("td", null, t.dtype + shape(t) + " · " + bytes(t.bytes) + (t.storage ? " · " : "")); // (t.storage says "storage of …")
      if (t.storage) { cell.appendChild(codeEl(t.storage)); }
      cell.colSpan = 3; more.appendChild(cell); st.appendChild(more);
      if (s.note) { var nr = el("tr", "gv-note-row"); var c = el("td", null, s.note); c.colSpan = 3; nr.appendChild(c); st.appendChild(nr); }
    });
    box.appendChild(st);
  }
  var mine = F.map(function (f, k) { return [f, k]; }).filter(function (p) { return p[0].nodes.indexOf(i) >= 0; });
  if (mine.length) {
    box.appendChild(el("h3", null, "Findings at this node"));
    var ul = el("ul", "gv-plain");
    mine.forEach(function (p) {
      var li = el("li"); var b = el("button", "gv-link sev-" + p[0].severity, (p[1] + 1) + ". " + p[0].kind.replace(/_/g, " ")); b.type = "button";
      b.addEventListener("click", function () { selectFinding(p[1], true); });
      li.appendChild(b); ul.appendChild(li);
    });
    box.appendChild(ul);
  }
  if (n.file !== undefined) { showSource(n.file, n.line, true); }
}
function showTensor(t) {
  var r = T[t]; if (!r) { return; }
  var box = ui.details; box.textContent = "";
  box.appendChild(el("h2", null, r.name));
  var table = el("table", "gv-kv");
  kv(table, "shape", r.dtype + shape(r)); kv(table, "device", r.device); kv(table, "bytes", bytes(r.bytes));
  if (r.parameter) { kv(table, "parameter", r.parameter); }
  kv(table, "made by", r.origin + (r.made ? "" : "")); if (r.made) { kv(table, "made at", placeLink(r.made[0], r.made[1])); kv(table, "source", codeEl(r.made[2])); }
  if (r.source !== undefined) { kv(table, "alias of", tensorLink(r.source)); }
  kv(table, "version now", versionText(versionAt(t)));
  if (r.storage) { kv(table, "storage", r.storage + (r.range ? " bytes " + r.range[0] + "-" + r.range[1] : "")); }
  box.appendChild(table);
  if (r.aliases && r.aliases.length) {
    box.appendChild(el("h3", null, "Other tensors in its storage"));
    var p = el("p"); r.aliases.forEach(function (a, k) { if (k) { p.appendChild(document.createTextNode(", ")); } p.appendChild(tensorLink(a)); });
    box.appendChild(p);
  }
  if (r.events) {
    box.appendChild(el("h3", null, "Written, aliased, used by backward"));
    var ul = el("ul", "gv-plain");
    r.events.forEach(function (e) { var li = el("li"); add(li, el("span", "gv-ekind", e[0].replace(/_/g, " ") + " "), placeLink(e[1], e[2]), document.createTextNode(" "), codeEl(e[3])); ul.appendChild(li); });
    box.appendChild(ul);
  }
  if (r.reads) {
    box.appendChild(el("h3", null, "Read at"));
    var pr = el("p"); r.reads.forEach(function (x, k) { if (k) { pr.appendChild(document.createTextNode(", ")); } pr.appendChild(placeLink(x[0], x[1])); });
    box.appendChild(pr);
  }
  var nodes = []; N.forEach(function (n, i) { if (n.out === t || n.var === t || (n.saved || []).some(function (s) { return s.t === t; })) { nodes.push(i); } });
  if (nodes.length) {
    state.hits = new Set(nodes); nodes.forEach(reveal); redraw(); zoomTo(nodes.map(function (i) { return "n" + i; }), true);
  }
}
