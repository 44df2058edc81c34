/**
 * The destination key of an execution's first step, computed by the trigger before its start
 * batch (src/ingress/start.ts). The batch inserts the step claimed with it (src/ledger/start-steps.ts
 * `insertStartSteps`; its first send by the insert's trigger), so the inline run finds its key
 * persisted and its first send on record, and sends without a key-persist round trip of its own: three
 * round trips on the trigger-run happy path instead of four.
 *
 * The evaluation is the one the step's first attempt would make (./gateway/key.ts): the same
 * context, built from the payload exactly as the step's inputs read it, and the same checks. What
 * would make that attempt fail before it sends — no key rule, an expression that fails, a key part
 * that is absent, null or empty (no key is ever persisted from absent data), a key the destination
 * refuses, a URL that is not one, inputs over their bound — gives null here, and the
 * step resolves its key when it runs, as it always did, and reports the failure there.
 *
 * The caller leaves out start overs: their first attempt may have to verify first
 * (./gateway/verify.ts), and a probe that finds the write already done sends nothing.
 */
import { destinationKeyOf, keySendDestination } from "../definitions/destination-key";
import { entryPointOf, type WorkflowDefinition } from "../definitions/schema";
import { evaluateValue } from "../expressions/evaluate";
import { guardOf, MAX_STEP_INPUT_BYTES, type FirstStepKey } from "../ledger";
import { contextOf, inputsFromMemory, type KnownInputs } from "./chain";
import { checkUrl } from "./gateway/evaluate";
import { evaluateDestinationKey } from "./gateway/key";
import { vertexOf } from "./graph";
import type { ExpressionContext } from "./plan";

export async function firstStepKey(
  definition: WorkflowDefinition,
  vertexId: string,
  known: KnownInputs,
  execution: ExpressionContext["execution"],
): Promise<FirstStepKey | null> {
  const vertex = vertexOf(definition, vertexId);
  if (vertex?.type !== "GATEWAY") return null;
  const rule = destinationKeyOf(vertex.config);
  if (rule === null) return null;
  const inputs = inputsFromMemory(definition, vertexId, known, MAX_STEP_INPUT_BYTES);
  if (!inputs?.withinBound) return null;
  const context = contextOf(inputs, entryPointOf(definition).id, execution);
  let url: unknown;
  try {
    url = await evaluateValue(vertex.config.url, context);
  } catch {
    return null;
  }
  if (typeof url !== "string") return null;
  const checked = checkUrl(url);
  if ("error" in checked) return null;
  const key = await evaluateDestinationKey(vertexId, rule.expression, context, rule);
  if ("error" in key) return null;
  return {
    executionId: execution.id,
    vertexId,
    key: key.key,
    destination: keySendDestination(vertex.config, checked.url),
    guarded: guardOf(rule.retentionMs),
  };
}
