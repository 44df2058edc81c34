/** Graph questions the settle batch asks about a (validated, acyclic) definition. */
import type { Vertex, WorkflowDefinition } from "../definitions/schema";
import type { DescendantPlan } from "../ledger";
import { edgeTaken, type ExpressionContext } from "./plan";

export function vertexOf(definition: WorkflowDefinition, vertexId: string): Vertex | undefined {
  return definition.vertices.find((v) => v.id === vertexId);
}

export function predecessorsOf(definition: WorkflowDefinition, vertexId: string): string[] {
  return [...new Set(definition.edges.filter((e) => e.to === vertexId).map((e) => e.from))];
}

/**
 * Every vertex reachable from `vertexId` (excluding it), in topological order, with its
 * predecessors: the fan-in decisions the settle batch makes, in an order where a SKIPPED
 * decision is visible to the decisions after it.
 */
export function descendantsInOrder(definition: WorkflowDefinition, vertexId: string): DescendantPlan[] {
  const reachable = new Set<string>();
  const stack = [vertexId];
  while (stack.length > 0) {
    const current = stack.pop()!;
    for (const e of definition.edges) {
      if (e.from === current && !reachable.has(e.to)) {
        reachable.add(e.to);
        stack.push(e.to);
      }
    }
  }
  // Kahn's order over the whole graph, filtered to the reachable set.
  const indegree = new Map(definition.vertices.map((v) => [v.id, 0]));
  for (const e of definition.edges) indegree.set(e.to, (indegree.get(e.to) ?? 0) + 1);
  const queue = definition.vertices.filter((v) => indegree.get(v.id) === 0).map((v) => v.id);
  const order: string[] = [];
  while (queue.length > 0) {
    const id = queue.shift()!;
    order.push(id);
    for (const e of definition.edges) {
      if (e.from !== id) continue;
      const n = (indegree.get(e.to) ?? 0) - 1;
      indegree.set(e.to, n);
      if (n === 0) queue.push(e.to);
    }
  }
  return order.filter((id) => reachable.has(id)).map((id) => ({ vertexId: id, predecessors: predecessorsOf(definition, id) }));
}

/** The successors whose edges from `vertexId` are taken, given the context (with its output). */
export async function takenSuccessors(definition: WorkflowDefinition, vertexId: string, context: ExpressionContext): Promise<string[]> {
  const taken = new Set<string>();
  for (const edge of definition.edges) {
    if (edge.from !== vertexId || taken.has(edge.to)) continue;
    if (await edgeTaken(edge.when, context)) taken.add(edge.to);
  }
  return [...taken];
}
