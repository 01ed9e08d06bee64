// @ts-check
/* gradviz explorer, the address: #finding=2, #node=n5. */
/** @param {import("./core.js").Helpers} h @param {import("./core.js").Core} core @param {import("./store.js").Store} store */
function addressPanel(h, core, store) {
  /** @param {string} fragment */
  function setHash(fragment) { try { history.replaceState(null, "", fragment ? "#" + fragment : location.pathname + location.search); } catch (e) { /* about:srcdoc */ } }
  /** true when the address opened a finding or a node; anything else leaves the first view */
  function fromHash() {
    var a = h.parseAddress(location.hash);
    if (a && a.finding !== undefined && core.F[a.finding - 1]) { store.ask("findings.select", a.finding - 1, false); return true; }
    if (a && a.node !== undefined) {
      var i = core.D.ids.indexOf(a.node);
      if (i >= 0) {
        store.ask("graph.reveal", i); store.ask("graph.highlight", new Set([i])); store.ask("graph.redraw");
        store.ask("view.zoomTo", ["n" + i]); store.ask("details.node", i, true);
        return true;
      }
    }
    return false;
  }
  store.answer("address.set", setHash);
  store.answer("address.open", fromHash);
  return {};
}
module.exports = { addressPanel: addressPanel };
