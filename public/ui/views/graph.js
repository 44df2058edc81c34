/**
 * The workflow graph, drawn from the pinned definition and coloured by each step's state.
 * Layout: a vertex's column is its longest path from the entry point, its row its order within the
 * column — enough for the DAGs idemflow runs, with no layout library. Every node is a button (Tab
 * reaches it, Enter or Space selects it) that brings its step into view.
 * A node's two lines (its id; its type and state) are fitted to its box: measured in the page's own
 * font and cut with "…" when too long, the whole text in the node's <title>. An edge with a `when`
 * is dashed and carries its condition as a label (fitted the same way, whole in its <title>); the
 * columns are wider when the graph has one.
 * A compensated execution draws each undo step beside the step it undoes (docs/steps.md
 * "Compensation"): a dashed box under the node, joined to it, with the undo's place and state
 * ("↩ undo 1 · completed"); the rows are taller when the graph has one.
 */
import { s } from "../lib/dom.js";

const W = 184;
const H = 44;
const GAP_X = 46;
/** The gap between columns when an edge carries a `when` label. */
const GAP_X_WHEN = 170;
const GAP_Y = 18;
/** An undo step's box under the node it undoes, and the gap between them. */
const UNDO_H = 24;
const UNDO_GAP = 8;
const PAD = 10;
/** The text styles of style.css (.node-id, .node-meta, .edge-label), for measuring. */
const FONTS = { id: "600 13px", meta: "11px", when: "11px" };

let measurer = null;
/** The width of `text` in the page's font at `style` (a canvas measures it; a rough guess where none exists). */
function widthOf(text, style) {
  if (measurer === null) {
    measurer = document.createElement("canvas").getContext("2d") ?? false;
  }
  if (!measurer) return text.length * 8;
  measurer.font = `${style} ${getComputedStyle(document.documentElement).fontFamily || "sans-serif"}`;
  return measurer.measureText(text).width;
}

/** `text`, or as much of it as fits in `max` pixels followed by "…". */
export function fit(text, style, max) {
  if (widthOf(text, style) <= max) return text;
  let n = text.length;
  while (n > 1 && widthOf(`${text.slice(0, n)}…`, style) > max) n--;
  return `${text.slice(0, n)}…`;
}

/** An edge's condition as written, without the expression marker: "steps.charge.status = 201". */
const whenText = (when) => String(when).replace(/^=\s*/, "");

/** Columns by longest path from the roots (Kahn's order; a cycle, which validation refuses, just stops the walk). */
function layers(vertices, edges) {
  const incoming = new Map(vertices.map((v) => [v.id, 0]));
  const out = new Map(vertices.map((v) => [v.id, []]));
  for (const e of edges) {
    if (!incoming.has(e.to) || !out.has(e.from)) continue;
    incoming.set(e.to, incoming.get(e.to) + 1);
    out.get(e.from).push(e.to);
  }
  const depth = new Map(vertices.map((v) => [v.id, 0]));
  const queue = vertices.filter((v) => incoming.get(v.id) === 0).map((v) => v.id);
  while (queue.length > 0) {
    const id = queue.shift();
    for (const next of out.get(id)) {
      depth.set(next, Math.max(depth.get(next), depth.get(id) + 1));
      incoming.set(next, incoming.get(next) - 1);
      if (incoming.get(next) === 0) queue.push(next);
    }
  }
  return depth;
}

/**
 * `definition` {vertices, edges}; `stateOf(vertexId)` → a step state or null (not reached);
 * `onSelect(vertexId)` when a node is chosen; `noteOf(vertexId)` → a short note after the state, or null
 * (a MAP's progress: "37/100 done", ./map.js); `undoOf(vertexId)` → the step's undo step
 * `{ state, place }` (drawn beside it), or null.
 */
