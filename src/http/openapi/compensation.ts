/**
 * The OpenAPI shapes of the operator's actions on a failed compensation (docs/steps.md
 * "Compensation"; src/http/routes/compensation.ts): retry the failed undo with its same key, or
 * mark the compensation resolved with a note — listed in the `executions` area (./paths/executions.ts).
 */
import { z } from "zod";
import { keyedAction, json, op } from "./operation";

export const ResolveBody = z.strictObject({
  note: z.string().min(1).max(2000).describe("what was done by hand (a refund made in the provider's console, a ticket): kept on record"),
  resolvedBy: z.string().min(1).max(200).optional().describe("who resolved it (default: the workspace's API token)"),
});

export const UndoRetryAccepted = z.object({
  executionId: z.string(),
  status: z.literal("COMPENSATING").describe("the execution compensates again"),
  undo: z
    .object({
      vertexId: z.string().describe("the step the undo reverses"),
      place: z.int().min(0).describe("its place in the compensation's order (0 ran first)"),
      state: z.literal("DISPATCHED"),
    })
    .describe("the failed undo, DISPATCHED again with the key it persisted (the destination deduplicates a repeat)"),
});

export const CompensationResolved = z.object({
  executionId: z.string(),
  status: z.literal("COMPENSATED").describe("final; the resolution is on record"),
  resolvedBy: z.string(),
  note: z.string(),
  resolvedAt: z.iso.datetime().describe("ISO-8601 UTC"),
  failedUndo: z.string().nullable().describe("the undo step that had failed (`<vertex>#undo#<place>`)"),
  cancelledUndos: z.array(z.string()).describe("the undo steps after it, never sent, now CANCELLED"),
});

const NOT_FAILED = {
  404: ["not-found" as const],
  409: ["execution-not-compensation-failed" as const],
  410: ["execution-removed" as const],
};

export const COMPENSATION_OPERATIONS = [
  op("post", "/v1/executions/{executionId}/compensation/retry", "retryCompensation", {
    summary: "Operator retry of a COMPENSATION_FAILED execution's failed undo, with the same persisted key",
    ...keyedAction(
      null,
      { 202: json("the undo is DISPATCHED again; the execution COMPENSATING", UndoRetryAccepted, ["idempotent-replayed"]) },
      {
        ...NOT_FAILED,
        409: ["execution-not-compensation-failed", "live-execution-exists"],
      },
    ),
  }),
  op("post", "/v1/executions/{executionId}/compensation/resolve", "resolveCompensation", {
    summary: "Mark a COMPENSATION_FAILED execution's compensation resolved, with a note: it becomes COMPENSATED",
    ...keyedAction(
      { schema: ResolveBody, invalid: "invalid-resolve-body" },
      { 200: json("resolved: COMPENSATED, the resolution on record", CompensationResolved, ["idempotent-replayed"]) },
      NOT_FAILED,
    ),
    body: { schema: ResolveBody, required: true, description: "the note (required) and who resolved it" },
  }),
];
