/**
 * A TRANSFORM completed inside its predecessor's settle (issue 47 point 2, docs/steps.md
 * "Chaining"). A transform has no side effect and is never retried: the same inputs give the same
 * output. So when a step completes and a successor is a TRANSFORM that reads only what this
 * invocation holds, the worker evaluates it before the settle batch and the batch inserts it
 * COMPLETED — its output, its taken edges and its one attempt on its row — instead of inserting it
 * claimed and settling it in a second batch. No lease, no second round trip, no window in which a
 * crash leaves it EXECUTING: it commits with the settle that made it ready, or not at all.
 *
 * Only the simple case is taken; anything else goes the usual way (claimed or dispatched, then run):
 * - chaining is on and its budget offers this settle a chained step (src/steps/chain.ts
 *   `ChainBudget.offer`): the inline run is that step, counted as one (src/steps/run-step.ts);
 * - it is the settled step's only taken edge (a fan-out keeps claiming one successor and sending the
 *   others their messages), and the settled step is its only predecessor (so it is ready);
 * - its inputs are all in memory, within the bound (src/steps/chain.ts `inputsFromMemory`);
 * - it evaluates, its output is within `MAX_OUTPUT_BYTES`, and its edge conditions evaluate. A
 *   transform that fails is run the usual way and fails there, with its attempt on record as before.
 * The batch still decides (src/ledger/step-settle.ts `decideStep`): the row is inserted COMPLETED only
 * if the settle held its fence and the execution has no FAILED step; otherwise it is inserted as any
 * successor would be, and runs.
 */
import type { WorkflowDefinition } from "../definitions/schema";
import { MAX_STEP_INPUT_BYTES, type InlineCompletion, type StepRun } from "../ledger";
import { asStored, contextOf, inputsFromMemory, type KnownInputs } from "./chain";
import { predecessorsOf, takenSuccessors, vertexOf } from "./graph";
import { MAX_OUTPUT_BYTES } from "./outcome";
import { runTransform } from "./transform";

/**
 * The first TRANSFORM among `nextVertices` that can complete in the settle of `settledVertexId`
 * (whose output is `settledOutput`), evaluated — or null.
 */
export async function inlineTransform(
  definition: WorkflowDefinition,
  run: StepRun,
  settledVertexId: string,
  settledOutput: unknown,
  nextVertices: readonly string[],
  known: KnownInputs,
): Promise<(InlineCompletion & { value: unknown }) | null> {
  const after: KnownInputs = { ...known, outputs: new Map(known.outputs).set(settledVertexId, asStored(settledOutput)) };
  for (const vertexId of nextVertices) {
    const vertex = vertexOf(definition, vertexId);
    if (vertex?.type !== "TRANSFORM") continue;
    const predecessors = predecessorsOf(definition, vertexId);
    if (predecessors.length !== 1 || predecessors[0] !== settledVertexId) continue;
    const inputs = inputsFromMemory(definition, vertexId, after, MAX_STEP_INPUT_BYTES);
    if (!inputs?.withinBound) continue;
    const context = contextOf(inputs, run.entryVertexId, { id: run.executionId, workflowId: run.workflowId, trigger: run.triggerKind });
    const outcome = await runTransform(vertex, context);
    if (outcome.kind !== "completed") continue;
    const output = JSON.stringify(outcome.output ?? null);
    if (new TextEncoder().encode(output).byteLength > MAX_OUTPUT_BYTES) continue;
    try {
      const taken = await takenSuccessors(definition, vertexId, { ...context, steps: { ...context.steps, [vertexId]: outcome.output } });
      return { vertexId, output, nextVertices: taken, value: outcome.output };
    } catch {
      continue;
    }
  }
  return null;
}
