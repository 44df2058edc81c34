/**
 * The operator's actions on a failed compensation (docs/steps.md "Compensation", issue 45):
 *
 * - `POST /v1/executions/{executionId}/compensation/retry` — the COMPENSATION_FAILED execution's
 *   failed undo DISPATCHED again with the key it persisted (one refund at the destination whatever
 *   the first attempts did); the execution COMPENSATING again. 202.
 * - `POST /v1/executions/{executionId}/compensation/resolve` `{"note", "resolvedBy"?}` — "mark
 *   resolved": the execution COMPENSATED (final), the resolution on record, the undo steps never sent
 *   CANCELLED, the keys left undone burnt. 200.
 *
 * Both sit behind the Idempotency-Key ledger with a required key (an operator's double click acts
 * once), scoped to the bearer's workspace (another workspace's execution answers 404), and answer
 * 409 `execution-not-compensation-failed` for any other status; a removed execution 410.
 */
import { Hono } from "hono";
import { z } from "zod";
import { readTombstone, resolveCompensation, retryFailedUndo } from "../../ledger";
import { commonProblems } from "../../lib/common-problems";
import { isoTime } from "../../lib/iso-time";
import { nowOf } from "../../lib/clock";
import { sendUndoMessages } from "../../steps/compensate";
import { executionProblems } from "../../steps/problems";
import { requireWorkspace, type AppEnv } from "../auth";
import { idempotency, principalFromContext } from "../idempotency";
import { ResolveBody } from "../openapi/compensation";
import { parseOperatorBody } from "../query-params";

export const compensationRoutes = new Hono<AppEnv>();

compensationRoutes.use("/:executionId/compensation/*", requireWorkspace);

const operatorKey = idempotency({ principal: principalFromContext("workspace"), required: true });

async function notFoundOrRemoved(db: D1Database, workspace: string, executionId: string): Promise<never> {
  const tombstone = await readTombstone(db, workspace, executionId);
  if (tombstone) throw executionProblems.executionRemoved(tombstone);
  throw commonProblems.notFound(`Execution ${executionId}`);
}

compensationRoutes.post("/:executionId/compensation/retry", operatorKey, async (c) => {
  const workspace = c.get("workspace");
  const executionId = c.req.param("executionId");
  const result = await retryFailedUndo(c.env.DB, workspace, executionId, null, nowOf(c.env));
  if (!result.retried) {
    if (result.status === null) return notFoundOrRemoved(c.env.DB, workspace, executionId);
    if (result.reason === "live-execution" && result.liveExecutionId) {
      throw executionProblems.liveExecutionExists(executionId, result.liveExecutionId);
    }
    throw executionProblems.executionNotCompensationFailed(executionId, result.status, "retry");
  }
  await sendUndoMessages(c.env.QUEUE as never, [result.undo]);
  return c.json(
    {
      executionId,
      status: "COMPENSATING",
      undo: { vertexId: result.undo.vertexId, place: result.undo.place, state: "DISPATCHED" },
    },
    202,
  );
});

/** The resolve body: its members read loosely first (unknown members refused), then each checked with its own message. */
const LooseResolveBody = z.strictObject({ note: z.unknown().optional(), resolvedBy: z.unknown().optional() });

async function resolveBodyOf(request: Request): Promise<z.output<typeof ResolveBody>> {
  const loose = await parseOperatorBody(request, LooseResolveBody, executionProblems.resolveBodyInvalid);
  if (loose.note === undefined) throw executionProblems.resolveBodyInvalid("`note` is required");
  const parsed = ResolveBody.safeParse(loose);
  if (parsed.success) return parsed.data;
  const member = String(parsed.error.issues[0]?.path[0] ?? "note");
  const bound = member === "note" ? 2000 : 200;
  throw executionProblems.resolveBodyInvalid(`\`${member}\` must be a string of 1 to ${bound} characters`);
}

compensationRoutes.post("/:executionId/compensation/resolve", operatorKey, async (c) => {
  const workspace = c.get("workspace");
  const executionId = c.req.param("executionId");
  const body = await resolveBodyOf(c.req.raw);
  const result = await resolveCompensation(c.env.DB, workspace, executionId, {
    now: nowOf(c.env),
    resolvedBy: body.resolvedBy ?? `an API token of workspace ${workspace}`,
    note: body.note,
  });
  if (!result.resolved) {
    if (result.status === null) return notFoundOrRemoved(c.env.DB, workspace, executionId);
    throw executionProblems.executionNotCompensationFailed(executionId, result.status, "resolve");
  }
  const r = result.resolution;
  return c.json({ ...r, resolvedAt: isoTime(r.resolvedAt) }, 200);
});
