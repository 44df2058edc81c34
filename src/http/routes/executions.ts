/**
 * Executions: the trace, the list, and the operator actions (SPEC section 7). Every route is
 * scoped to the bearer's workspace: another workspace's execution answers 404, never 403, so
 * ids do not leak across workspaces. The three mutating routes (retry, start over, cancel) sit
 * behind the Idempotency-Key ledger with a required key: an operator's double click acts once.
 */
import { Hono } from "hono";
import { getWorkflow } from "../../definitions/store";
import { ingressDeps, startWorkflowExecution } from "../../ingress/start";
import { parseStoredPayload } from "../../ingress/payload";
import { cancelExecution, readExecution, retryFailedStep } from "../../ledger";
import { parseJsonBytes, readRawBody } from "../../lib/request-body";
import { sendStepMessages } from "../../steps/dispatch";
import { decodeCursor, listExecutions, readTrace } from "../../steps/trace";
import { requireWorkspace, type AppEnv } from "../auth";
import { idempotency, principalFromContext } from "../idempotency";
import { commonProblems } from "../../lib/common-problems";
import { executionProblems } from "../../steps/problems";
import { flagParam, timeParam } from "../query-params";

export const executionRoutes = new Hono<AppEnv>();

executionRoutes.use("*", requireWorkspace);

const operatorKey = idempotency({ principal: principalFromContext("workspace"), required: true });

const STATUSES = ["RUNNING", "COMPLETED", "FAILED", "CANCELLED"] as const;
type Status = (typeof STATUSES)[number];

executionRoutes.get("/", async (c) => {
  const workflowId = c.req.query("workflowId") || undefined;
  const statusParam = c.req.query("status");
  if (statusParam !== undefined && !(STATUSES as readonly string[]).includes(statusParam)) {
    throw executionProblems.invalidStatus(STATUSES, statusParam);
  }
  const limitParam = c.req.query("limit");
  const limit = limitParam === undefined ? 20 : Number(limitParam);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw executionProblems.invalidLimit();
  const cursorParam = c.req.query("cursor");
  const before = cursorParam === undefined ? undefined : decodeCursor(cursorParam);
  if (before === null) throw executionProblems.invalidCursor();
  const page = await listExecutions(c.env.DB, c.get("workspace"), {
    workflowId,
    status: statusParam as Status | undefined,
    since: timeParam(c.req.query("since"), "since"),
    until: timeParam(c.req.query("until"), "until"),
    hadDuplicates: flagParam(c.req.query("hadDuplicates"), "hadDuplicates"),
    retried: flagParam(c.req.query("retried"), "retried"),
    before,
    limit,
  });
  return c.json(page);
});

executionRoutes.get("/:executionId", async (c) => {
  const trace = await readTrace(c.env.DB, c.get("workspace"), c.req.param("executionId"));
  if (!trace) throw commonProblems.notFound(`Execution ${c.req.param("executionId")}`);
  return c.json(trace);
});

executionRoutes.post("/:executionId/steps/:vertexId/retry", operatorKey, async (c) => {
  const ref = { executionId: c.req.param("executionId"), vertexId: c.req.param("vertexId") };
  const acknowledgeForgottenKey = await booleanOption(c.req.raw, "acknowledgeForgottenKey", executionProblems.retryBodyInvalid);
  const result = await retryFailedStep(c.env.DB, c.get("workspace"), ref, Date.now(), { acknowledgeForgottenKey });
  if (!result.retried) {
    switch (result.reason) {
      case "not-found":
        throw commonProblems.notFound(`Step ${ref.vertexId} of execution ${ref.executionId}`);
      case "not-failed":
        throw executionProblems.stepNotFailed(ref, result.state);
      case "needs-acknowledgement":
        throw executionProblems.keyMayBeForgotten(ref);
      case "execution-cancelled":
        throw executionProblems.executionCancelled(ref);
      case "live-execution":
        throw executionProblems.liveExecutionExists(ref.executionId, result.liveExecutionId);
      case "superseded":
        throw executionProblems.executionSuperseded(ref.executionId, result.supersededBy);
    }
  }
  await sendStepMessages(c.env.QUEUE as never, [ref]);
  const acknowledged = result.acknowledged ? { acknowledgedForgottenKey: true } : {};
  return c.json({ executionId: ref.executionId, vertexId: ref.vertexId, state: "DISPATCHED", ...acknowledged }, 202);
});

executionRoutes.post("/:executionId/start-over", operatorKey, async (c) => {
  const workspace = c.get("workspace");
  const executionId = c.req.param("executionId");
  const old = await readExecution(c.env.DB, workspace, executionId);
  if (!old) throw commonProblems.notFound(`Execution ${executionId}`);
  // The common case answered early; the start batch checks it again atomically (`startOverGate`).
  if (old.status === "RUNNING") throw executionProblems.executionRunning(executionId);
  // The new execution runs the version the old one pinned, on the same payload: business-derived
  // destination keys come out identical, so destinations deduplicate what already happened.
  const workflow = await getWorkflow(c.env.DB, workspace, old.workflowId, old.version);
  if (!workflow) throw commonProblems.notFound(`The workflow version of execution ${executionId}`);
  const started = await startWorkflowExecution(ingressDeps(c.env), {
    workflow,
    triggerKind: "start_over",
    payload: parseStoredPayload(old.payloadJson),
    identity: { kind: "forced" },
    startedOverFrom: executionId,
  });
  return c.json({ ...started, startedOverFrom: executionId }, 202);
});

executionRoutes.post("/:executionId/cancel", operatorKey, async (c) => {
  const executionId = c.req.param("executionId");
  const releaseIdentity = await booleanOption(c.req.raw, "releaseIdentity", executionProblems.cancelBodyInvalid);
  const result = await cancelExecution(c.env.DB, c.get("workspace"), executionId, Date.now(), { releaseIdentity });
  if (result.cancelled) {
    return c.json({ executionId, status: "CANCELLED", cancelledSteps: result.inFlight, identityReleased: result.identityReleased }, 200);
  }
  if (result.status === null) throw commonProblems.notFound(`Execution ${executionId}`);
  if (result.status !== "CANCELLED") throw executionProblems.executionNotCancellable(executionId, result.status);
  // Already cancelled: its state, as a repeat of the cancel would find it.
  return c.json({ executionId, status: "CANCELLED", cancelledSteps: [], identityReleased: result.identityReleased }, 200);
});

/**
 * An operator action's body: none, or a JSON object with at most one boolean member `name`
 * (`{"acknowledgeForgottenKey": true}` for a retry, `{"releaseIdentity": true}` for a cancel).
 */
async function booleanOption(request: Request, name: string, invalid: (reason: string) => Error): Promise<boolean> {
  const raw = await readRawBody(request, MAX_OPERATOR_BODY_BYTES);
  if (raw.byteLength === 0) return false;
  const body = parseJsonBytes(raw);
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw invalid("The body is not a JSON object");
  const unknown = Object.keys(body).filter((member) => member !== name);
  if (unknown.length > 0) throw invalid(`Unknown member ${JSON.stringify(unknown[0])}`);
  const value = (body as Record<string, unknown>)[name];
  if (value !== undefined && typeof value !== "boolean") throw invalid(`\`${name}\` must be true or false`);
  return value === true;
}

const MAX_OPERATOR_BODY_BYTES = 4096;
