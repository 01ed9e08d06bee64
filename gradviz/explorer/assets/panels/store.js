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
/** request -> the panel that answers it */
var REQUESTS = {
  "graph.redraw": "graph", "graph.draw": "graph", "graph.classes": "graph", "graph.expand": "graph",
  "graph.collapse": "graph", "graph.reveal": "graph", "graph.highlight": "graph", "graph.pickStep": "graph",
  "graph.choose": "graph", "graph.openAll": "graph", "graph.closeAll": "graph", "graph.flushNote": "graph",
  "view.set": "view", "view.fit": "view", "view.first": "view", "view.firstDepth": "view", "view.zoomTo": "view",
  "view.zoomBy": "view", "view.panBy": "view", "view.bringIntoView": "view", "view.toGraph": "view",
  "view.screen": "view",
  "findings.select": "findings", "findings.clear": "findings",
  "details.node": "details", "details.tensor": "details", "details.summary": "details", "details.unselect": "details",
  "source.show": "source", "source.tab": "source", "source.fold": "source",
  "time.scrub": "time",
  "search.focus": "search", "search.forget": "search",
  "keys.node": "keys", "keys.keepInView": "keys",
  "legend.draw": "legend",
  "address.set": "address", "address.open": "address"
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
