/* gradviz report: step through the events with the buttons or the arrow keys. Inlined; loads nothing.
   The initial step comes from "#step=N" or "?step=N"; the current one is in #steps[data-step]. */
(function () {
  "use strict";
  var root = document.getElementById("steps");
  if (!root) { return; }
  var steps = Array.prototype.slice.call(root.querySelectorAll(".step"));
  var total = steps.length;
  var prev = document.getElementById("step-prev");
  var next = document.getElementById("step-next");
  var counter = document.getElementById("step-counter");
  if (!total || !prev || !next) { return; }

  // SVG nodes of the views by node name (Graphviz writes each node's name as its <title>).
  var byName = {};
  Array.prototype.forEach.call(document.querySelectorAll("svg g.node"), function (g) {
    var title = g.querySelector("title");
    if (!title) { return; }
    var name = title.textContent;
    (byName[name] = byName[name] || []).push(g);
  });
  var lit = [];

  function requested() {
    var m = /(?:^|[#&?])step=(\d+)/.exec(window.location.hash) || /(?:^|[?&])step=(\d+)/.exec(window.location.search);
    // without a step in the URL: the first event of the first training step (not the model's initialisation)
    return m ? parseInt(m[1], 10) : (parseInt(root.getAttribute("data-start"), 10) || 1);
  }

  function show(n, remember) {
    n = Math.max(1, Math.min(total, n || 1));
    steps.forEach(function (el, i) { el.hidden = i !== n - 1; });
    root.setAttribute("data-step", String(n));
    counter.textContent = n + " / " + total;
    prev.disabled = n === 1;
    next.disabled = n === total;

    lit.forEach(function (el) { el.classList.remove("gv-hit"); el.classList.remove("current"); });
    lit = [];
    var step = steps[n - 1];
    (step.getAttribute("data-hits") || "").split(" ").forEach(function (name) {
      (byName[name] || []).forEach(function (g) { g.classList.add("gv-hit"); lit.push(g); });
    });
    var src = step.getAttribute("data-src");
    var line = src ? document.getElementById(src) : null;
    if (line) { line.classList.add("current"); lit.push(line); }
    if (remember) {
      try { window.history.replaceState(null, "", "#step=" + n); } catch (e) { /* file: URLs may refuse */ }
    }
  }

  function current() { return parseInt(root.getAttribute("data-step"), 10) || 1; }
  prev.addEventListener("click", function () { show(current() - 1, true); });
  next.addEventListener("click", function () { show(current() + 1, true); });
  document.addEventListener("keydown", function (ev) {
    if (ev.altKey || ev.ctrlKey || ev.metaKey) { return; }
    var tag = ev.target && ev.target.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT") { return; }
    if (ev.key === "ArrowRight") {
      show(current() + 1, true); ev.preventDefault();
    } else if (ev.key === "ArrowLeft") {
      show(current() - 1, true); ev.preventDefault();
    }
  });
  window.addEventListener("hashchange", function () { show(requested(), false); });
  show(requested(), false);
})();
