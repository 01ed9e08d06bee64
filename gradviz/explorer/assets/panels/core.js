// @ts-check
/* gradviz explorer, core: the document (its types below, as document.schema.json has them), the limits, the box
   hierarchy, the step swap and the version replay bound to the document, and the DOM helpers every panel draws with. */
/**
 * @typedef {{ name: string, t: number, v: number | null, mark?: string, note?: string }} GvSaved
 * @typedef {{ label: string, kind: string, seq: number, g: number, module?: string, file?: number, line?: number,
 *             out?: number, var?: number, saved?: GvSaved[], mark?: string, freed?: number, freed_by?: number }} GvNode
 * @typedef {{ label: string, kind: string, parent: number, depth: number, path?: string, detail?: string,
 *             file?: number, line?: number, numbers?: number[], drawn?: number,
 *             instances?: { number: number, nodes: any[][] }[] }} GvGroup
 * @typedef {{ kind: string, severity: string, message: string, fix?: string, file?: number | null, line?: number,
 *             nodes: number[], count?: number, code?: string, parameter?: string, tensors?: number[],
 *             evidence?: Object<string, any> }} GvFinding
 * @typedef {{ number: number, seq: number, last: number, line: number, file?: number | null, code: string,
 *             kind: string, count?: number, text?: string, outcome?: string, severity?: string, findings: string[],
 *             alias?: any, versions: [number, number | null, number | null][] }} GvEvent
 * @typedef {{ name: string, shape: number[], dtype: string, device: string, bytes: number | null, version: number | null,
 *             parameter?: string, names?: string[], storage?: string, range?: [number, number], origin?: string,
 *             made?: [number, number, string], source?: number, aliases?: number[], events?: any[][], reads?: any[][],
 *             grad?: any }} GvTensor
 * @typedef {{ name: string, path: string, library?: boolean, lines?: string[], excerpt?: [number, string][],
 *             marks: Object<string, string>, events: number[] }} GvFile
 * @typedef {{ format: string, version: number, title: string, facts: Object<string, any>, nodes: GvNode[],
 *             ids: string[], edges: [number, number][], cuts: { from: number | null, to: number | null, label: string }[],
 *             groups: GvGroup[], findings: GvFinding[], events: GvEvent[], steps: { number: number, seq: number, line?: number, roll?: string | null }[],
 *             memory: { storages: { name: string, bytes: number, device: string, tensors: number[] }[], counters: number[][],
 *                       start: Object<string, number | null>, left_out?: number },
 *             chart?: Object<string, any> | null, tensors: GvTensor[], files: GvFile[], legend?: Object<string, string> }} GvDocument
 */
/**
 * @typedef {ReturnType<typeof createCore>} Core  what every panel gets as `core`
 * @typedef {typeof import("./helpers.js") & typeof import("./hierarchy.js") & typeof import("./steps.js") &
 *           typeof import("./replay.js") & typeof import("./firstview.js")} Helpers  what every panel gets as `h`
 */
var LIMITS = {
  MAX_DRAW: 1500,        // boxes and nodes drawn at once; more is refused with a message (search still finds them)
  FIRST_VIEW: 60,        // the first view opens boxes level by level while at most this many things are drawn
  BIG: 100,              // nodes of a graph that opens with the lower panel folded, and may be seen in part at first
  FAN_EDGES: 150,        // past this many drawn edges, a parameter feeding more than LEAF_FANOUT boxes keeps its node,
  LEAF_FANOUT: 8,        // not its edges
  OPEN_ALL_ITEMS: 260,   // what "open all" opens at most: nested boxes and edges between them cost the layout most
  OPEN_ALL_BOXES: 24,
  OPEN_ALL_EDGES: 300,
  READABLE: 0.85,        // screen pixels per layout unit below which labels cannot be read
  SMALL_READABLE: 0.6    // ... for a graph of at most BIG nodes, seen whole
};
/** the core of the page over document D: what every panel may use
 * @param {Helpers} h @param {GvDocument} D @param {Document} page @param {any} dagre the layout library */
