/**
 * Executions: the trace, the list, and the operator actions (SPEC section 7). Every route is
 * scoped to the bearer's workspace: another workspace's execution answers 404, never 403, so
 * ids do not leak across workspaces. The two mutating routes sit behind the Idempotency-Key
 * ledger with a required key: an operator's double click retries once.
 */
import { Hono } from "hono";
import { getWorkflow } from "../../definitions/store";
import { ingressDeps, startWorkflowExecution } from "../../ingress/start";
import { parseStoredPayload } from "../../ingress/payload";
import { readExecution, retryFailedStep, type OperatorRetryOptions } from "../../ledger";
import { parseJsonBytes, readRawBody } from "../../lib/request-body";
import { sendStepMessages } from "../../steps/dispatch";
import { decodeCursor, listExecutions, readTrace } from "../../steps/trace";
import { requireWorkspace, type AppEnv } from "../auth";
import { idempotency, principalFromContext } from "../idempotency";
import { commonProblems } from "../../lib/common-problems";
import { executionProblems } from "../../steps/problems";

export const executionRoutes = new Hono<AppEnv>();

executionRoutes.use("*", requireWorkspace);

const operatorKey = idempotency({ principal: principalFromContext("workspace"), required: true });

const STATUSES = ["RUNNING", "COMPLETED", "FAILED"] as const;
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
  const options = await retryOptions(c.req.raw);
  const result = await retryFailedStep(c.env.DB, c.get("workspace"), ref, Date.now(), options);
  if (!result.retried) {
    if (result.state === null) throw commonProblems.notFound(`Step ${ref.vertexId} of execution ${ref.executionId}`);
    if ("needsAcknowledgement" in result) throw executionProblems.keyMayBeForgotten(ref);
    throw executionProblems.stepNotFailed(ref, result.state);
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

/** The retry's body: none, or `{"acknowledgeForgottenKey": true|false}` (src/ledger `OperatorRetryOptions`). */
async function retryOptions(request: Request): Promise<OperatorRetryOptions> {
  const raw = await readRawBody(request, MAX_RETRY_BODY_BYTES);
  if (raw.byteLength === 0) return {};
  const body = parseJsonBytes(raw);
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw executionProblems.retryBodyInvalid("The body is not a JSON object");
  const unknown = Object.keys(body).filter((name) => name !== "acknowledgeForgottenKey");
  if (unknown.length > 0) throw executionProblems.retryBodyInvalid(`Unknown member ${JSON.stringify(unknown[0])}`);
  const acknowledge = (body as { acknowledgeForgottenKey?: unknown }).acknowledgeForgottenKey;
  if (acknowledge !== undefined && typeof acknowledge !== "boolean") {
    throw executionProblems.retryBodyInvalid("`acknowledgeForgottenKey` must be true or false");
  }
  return { acknowledgeForgottenKey: acknowledge === true };
}

const MAX_RETRY_BODY_BYTES = 4096;
