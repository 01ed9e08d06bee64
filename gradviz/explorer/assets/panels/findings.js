/* gradviz explorer, the findings list and selecting a finding. */
function drawFindings() {
  var box = ui.findings;
  box.textContent = "";
  box.appendChild(el("h2", null, "Findings"));
  if (!F.length) { box.appendChild(el("p", "gv-none", "No findings: nothing wrong was seen in this run.")); return; }
  var list = el("ol", "gv-finding-list");
  F.forEach(function (f, i) {
    var item = el("li", "gv-finding sev-" + f.severity);
    item.setAttribute("data-finding", String(i + 1));
    item.tabIndex = 0;
    var head = el("div", "gv-finding-head");
    add(head, el("span", "gv-badge", f.severity), el("span", "gv-kind", f.kind.replace(/_/g, " ")),
        el("span", "gv-where", where(f.file, f.line) + (f.count > 1 ? " · " + f.count + "×" : "")));
    var msg = el("p", "gv-message"); msg.appendChild(rich(f.message));
    add(item, head, msg);
    if (f.fix) { var fix = el("p", "gv-fix"); add(fix, el("strong", null, "Fix: "), rich(f.fix)); item.appendChild(fix); }
    item.addEventListener("click", function () { selectFinding(i, true); });
    item.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { selectFinding(i, true); } });
    list.appendChild(item);
  });
  box.appendChild(list);
}
function selectFinding(i, remember) {
  var f = F[i];
  if (!f) { return; }
  state.finding = i;
  state.found = new Set();
  state.hits = new Set(f.nodes);
  f.nodes.forEach(reveal);
  [].forEach.call(ui.findings.querySelectorAll(".gv-finding"), function (li, k) { li.classList.toggle("gv-current", k === i); });
  redraw();
  zoomTo(f.nodes.map(function (n) { return "n" + n; }));
  if (f.nodes.length) { showNode(f.nodes[0], true); }
  if (f.file !== null && f.file !== undefined) { showSource(f.file, f.line); } // the finding's line, not the node's
  if (remember) { setHash("finding=" + (i + 1)); }
}
function clearHighlight() {
  state.hits = new Set(); state.found = new Set(); state.finding = null;
  [].forEach.call(ui.findings.querySelectorAll(".gv-finding"), function (li) { li.classList.remove("gv-current"); });
}
