/**
 * Request shapes of the HTTP API as zod schemas, for the OpenAPI document (input shapes). These
 * routes parse with the very schema the document states: `PUT /v1/workflows/{id}`
 * (WorkflowDefinition), the execution list and `GET /v1/stats` (ExecutionListQuery, StatsQuery)
 * and the retry and cancel bodies (src/http/query-params.ts). The others (workflow list and read,
 * trigger and test-run queries, the secret body) still parse by hand and are described here;
 * moving them onto these schemas is the next step.
 */
import { z } from "zod";
import { WorkflowDefinition } from "../../definitions/schema";
import { EXECUTION_STATUSES } from "./responses";

export { WorkflowDefinition };

const Flag = z.enum(["true", "false"]);
/** An ISO 8601 date-time with a zone, e.g. `2026-12-03T10:00:00Z`. */
const DateTime = z.iso.datetime({ offset: true });

export const ExecutionListQuery = z.object({
  workflowId: z.string().optional().describe("only this workflow's executions"),
  status: z.enum(EXECUTION_STATUSES).optional(),
  limit: z.int().min(1).max(100).default(20),
  cursor: z.string().optional().describe("the `nextCursor` of the previous page, unchanged"),
  since: DateTime.optional().describe("created at or after this time"),
  until: DateTime.optional().describe("created before this time"),
  hadDuplicates: Flag.optional().describe("true: only executions that stopped at least one duplicate"),
  retried: Flag.optional().describe("true: only executions with a step that needed more than one attempt"),
});

export const StatsQuery = z.object({
  since: DateTime.optional().describe("sum over executions created at or after this time; default 24 hours ago"),
});

export const WorkflowListQuery = z.object({
  after: z.string().optional().describe("the `next` of the previous page"),
  limit: z.int().min(1).max(500).default(100),
});

export const WorkflowReadQuery = z.object({
  version: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional()
    .describe("a version a PUT returned; default the latest"),
});

export const TriggerQuery = z.object({
  clientIdempotencyId: z
    .string()
    .regex(/^[\x20-\x7e]{1,255}$/) // the shared key rule (src/lib/key-constraints.ts DEFAULT_KEY_CONSTRAINTS)
    .optional()
    .describe("your own id for this delivery: it alone decides the identity (1–255 printable ASCII)"),
});

export const TestRunQuery = z.object({
  forceNewExecution: Flag.optional().describe("false: deduplicate like a production trigger; default: a new execution each time"),
});

export const RetryBody = z.strictObject({
  acknowledgeForgottenKey: z
    .boolean()
    .optional()
    .describe("true: re-send a key the retention guard refused, after checking by hand (recorded in the trace)"),
});

export const CancelBody = z.strictObject({
  releaseIdentity: z.boolean().optional().describe("true: the next identical trigger starts a new execution"),
});

export const SecretBody = z.strictObject({
  value: z.string().min(1).describe("1–4096 UTF-8 bytes without control characters; never readable back"),
});

/** The JSON object a trigger sends: any JSON (the entry point may select `idempotencyFields` from it). */
export const TriggerPayload = z.json();
