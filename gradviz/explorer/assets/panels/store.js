// @ts-check
/* gradviz explorer, the store: the page's shared state, each field written by one panel (its owner) and read or
   followed by the others, and the requests by which a panel asks another for something, each answered by one panel.
   The two tables below are the panels' whole interface with each other. Pure: `node --test` loads it. */
/** field -> the panel that writes it */
var FIELDS = {
  expanded: "graph",   // Set of the open boxes
  rankdir: "graph",    // "TB" or "LR"
  chosen: "graph",     // step box -> which of its steps it shows (steps.js)
  layout: "graph",     // the dagre graph drawn, {g, info, clusters}
  bounds: "graph",     // its extent, {x, y, w, h}
  note: "graph",       // what the drawing has to say (the bar's note)
  hits: "graph",       // Set of the nodes outlined: a finding's, a tensor's
  view: "view",        // the svg's viewBox, {x, y, w, h}
  finding: "findings", // the finding picked (index) or null
  selected: "details", // the node whose details are shown, or null
  found: "search",     // Set of the search's matches outlined
  pos: "time"          // the scrubber: how many events have run
};
/** request -> the panel that answers it (its arguments, and what it answers where it answers something) */
var REQUESTS = {
  "graph.redraw": "graph",          // () lay out and paint what the open boxes show
  "graph.draw": "graph",            // (expanded, rankdir) open exactly those boxes, in that direction, and redraw
  "graph.classes": "graph",         // () the drawn nodes' classes again (outlined, selected, run yet, marks)
  "graph.expand": "graph",          // (box) open it, into view -> false when it holds too many to draw
  "graph.collapse": "graph",        // (box) close it and the boxes inside it
  "graph.reveal": "graph",          // (node) open the boxes around it, unless too many -> whether it did
  "graph.highlight": "graph",       // (Set of nodes) outline them (no redraw)
  "graph.pickStep": "graph",        // (box, k) the rolled step box shows its k-th step
  "graph.choose": "graph",          // (box, chosen) the step picker's choice: the box open, showing that step
  "graph.openAll": "graph",         // () "open all", level by level while the layout stays quick
  "graph.closeAll": "graph",        // () "close all"
  "graph.flushNote": "graph",       // () show the drawing's pending note
  "view.set": "view",               // ({x, y, w, h}) the svg's viewBox
  "view.fit": "view",               // () the whole graph, as far as its labels stay readable
  "view.first": "view",             // () the first view's framing
  "view.firstDepth": "view",        // () the first view's boxes and direction (firstview.js), laid out
  "view.zoomTo": "view",            // (keys, gently) frame those nodes or boxes
  "view.zoomBy": "view",            // (factor, x, y) zoom at a point of the graph
  "view.panBy": "view",             // (dx, dy) in graph units
  "view.bringIntoView": "view",     // (keys) move the view only if they are out of it
  "view.toGraph": "view",           // (pointer event) -> its place in graph units
  "view.screen": "view",            // () -> the graph pane's size in pixels {w, h}
  "findings.select": "findings",    // (index, remember) pick finding: outline, frame, details, source, address
  "findings.clear": "findings",     // () no finding picked, nothing outlined or matched
  "details.node": "details",        // (node, keepHighlight) its details; it is the node selected
  "details.tensor": "details",      // (tensor) its details, its nodes outlined
  "details.summary": "details",     // () what the details panel says when nothing is picked
  "details.unselect": "details",    // () no node selected
  "source.show": "source",          // (file, line, quiet) that line in the source panel (quiet: tab not raised)
  "source.tab": "source",           // ("memory" | "source") raise that tab
  "source.fold": "source",          // (on) fold the lower panel away, or open it
  "time.scrub": "time",             // (position) the scrubber after that many events
  "search.focus": "search",         // () the cursor into the search box
  "search.forget": "search",        // () no match outlined
  "keys.node": "keys",              // (keydown event, key) a key pressed on a drawn node or box
  "keys.keepInView": "keys",        // (key) pan a node reached by keyboard into view
  "legend.draw": "legend",          // () name the marks drawn now
  "address.set": "address",         // (fragment) the page's address, without a history entry
  "address.open": "address"         // () open what the address names -> whether it named something
};
/**
 * @typedef {{ get: (field: string) => any, set: (field: string, value: any) => void,
 *             on: (field: string, listener: (value: any) => void) => void,
 *             answer: (request: string, handler: (...args: any[]) => any) => void,
 *             ask: (request: string, ...args: any[]) => any }} Store
 */
/** a store over `fields` and `requests` (the tables above, or others for a test); `as(owner)` is the store as one
 * panel sees it: it may set only the fields it owns and answer only its own requests
 * @param {Object<string, string>} fields @param {Object<string, string>} requests @param {Object<string, any>} initial */
function createStore(fields, requests, initial) {
  /** @type {Object<string, any>} */
  var values = {};
  /** @type {Object<string, ((value: any) => void)[]>} */
  var listeners = {};
  /** @type {Object<string, (...args: any[]) => any>} */
  var answers = {};
  Object.keys(fields).forEach(function (f) { values[f] = initial[f]; listeners[f] = []; });
  /** @param {string} field */
  function known(field) { if (!(field in fields)) { throw new Error("the store has no field " + field); } }
  /** @param {string} owner @returns {Store} */
  function as(owner) {
    return {
      get: function (field) { known(field); return values[field]; },
      set: function (field, value) {
        known(field);
        if (fields[field] !== owner) { throw new Error(owner + " cannot write " + field + ": " + fields[field] + " owns it"); }
        values[field] = value;
        listeners[field].forEach(function (listener) { listener(value); });
      },
      on: function (field, listener) { known(field); listeners[field].push(listener); },
      answer: function (request, handler) {
        if (requests[request] !== owner) { throw new Error(owner + " cannot answer " + request + (requests[request] ? ": " + requests[request] + " does" : ": no such request")); }
        answers[request] = handler;
      },
      ask: function (request) {
        var handler = answers[request];
        if (!handler) { throw new Error("nobody answers " + request); }
        return handler.apply(null, [].slice.call(arguments, 1));
      }
    };
  }
  /** the requests no panel answers (none, once the page is wired) */
  function unanswered() { return Object.keys(requests).filter(function (r) { return !answers[r]; }); }
  return { as: as, unanswered: unanswered };
}
module.exports = { FIELDS: FIELDS, REQUESTS: REQUESTS, createStore: createStore };
