// @ts-check
/* gradviz explorer, the lower panel: its Memory and Source tabs, folding it, and the source panel. */
/** @param {import("./core.js").Helpers} h @param {import("./core.js").Core} core @param {import("./store.js").Store} store */
function sourcePanel(h, core, store) {
  var ui = core.ui, FILES = core.FILES, el = core.el;
  /** @type {number | null} the file the source panel shows */
  var sourceFile = null;
  /** file's source, `line` marked and scrolled to; `quiet`: the Source tab is not brought forward
   * @param {number} file @param {number} line @param {boolean} [quiet] */
  function showSource(file, line, quiet) {
    var f = FILES[file];
    if (!f) { return; }
    if (!quiet) { selectTab("source"); }
    if (sourceFile !== file) { drawSource(file); }
    [].forEach.call(ui.source.querySelectorAll(".gv-ln.gv-current"), function (/** @type {Element} */ x) { x.classList.remove("gv-current"); });
    var row = ui.source.querySelector('.gv-ln[data-line="' + (+line) + '"]');
    if (row) {
      row.classList.add("gv-current");
      var pre = ui.source.querySelector("pre");
      pre.scrollTop = row.offsetTop - pre.clientHeight / 2;
    }
  }
  /** @param {number} file */
  function drawSource(file) {
    sourceFile = file;
    var f = FILES[file];
    ui.source.textContent = "";
    var head = el("div", "gv-source-head");
    if (FILES.length > 1) {
      var pick = el("select"); pick.setAttribute("aria-label", "file");
      FILES.forEach(function (/** @type {any} */ x, /** @type {number} */ k) { var o = core.option(String(k), x.name + (x.library ? " (library)" : "")); o.selected = k === file; pick.appendChild(o); });
      pick.addEventListener("change", function () { drawSource(+pick.value); });
      head.appendChild(pick);
    }
    head.appendChild(el("span", "gv-path", f.path));
    var pre = el("pre", "gv-code");
    var rows = f.lines ? f.lines.map(function (/** @type {string} */ t, /** @type {number} */ k) { return [k + 1, t]; }) : (f.excerpt || []);
    if (!rows.length) { pre.textContent = "The source of this file was not recorded."; }
    var events = new Set(f.events);
    rows.forEach(function (/** @type {any[]} */ p) {
      var cls = "gv-ln" + (f.marks[p[0]] ? " gv-mark-" + f.marks[p[0]] : events.has(p[0]) ? " gv-mark-event" : "");
      var row = el("span", cls); row.setAttribute("data-line", String(p[0]));
      core.add(row, el("span", "gv-no", String(p[0])), document.createTextNode(p[1] || " "));
      pre.appendChild(row);
    });
    core.add(ui.source, head, pre);
  }
  /** @param {string} name "memory" or "source" */
  function selectTab(name) {
    if (ui.lower.classList.contains("gv-folded")) { fold(false); }
    ui.memory.hidden = name !== "memory"; ui.source.hidden = name !== "source";
    ui.tabMemory.classList.toggle("gv-on", name === "memory"); ui.tabSource.classList.toggle("gv-on", name === "source");
    if (name === "source" && sourceFile === null && FILES.length) { drawSource(0); }
  }
  /** fold the lower panel away (more room for the graph), or open it @param {boolean} on */
  function fold(on) {
    ui.lower.classList.toggle("gv-folded", on);
    ui.fold.textContent = on ? "show ▴" : "hide ▾";
    ui.fold.title = on ? "show the memory and source panel" : "hide the memory and source panel: more room for the graph";
  }
  ui.fold.addEventListener("click", function () { fold(!ui.lower.classList.contains("gv-folded")); });
  ui.tabMemory.addEventListener("click", function () { selectTab("memory"); });
  ui.tabSource.addEventListener("click", function () { selectTab("source"); });
  store.answer("source.show", showSource);
  store.answer("source.tab", selectTab);
  store.answer("source.fold", fold);
  return {};
}
module.exports = { sourcePanel: sourcePanel };
