/**
 * Production triggers on a harness's clock for the history × identity tests: a workflow whose
 * trigger identity is its `customer` field (a 90 s dedupe window) and whose finished executions
 * are kept 2 minutes, started through the real start service.
 */
import { env } from "cloudflare:test";
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import type { StoredWorkflow } from "../../src/definitions/store";
import { startWorkflowExecution, type StartResult } from "../../src/ingress/start";
import type { Harness } from "../steps/helpers";

export const MINUTE = 60_000;

/** entry (`idempotencyFields: ["customer"]`, window 90 s) → `vertices`; finished executions kept 2 minutes. */
export function shortLived(
  id: string,
  vertices: WorkflowDefinitionInput["vertices"],
  edges: WorkflowDefinitionInput["edges"],
): WorkflowDefinitionInput {
  return {
    id,
    history: { completed: "2m", failed: "2m", cancelled: "2m" },
    vertices: [{ id: "entry", type: "ENTRY_POINT", config: { idempotencyFields: ["customer"], dedupeWindow: "90s" } }, ...vertices],
    edges,
  } as WorkflowDefinitionInput;
}

/** entry → paid (WAIT_FOR_EVENT `payment.confirmed` on payload.order, 3 days) → ship. */
export function shipsOnPayment(id: string): WorkflowDefinitionInput {
  return shortLived(
    id,
    [
      { id: "paid", type: "WAIT_FOR_EVENT", config: { event: "payment.confirmed", match: "= payload.order", timeout: "3d" } },
      { id: "ship", type: "TRANSFORM", config: { output: { shipped: "= payload.order", payment: "= steps.paid.data" } } },
    ],
    [
      { from: "entry", to: "paid" },
      { from: "paid", to: "ship" },
    ],
  );
}

/** A production trigger on the harness's clock (identity: the `customer` field). */
export function trigger(
  h: Harness,
  workflow: StoredWorkflow,
  payload: { customer: string } & Record<string, unknown>,
): Promise<StartResult> {
  return startWorkflowExecution(
    { db: env.DB, queue: h.queue as never, now: h.clock.now },
    { workflow, triggerKind: "webhook", payload, identity: { kind: "fields", material: [payload.customer], scope: "production" } },
  );
}
