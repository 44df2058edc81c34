/**
 * The workflow graph, drawn from the pinned definition and coloured by each step's state.
 * Layout: a vertex's column is its longest path from the entry point, its row its order within the
 * column — enough for the DAGs idemflow runs, with no layout library. Every node is a button (Tab
 * reaches it, Enter or Space selects it) that brings its step into view.
 */
import { s } from "../lib/dom.js";

const W = 150;
const H = 44;
const GAP_X = 46;
const GAP_Y = 18;

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
 * (a MAP's progress: "37/100 done", ./map.js).
 */
export function drawGraph(definition, stateOf, onSelect, noteOf = () => null) {
  const vertices = definition?.vertices ?? [];
  const edges = definition?.edges ?? [];
  const depth = layers(vertices, edges);
  const rows = new Map();
  const pos = new Map();
  for (const v of vertices) {
    const col = depth.get(v.id) ?? 0;
    const row = rows.get(col) ?? 0;
    rows.set(col, row + 1);
    pos.set(v.id, { x: 10 + col * (W + GAP_X), y: 10 + row * (H + GAP_Y) });
  }
  const width = 20 + (Math.max(0, ...depth.values()) + 1) * (W + GAP_X) - GAP_X;
  const height = 20 + Math.max(1, ...rows.values()) * (H + GAP_Y) - GAP_Y;

  const lines = edges
    .filter((e) => pos.has(e.from) && pos.has(e.to))
    .map((e) => {
      const a = pos.get(e.from);
      const b = pos.get(e.to);
      return s("line", {
        class: e.when ? "edge edge-when" : "edge",
        x1: a.x + W,
        y1: a.y + H / 2,
        x2: b.x - 4,
        y2: b.y + H / 2,
        "marker-end": "url(#arrow)",
      });
    });
  const nodes = vertices.map((v) => {
    const p = pos.get(v.id);
    const state = stateOf(v.id) ?? "NOT_REACHED";
    const note = noteOf(v.id);
    const label = v.id.length > 18 ? `${v.id.slice(0, 17)}…` : v.id;
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
      s("text", { x: 10, y: 18, class: "node-id" }, label),
      s("text", { x: 10, y: 34, class: "node-meta" }, `${v.type.toLowerCase()} · ${note ?? state.replace("_", " ").toLowerCase()}`),
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
  );
}
