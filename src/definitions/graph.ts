/**
 * Graph rules (SPEC section 2): unique vertex ids, exactly one ENTRY_POINT, edges between existing
 * vertices, no edge into the entry, no duplicate edge, no cycle, every vertex reachable from the
 * entry. Runs on the raw document so its errors are reported alongside schema errors.
 */
import { asArray, asRecord, asString, type ValidationError } from "./errors";
import { pointerOf } from "./pointer";

interface LooseEdge {
  index: number;
  from: string;
  to: string;
}

export function checkGraph(document: unknown): ValidationError[] {
  const errors: ValidationError[] = [];
  const root = asRecord(document);
  if (!root) return errors;
  const vertices = asArray(root.vertices);
  const edgesInput = asArray(root.edges);

  // Vertex ids → index of first occurrence.
  const indexOf = new Map<string, number>();
  const entries: number[] = [];
  vertices.forEach((raw, i) => {
    const vertex = asRecord(raw);
    const id = asString(vertex?.id);
    if (vertex?.type === "ENTRY_POINT") entries.push(i);
    if (id === undefined) return;
    const first = indexOf.get(id);
    if (first !== undefined) {
      errors.push({
        pointer: pointerOf("vertices", i, "id"),
        code: "duplicate-vertex-id",
        message: `the vertex id "${id}" is already used by ${pointerOf("vertices", first)}; give every vertex its own id`,
      });
    } else {
      indexOf.set(id, i);
    }
  });

  if (Array.isArray(root.vertices)) {
    if (entries.length === 0) {
      errors.push({
        pointer: "/vertices",
        code: "missing-entry-point",
        message: 'there is no ENTRY_POINT vertex; add exactly one ({ "id": "received", "type": "ENTRY_POINT" }) where triggers enter',
      });
    }
    for (const extra of entries.slice(1)) {
      errors.push({
        pointer: pointerOf("vertices", extra, "type"),
        code: "multiple-entry-points",
        message:
          `a workflow has exactly one ENTRY_POINT and ${pointerOf("vertices", entries[0]!)} is already one; change this ` +
          `vertex's type or remove it`,
      });
    }
  }
  const entryId = entries.length === 1 ? asString(asRecord(vertices[entries[0]!])?.id) : undefined;

  const edges: LooseEdge[] = [];
  const seenEdges = new Map<string, number>();
  edgesInput.forEach((raw, index) => {
    const edge = asRecord(raw);
    const from = asString(edge?.from);
    const to = asString(edge?.to);
    let known = true;
    const ends = [
      { end: "from", id: from, code: "unknown-edge-source" },
      { end: "to", id: to, code: "unknown-edge-target" },
    ] as const;
    for (const { end, id, code } of ends) {
      if (id === undefined || indexOf.has(id)) continue;
      known = false;
      errors.push({
        pointer: pointerOf("edges", index, end),
        code,
        message: `no vertex has the id "${id}"; use one of the ids in /vertices`,
      });
    }
    if (to !== undefined && entries.some((i) => asString(asRecord(vertices[i])?.id) === to)) {
      errors.push({
        pointer: pointerOf("edges", index, "to"),
        code: "edge-into-entry-point",
        message: `"${to}" is the ENTRY_POINT; triggers start there, so no edge may lead into it`,
      });
      known = false;
    }
    if (from === undefined || to === undefined || !known) return;
    const key = JSON.stringify([from, to]);
    const previous = seenEdges.get(key);
    if (previous !== undefined) {
      errors.push({
        pointer: pointerOf("edges", index),
        code: "duplicate-edge",
        message:
          `${pointerOf("edges", previous)} already connects "${from}" to "${to}"; merge the two (combine their \`when\` ` +
          `conditions with \`or\`)`,
      });
      return;
    }
    seenEdges.set(key, index);
    edges.push({ index, from, to });
  });

  errors.push(...findCycles(edges));

  if (entryId !== undefined) {
    const reachable = reachableFrom(entryId, edges);
    for (const [id, i] of indexOf) {
      if (!reachable.has(id)) {
        errors.push({
          pointer: pointerOf("vertices", i),
          code: "unreachable-vertex",
          message: `the vertex "${id}" cannot be reached from the entry "${entryId}"; add an edge that leads to it, or remove it`,
        });
      }
    }
  }
  return errors;
}

function successors(edges: LooseEdge[]): Map<string, LooseEdge[]> {
  const out = new Map<string, LooseEdge[]>();
  for (const edge of edges) {
    const list = out.get(edge.from) ?? [];
    list.push(edge);
    out.set(edge.from, list);
  }
  return out;
}

/** One error per back edge of a depth-first search: each closes a cycle, named vertex by vertex. */
function findCycles(edges: LooseEdge[]): ValidationError[] {
  const next = successors(edges);
  const state = new Map<string, "active" | "done">();
  const stack: string[] = [];
  const errors: ValidationError[] = [];
  const nodes = [...new Set(edges.flatMap((e) => [e.from, e.to]))];

  // Iterative DFS (a long chain must not overflow the JS stack).
  for (const start of nodes) {
    if (state.has(start)) continue;
    const frames: Array<{ node: string; next: number }> = [{ node: start, next: 0 }];
    state.set(start, "active");
    stack.push(start);
    while (frames.length > 0) {
      const frame = frames[frames.length - 1]!;
      const out = next.get(frame.node) ?? [];
      if (frame.next >= out.length) {
        state.set(frame.node, "done");
        stack.pop();
        frames.pop();
        continue;
      }
      const edge = out[frame.next++]!;
      const seen = state.get(edge.to);
      if (seen === "active") {
        const cycle = [...stack.slice(stack.indexOf(edge.to)), edge.to];
        errors.push({
          pointer: pointerOf("edges", edge.index),
          code: "cycle",
          message:
            `this edge closes a cycle (${cycle.join(" → ")}); workflows are acyclic graphs, so remove or redirect one edge ` +
            `of the cycle`,
        });
      } else if (seen === undefined) {
        state.set(edge.to, "active");
        stack.push(edge.to);
        frames.push({ node: edge.to, next: 0 });
      }
    }
  }
  return errors;
}

function reachableFrom(start: string, edges: LooseEdge[]): Set<string> {
  const next = successors(edges);
  const seen = new Set<string>([start]);
  const queue = [start];
  while (queue.length > 0) {
    for (const edge of next.get(queue.shift()!) ?? []) {
      if (!seen.has(edge.to)) {
        seen.add(edge.to);
        queue.push(edge.to);
      }
    }
  }
  return seen;
}
