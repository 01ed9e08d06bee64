// @ts-check
/* gradviz explorer, details on demand: a node, a tensor, the summary. It owns which node is selected. */
/** @param {import("./core.js").Helpers} h @param {import("./core.js").Core} core @param {import("./store.js").Store} store */
function detailsPanel(h, core, store) {
  var ui = core.ui, N = core.N, T = core.T, F = core.F, page = document;
  /** @param {any} table @param {string} key @param {any} value */
  function kv(table, key, value) {
    var tr = core.el("tr"); core.add(tr, core.el("th", null, key));
    var td = core.el("td"); if (value instanceof Node) { td.appendChild(value); } else { td.textContent = value; }
    tr.appendChild(td); table.appendChild(tr);
  }
  /** @param {number} t */
  function tensorLink(t) { return core.link(T[t] ? T[t].name : "?", function () { showTensor(t); }); }
  /** @param {number} file @param {number} line */
  function placeLink(file, line) { return core.link(core.where(file, line), function () { store.ask("source.show", file, line); }); }
  function showSummary() {
    ui.details.textContent = "";
    ui.details.appendChild(core.el("h2", null, "Details"));
    ui.details.appendChild(core.el("p", "gv-none", N.length ? "Click a node for its op, module, line and saved tensors; click a box to open it; click a tensor for where it was made, written, aliased and read."
      : "No autograd graph was recorded: no operation of this run needed a gradient" + (core.D.facts.exception ? " before the program stopped." : ".")));
  }
  /** node i's details; `keepHighlight`: the outlined nodes stay @param {number} i @param {boolean} keepHighlight */
  function showNode(i, keepHighlight) {
    var n = core.steps.nodeAt(store.get("chosen"), i);
    store.set("selected", i);
    if (!keepHighlight) { store.ask("graph.highlight", new Set()); }
    store.ask("graph.classes");
    var box = ui.details; box.textContent = "";
    box.appendChild(core.el("h2", null, n.label));
    var table = core.el("table", "gv-kv");
    kv(table, "kind", n.kind === "leaf" ? "leaf (receives .grad)" : n.kind === "output" ? "output: backward started here" : n.kind === "op" ? "backward node" : n.kind);
    if (n.step) { kv(table, "step", "step " + n.step + (n.absent ? " (this node is not in that step)" : "")); }
    if (n.module) { kv(table, "module", n.module); }
    if (n.file !== undefined) { kv(table, "made at", placeLink(n.file, n.line)); kv(table, "source", core.codeEl(core.sourceLine(n.file, n.line))); }
    if (n.out !== undefined) { kv(table, "output", tensorLink(n.out)); }
    if (n.var !== undefined) { kv(table, "tensor", tensorLink(n.var)); }
    if (n.freed_by !== undefined) { kv(table, "saved tensors freed", "by the backward at event " + core.replay.eventOfSeq(n.freed_by)); }
    if (n.freed !== undefined) { kv(table, "node freed", "at event " + core.replay.eventOfSeq(n.freed) + " (its last holder let go)"); }
    box.appendChild(table);
    if (n.saved) {
      box.appendChild(core.el("h3", null, "Saved for backward"));
      // three columns that fit the sidebar (a row per tensor, its shape, size and storage on a line under it): seven
      // columns scrolled sideways showed two, the rest cut off behind a scrollbar
      var st = core.el("table", "gv-grid gv-saved");
      var head = core.el("tr"); ["name", "tensor", "saved → now"].forEach(function (t) { head.appendChild(core.el("th", null, t)); });
      st.appendChild(head);
      n.saved.forEach(function (s) {
        var t = /** @type {any} */ (T[s.t] || {});
        var mark = s.mark ? "gv-mark-" + s.mark : null;
        var tr = core.el("tr", mark);
        var td = core.el("td"); td.appendChild(tensorLink(s.t));
        core.add(tr, core.el("td", null, s.name), td, core.el("td", null, h.versionText(s.v) + " → " + h.versionText(core.replay.versionAt(store.get("pos"), s.t))));
        st.appendChild(tr);
        var more = core.el("tr", "gv-saved-more" + (mark ? " " + mark : "")), cell = core.el("td", null, t.dtype + h.shape(t) + " · " + h.bytes(t.bytes) + (t.storage ? " · " : "")); // (t.storage says "storage of …")
        if (t.storage) { cell.appendChild(core.codeEl(t.storage)); }
        cell.colSpan = 3; more.appendChild(cell); st.appendChild(more);
        if (s.note) { var nr = core.el("tr", "gv-note-row"); var c = core.el("td", null, s.note); c.colSpan = 3; nr.appendChild(c); st.appendChild(nr); }
      });
      box.appendChild(st);
    }
    var mine = F.map(function (f, k) { return /** @type {[any, number]} */ ([f, k]); }).filter(function (p) { return p[0].nodes.indexOf(i) >= 0; });
    if (mine.length) {
      box.appendChild(core.el("h3", null, "Findings at this node"));
      var ul = core.el("ul", "gv-plain");
      mine.forEach(function (p) {
        var li = core.el("li"); var b = core.el("button", "gv-link sev-" + p[0].severity, (p[1] + 1) + ". " + p[0].kind.replace(/_/g, " ")); b.type = "button";
        b.addEventListener("click", function () { store.ask("findings.select", p[1], true); });
        li.appendChild(b); ul.appendChild(li);
      });
      box.appendChild(ul);
    }
    if (n.file !== undefined) { store.ask("source.show", n.file, n.line, true); }
  }
  /** tensor t's details, its nodes outlined @param {number} t */
  function showTensor(t) {
    var r = T[t]; if (!r) { return; }
    var box = ui.details; box.textContent = "";
    box.appendChild(core.el("h2", null, r.name));
    var table = core.el("table", "gv-kv");
    kv(table, "shape", r.dtype + h.shape(r)); kv(table, "device", r.device); kv(table, "bytes", h.bytes(r.bytes));
    if (r.parameter) { kv(table, "parameter", r.parameter); }
    kv(table, "made by", r.origin + (r.made ? "" : "")); if (r.made) { kv(table, "made at", placeLink(r.made[0], r.made[1])); kv(table, "source", core.codeEl(r.made[2])); }
    if (r.source !== undefined) { kv(table, "alias of", tensorLink(r.source)); }
    kv(table, "version now", h.versionText(core.replay.versionAt(store.get("pos"), t)));
    if (r.storage) { kv(table, "storage", r.storage + (r.range ? " bytes " + r.range[0] + "-" + r.range[1] : "")); }
    box.appendChild(table);
    if (r.aliases && r.aliases.length) {
      box.appendChild(core.el("h3", null, "Other tensors in its storage"));
      var p = core.el("p"); r.aliases.forEach(function (a, k) { if (k) { p.appendChild(page.createTextNode(", ")); } p.appendChild(tensorLink(a)); });
      box.appendChild(p);
    }
    if (r.events) {
      box.appendChild(core.el("h3", null, "Written, aliased, used by backward"));
      var ul = core.el("ul", "gv-plain");
      r.events.forEach(function (e) { var li = core.el("li"); core.add(li, core.el("span", "gv-ekind", e[0].replace(/_/g, " ") + " "), placeLink(e[1], e[2]), page.createTextNode(" "), core.codeEl(e[3])); ul.appendChild(li); });
      box.appendChild(ul);
    }
    if (r.reads) {
      box.appendChild(core.el("h3", null, "Read at"));
      var pr = core.el("p"); r.reads.forEach(function (x, k) { if (k) { pr.appendChild(page.createTextNode(", ")); } pr.appendChild(placeLink(x[0], x[1])); });
      box.appendChild(pr);
    }
    var nodes = []; N.forEach(function (n, i) { if (n.out === t || n.var === t || (n.saved || []).some(function (s) { return s.t === t; })) { nodes.push(i); } });
    if (nodes.length) {
      store.ask("graph.highlight", new Set(nodes)); nodes.forEach(function (i) { store.ask("graph.reveal", i); }); store.ask("graph.redraw");
      store.ask("view.zoomTo", nodes.map(function (i) { return "n" + i; }), true);
    }
  }
  store.answer("details.node", showNode);
  store.answer("details.tensor", showTensor);
  store.answer("details.summary", showSummary);
  store.answer("details.unselect", function () { store.set("selected", null); });
  return {};
}
module.exports = { detailsPanel: detailsPanel };
