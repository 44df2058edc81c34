/**
 * MAP definitions shared by test files: entry → refund (a MAP, one keyed Gateway refund per order
 * line, its key `refund-<order>-<sku>`) → done (a TRANSFORM of the MAP's outputs).
 */
import type { WorkflowDefinitionInput } from "../../src/definitions/schema";
import { DEST, unique } from "./helpers";

/** The per-item retry policy, when a test needs one other than the default. */
type ItemRetry = { maxAttempts: number; backoff: "fixed" | "exponential"; initialDelayMs: number; maxDelayMs: number };

/** The refund-lines MAP: `concurrency` items at a time, at most 100, a failed item fails the MAP. */
export function refundLinesWorkflow(concurrency: number, retry?: ItemRetry): WorkflowDefinitionInput {
  return {
    id: unique("wf"),
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "refund",
        type: "MAP",
        config: {
          items: "= payload.order.lines",
          as: "line",
          concurrency,
          maxItems: 100,
          onItemFailure: "fail",
          step: {
            type: "GATEWAY",
            config: {
              method: "POST",
              url: `${DEST}/payments/charges`,
              headers: { "Idempotency-Key": "= 'refund-' & payload.order.id & '-' & line.sku" },
              body: "= { 'sku': line.sku, 'amount': line.amount }",
              ...(retry === undefined ? {} : { retry }),
            },
          },
        },
      },
      { id: "done", type: "TRANSFORM", config: { output: "= steps.refund" } },
    ],
    edges: [
      { from: "received", to: "refund" },
      { from: "refund", to: "done" },
    ],
  } as unknown as WorkflowDefinitionInput;
}
