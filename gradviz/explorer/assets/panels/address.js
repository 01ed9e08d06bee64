/* gradviz explorer, the address: #finding=2, #node=n5. */
function setHash(h) { try { history.replaceState(null, "", h ? "#" + h : location.pathname + location.search); } catch (e) { /* about:srcdoc */ } }
function fromHash() { // true when the address opened a finding or a node; anything else leaves the first view
  var a = parseAddress(location.hash);
  if (a && a.finding !== undefined && F[a.finding - 1]) { selectFinding(a.finding - 1, false); return true; }
  if (a && a.node !== undefined) {
    var i = D.ids.indexOf(a.node);
    if (i >= 0) { reveal(i); state.hits = new Set([i]); redraw(); zoomTo(["n" + i]); showNode(i, true); return true; }
  }
  return false;
}
