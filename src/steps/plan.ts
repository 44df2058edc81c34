/**
 * Which vertices become ready when others settle: pure graph logic, no I/O.
 *
 * A vertex is decided once every predecessor is settled (COMPLETED or SKIPPED). It is then
 * DISPATCHED if at least one incoming edge was taken — its source COMPLETED and its `when`
 * (absent = always) is true — and SKIPPED otherwise. SKIPPED settles the vertex too, so the
 * decision propagates until nothing more can be decided.
 *
 * Used by ingress (the entry's successors, written in the trigger's batch) and by the steps
 * settle-and-dispatch batch.
 */
import type { WorkflowDefinition } from "../definitions/schema";
import { evaluate } from "../expressions/evaluate";
import { EXPRESSION_PREFIX } from "../definitions/schema";

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
 * @param settled every vertex already settled, with its state (the entry point is COMPLETED)
 * @param known   every vertex that already has a step row (settled or not): never planned again
 */
export async function planReadySteps(
  definition: WorkflowDefinition,
  settled: ReadonlyMap<string, SettledState>,
  known: ReadonlySet<string>,
  context: ExpressionContext,
): Promise<PlannedStep[]> {
  const states = new Map(settled);
  const decided = new Set(known);
  const planned: PlannedStep[] = [];
  let progress = true;
  while (progress) {
    progress = false;
    for (const vertex of definition.vertices) {
      if (decided.has(vertex.id)) continue;
      const incoming = definition.edges.filter((e) => e.to === vertex.id);
      if (incoming.length === 0) continue; // the entry point
      if (!incoming.every((e) => states.has(e.from))) continue;
      let taken = false;
      for (const edge of incoming) {
        if (states.get(edge.from) === "COMPLETED" && (await edgeTaken(edge.when, context))) {
          taken = true;
          break;
        }
      }
      decided.add(vertex.id);
      planned.push({ vertexId: vertex.id, state: taken ? "DISPATCHED" : "SKIPPED" });
      if (!taken) {
        states.set(vertex.id, "SKIPPED");
        progress = true;
      }
    }
  }
  return planned;
}