export function drawGraph(definition, stateOf, onSelect, noteOf = () => null, undoOf = () => null) {
  const vertices = definition?.vertices ?? [];
  const edges = definition?.edges ?? [];
  const depth = layers(vertices, edges);
  const gapX = edges.some((e) => e.when) ? GAP_X_WHEN : GAP_X;
  const undos = new Map(vertices.map((v) => [v.id, undoOf(v.id)]).filter(([, u]) => u));
  const rowH = H + GAP_Y + (undos.size > 0 ? UNDO_H + UNDO_GAP : 0);
  const rows = new Map();
  const pos = new Map();
  for (const v of vertices) {
    const col = depth.get(v.id) ?? 0;
    const row = rows.get(col) ?? 0;
    rows.set(col, row + 1);
    pos.set(v.id, { x: 10 + col * (W + gapX), y: 10 + row * rowH });
  }
  const width = 20 + (Math.max(0, ...depth.values()) + 1) * (W + gapX) - gapX;
  const height = 20 + Math.max(1, ...rows.values()) * rowH - GAP_Y;

  const lines = edges
    .filter((e) => pos.has(e.from) && pos.has(e.to))
    .map((e) => {
      const a = pos.get(e.from);
      const b = pos.get(e.to);
      const line = s("line", {
        class: e.when ? "edge edge-when" : "edge",
        x1: a.x + W,
        y1: a.y + H / 2,
        x2: b.x - 4,
        y2: b.y + H / 2,
        "marker-end": "url(#arrow)",
      });
      if (!e.when) return line;
      // The label sits over the edge's middle, within the gap between the two columns.
      const condition = whenText(e.when);
      const mid = { x: (a.x + W + b.x) / 2, y: (a.y + b.y) / 2 + H / 2 - 5 };
      return s(
        "g",
        { class: "edge-group", "data-from": e.from, "data-to": e.to },
        s("title", {}, `${e.from} → ${e.to} when ${condition}`),
        line,
        s("text", { class: "edge-label", x: mid.x, y: mid.y, "text-anchor": "middle" }, fit(condition, FONTS.when, b.x - (a.x + W) - 12)),
      );
    });
  const nodes = vertices.map((v) => {
    const p = pos.get(v.id);
    const state = stateOf(v.id) ?? "NOT_REACHED";
    const note = noteOf(v.id);
    // A MAP's node shows its progress where the others show their state (its colour still says the state).
    const meta = `${v.type.toLowerCase()} · ${note ?? state.replace("_", " ").toLowerCase()}`;
    const choose = () => onSelect(v.id);
    return s(
      "g",
      {
        class: `node state-${state.toLowerCase()}`,
        transform: `translate(${p.x} ${p.y})`,
        tabindex: 0,
        role: "button",
        "aria-label": `${v.id}: ${v.type}, ${state.replace("_", " ").toLowerCase()}${note ? `, ${note}` : ""}`,
        "data-vertex": v.id,
        onclick: choose,
        onkeydown: (e) => {
          if (e.key === "Enter" || e.key === " ") {
            e.preventDefault();
            choose();
          }
        },
      },
      s("title", {}, `${v.id} (${v.type}): ${state}${note ? ` (${note})` : ""}`),
      s("rect", { width: W, height: H, rx: 6 }),
      s("text", { x: PAD, y: 18, class: "node-id" }, fit(v.id, FONTS.id, W - 2 * PAD)),
      s("text", { x: PAD, y: 34, class: "node-meta" }, fit(meta, FONTS.meta, W - 2 * PAD)),
    );
  });
  const undoBoxes = [...undos].map(([id, undo]) => {
    const p = pos.get(id);
    const state = String(undo.state).toLowerCase();
    const words = `↩ undo ${undo.place + 1} · ${state.replace("_", " ")}`;
    return s(
      "g",
      {
        class: `undo state-${state}`,
        transform: `translate(${p.x + 14} ${p.y + H + UNDO_GAP})`,
        "data-undoes": id,
        "data-state": undo.state,
      },
      s("title", {}, `undo of ${id}: ${undo.state} (place ${undo.place + 1} in the compensation's order)`),
      s("line", { class: "undo-link", x1: 8, y1: -UNDO_GAP, x2: 8, y2: 0 }),
      s("rect", { width: W - 14, height: UNDO_H, rx: 5 }),
      s("text", { x: 8, y: 16 }, fit(words, FONTS.meta, W - 30)),
    );
  });
  return s(
    "svg",
    { class: "graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "group", "aria-label": "Workflow graph" },
    s(
      "defs",
      {},
      s(
        "marker",
        { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }),
      ),
    ),
    lines,
    nodes,
    undoBoxes,
  );
}