function createCore(h, D, page, dagre) {
  var SVGNS = "http://www.w3.org/2000/svg", FONT = "'DejaVu Sans Mono', monospace";
  var FILES = D.files;
  var hier = h.hierarchy(D), steps = h.stepSwap(D, hier), replay = h.replay(D);
  /** @param {string} tag @param {string | null} [cls] @param {any} [text] @returns {any} */
  function el(tag, cls, text) {
    var e = page.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  /** @param {string} tag @param {Object<string, any>} attrs @returns {any} */
  function sv(tag, attrs) {
    var e = page.createElementNS(SVGNS, tag);
    for (var k in attrs) { if (attrs[k] !== undefined) { e.setAttribute(k, String(attrs[k])); } }
    return e;
  }
  /** @param {Node} parent @param {...(Node | null | undefined | false)} children */
  function add(parent, children) { for (var i = 1; i < arguments.length; i++) { if (arguments[i]) { parent.appendChild(arguments[i]); } } return parent; }
  /** @param {number | null | undefined} i */
  function fileName(i) { return i === null || i === undefined || !FILES[i] ? "?" : FILES[i].name; }
  /** @param {number | null | undefined} file @param {number | undefined} line */
  function where(file, line) { return fileName(file) + (line ? ":" + line : ""); }
  /** @param {number | undefined} file @param {number | undefined} line */
  function sourceLine(file, line) {
    var f = file === undefined ? undefined : FILES[file];
    if (!f || !line) { return ""; }
    if (f.lines) { return (f.lines[line - 1] || "").trim(); }
    var hit = (f.excerpt || []).filter(function (p) { return p[0] === line; })[0];
    return hit ? hit[1].trim() : "";
  }
  /** `text` into element e, wrapping between tokens only (codePieces: a <wbr> between them) @param {any} e @param {string} text */
  function breakable(e, text) {
    h.codePieces(text).forEach(function (/** @type {string} */ piece, /** @type {number} */ k) { if (k) { e.appendChild(el("wbr")); } e.appendChild(page.createTextNode(piece)); });
    return e;
  }
  /** @param {string} text */
  function codeEl(text) { return breakable(el("code"), text); }
  /** `code` and **bold** of a finding's message as elements; everything else as text @param {string} text */
  function rich(text) {
    var span = el("span");
    h.richParts(text).forEach(function (/** @type {string[]} */ p) {
      span.appendChild(p[0] === "text" ? page.createTextNode(p[1]) : p[0] === "code" ? codeEl(p[1]) : el(p[0], null, p[1]));
    });
    return span;
  }
  var canvas = /** @type {CanvasRenderingContext2D} */ (page.createElement("canvas").getContext("2d"));
  /** @param {string} text @param {number} size */
  function measure(text, size) { canvas.font = size + "px " + FONT; return canvas.measureText(text).width; }
  /** @param {string} text @param {number} size @param {number} width */
  function fit(text, size, width) { return h.fitText(text, width, function (/** @type {string} */ t) { return measure(t, size); }); }
  /** @param {string} text @param {string} title */
  function button(text, title) { var b = el("button", "gv-button", text); b.type = "button"; b.title = title; return b; }
  /** a button that reads as a link (a tensor's name, a file:line), breaking between tokens
   * @param {string} text @param {() => void} onClick */
  function link(text, onClick) {
    var a = breakable(el("button", "gv-link"), text); a.type = "button";
    a.addEventListener("click", onClick);
    return a;
  }
  /** @param {string} value @param {string} text */
  function option(value, text) { var o = el("option", null, text); o.value = value; return o; }
  return {
    D: D, N: D.nodes, G: D.groups, T: D.tensors, F: D.findings, E: D.events, FILES: FILES, LIMITS: LIMITS,
    LEAF_KINDS: new Set(["leaf", "dead", "updated"]),
    hier: hier, steps: steps, replay: replay, dagre: dagre,
    el: el, sv: sv, add: add, where: where, sourceLine: sourceLine, breakable: breakable, codeEl: codeEl, rich: rich,
    measure: measure, fit: fit, button: button, link: link, option: option,
    /** @type {any} the page's frame (skeleton.js): the elements the panels draw into */
    ui: null
  };
}
module.exports = { createCore: createCore, LIMITS: LIMITS };
