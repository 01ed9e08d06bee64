/* gradviz explorer, the source panel. */
var sourceFile = null;
function showSource(file, line, quiet) {
  var f = FILES[file];
  if (!f) { return; }
  if (!quiet) { selectTab("source"); }
  if (sourceFile !== file) { drawSource(file); }
  [].forEach.call(ui.source.querySelectorAll(".gv-ln.gv-current"), function (x) { x.classList.remove("gv-current"); });
  var row = ui.source.querySelector('.gv-ln[data-line="' + (+line) + '"]');
  if (row) {
    row.classList.add("gv-current");
    var pre = ui.source.querySelector("pre");
    pre.scrollTop = row.offsetTop - pre.clientHeight / 2;
  }
}
function drawSource(file) {
  sourceFile = file;
  var f = FILES[file];
  ui.source.textContent = "";
  var head = el("div", "gv-source-head");
  if (FILES.length > 1) {
    var pick = el("select"); pick.setAttribute("aria-label", "file");
    FILES.forEach(function (x, k) { var o = option(String(k), x.name + (x.library ? " (library)" : "")); o.selected = k === file; pick.appendChild(o); });
    pick.addEventListener("change", function () { drawSource(+pick.value); });
    head.appendChild(pick);
  }
  head.appendChild(el("span", "gv-path", f.path));
  var pre = el("pre", "gv-code");
  var rows = f.lines ? f.lines.map(function (t, k) { return [k + 1, t]; }) : (f.excerpt || []);
  if (!rows.length) { pre.textContent = "The source of this file was not recorded."; }
  var events = new Set(f.events);
  rows.forEach(function (p) {
    var cls = "gv-ln" + (f.marks[p[0]] ? " gv-mark-" + f.marks[p[0]] : events.has(p[0]) ? " gv-mark-event" : "");
    var row = el("span", cls); row.setAttribute("data-line", String(p[0]));
    add(row, el("span", "gv-no", String(p[0])), document.createTextNode(p[1] || " "));
    pre.appendChild(row);
  });
  add(ui.source, head, pre);
}
function selectTab(name) {
  if (ui.lower.classList.contains("gv-folded")) { fold(false); }
  ui.memory.hidden = name !== "memory"; ui.source.hidden = name !== "source";
  ui.tabMemory.classList.toggle("gv-on", name === "memory"); ui.tabSource.classList.toggle("gv-on", name === "source");
  if (name === "source" && sourceFile === null && FILES.length) { drawSource(0); }
}
