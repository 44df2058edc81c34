/**
 * Which vertices become ready when others settle: pure graph logic, no I/O.
 *
 * A vertex is decided once every predecessor is settled (COMPLETED or SKIPPED). It is then
 * DISPATCHED if at least one incoming edge was taken — its source COMPLETED and its `when`
 * (absent = always) is true — and SKIPPED otherwise. SKIPPED settles the vertex too, so the
 * decision propagates until nothing more can be decided.
 *
 * Used by ingress for the start batch, where only the entry point has settled. The settle batch
 * makes the same decision in SQL (`decideStep` in src/ledger/step-settle.ts), because there two
 * predecessors settling concurrently must see each other's rows.
 */
import { EXPRESSION_PREFIX, type WorkflowDefinition } from "../definitions/schema";
import { evaluate } from "../expressions/evaluate";

export type SettledState = "COMPLETED" | "SKIPPED";
export interface PlannedStep {
  vertexId: string;
  state: "DISPATCHED" | "SKIPPED";
}

/** The JSONata context of an execution. */
export interface ExpressionContext {
  payload: unknown;
  steps: Record<string, unknown>;
  execution: { id: string; workflowId: string; trigger: string };
}

export async function edgeTaken(when: string | undefined, context: ExpressionContext): Promise<boolean> {
  if (when === undefined) return true;
  const result = await evaluate(when.slice(EXPRESSION_PREFIX.length), context);
  return result === true;
}

/**
 * Which vertices are decided once the vertices in `taken` have COMPLETED.
 *
 * @param taken for every COMPLETED vertex, the successors whose edges it took (its
 *              `next_vertices`): the edges are evaluated once, by the caller, and never again here
 */
export function planReadySteps(definition: WorkflowDefinition, taken: ReadonlyMap<string, ReadonlySet<string>>): PlannedStep[] {
  const states = new Map<string, SettledState>([...taken.keys()].map((id) => [id, "COMPLETED"]));
  const decided = new Set(taken.keys());
  const planned: PlannedStep[] = [];
  let progress = true;
  while (progress) {
    progress = false;
    for (const vertex of definition.vertices) {
      if (decided.has(vertex.id)) continue;
      const incoming = definition.edges.filter((e) => e.to === vertex.id);
      if (incoming.length === 0) continue; // the entry point
      if (!incoming.every((e) => states.has(e.from))) continue;
      const isTaken = incoming.some((e) => taken.get(e.from)?.has(vertex.id) === true);
      decided.add(vertex.id);
      planned.push({ vertexId: vertex.id, state: isTaken ? "DISPATCHED" : "SKIPPED" });
      if (!isTaken) {
        states.set(vertex.id, "SKIPPED");
        progress = true;
      }
    }
  }
  return planned;
}
