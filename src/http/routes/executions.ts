/**
 * Executions: the trace, the list and its search by business id (SPEC section 15), the operator
 * actions (section 7) and erasure (section 12).
 * Every route is scoped to the bearer's workspace: another workspace's execution answers 404, never
 * 403, so ids do not leak across workspaces. The four mutating routes (retry, start over, cancel,
 * DELETE) sit behind the Idempotency-Key ledger with a required key: an operator's double click
 * acts once.
 *
 * An execution the history sweep removed (its tombstone, read by workspace) answers: `GET` its
 * archived trace (`"archived": true`, with `Execution-Removed-At`), or 404 `execution-not-retained`
 * saying when and why it went; retry, start over, cancel and the event stream 410
 * `execution-removed` (it is read-only: nothing of it is left to act on or to follow).
 */
import { Hono } from "hono";
import { getWorkflow } from "../../definitions/store";
import { ingressDeps, startWorkflowExecution } from "../../ingress/start";
import { requestCtx } from "../execution-ctx";
import { parseStoredPayload } from "../../ingress/payload";
import { cancelExecution, dispatchedUndos, MAX_CHAIN_MEMBERS, readExecution, readTombstone, retryFailedStep } from "../../ledger";
import { findArchivedTrace, readArchivedTrace } from "../../history/archive";
import { eraseExecution } from "../../history/erase";
import { isoTime } from "../../lib/iso-time";
import { sendStepMessages } from "../../steps/dispatch";
import { sendUndoMessages } from "../../steps/compensate";
import { decodeCursor, listExecutions, readTrace } from "../../steps/trace";
import { requireWorkspace, type AppEnv } from "../auth";
import { idempotency, principalFromContext } from "../idempotency";
import { commonProblems } from "../../lib/common-problems";
import { executionProblems } from "../../steps/problems";
import { CancelBody, ExecutionEventsQuery, ExecutionListQuery, RetryBody } from "../openapi/requests";
import { openExecutionEvents, parseEventId } from "../execution-events";
import { ProblemError } from "../../lib/problem";
import { parseOperatorBody, parseQuery, timeOf } from "../query-params";
import { searchTermOf } from "../../ingress/search-terms";
import { searchPage } from "../execution-search";
import { keyMemoryBucket } from "../../keys/memory";
import { nowOf } from "../../lib/clock";

export const executionRoutes = new Hono<AppEnv>();

executionRoutes.use("*", requireWorkspace);

const operatorKey = idempotency({ principal: principalFromContext("workspace"), required: true });

executionRoutes.get("/", async (c) => {
  // The schema the OpenAPI document states (src/http/openapi/requests.ts).
  const q = parseQuery(ExecutionListQuery, c.req.query());
  const before = q.cursor === undefined ? undefined : decodeCursor(q.cursor);
  if (before === null) throw executionProblems.invalidCursor();
  const workspace = c.get("workspace");
  const filter = {
    workflowId: q.workflowId || undefined,
    status: q.status,
    since: timeOf(q.since),
    until: timeOf(q.until),
    hadDuplicates: q.hadDuplicates === "true",
    retried: q.retried === "true",
    before,
    limit: q.limit,
  };
  // A search by business id or destination key (src/http/execution-search.ts), else the plain list.
  const term = await searchTermOf(workspace, q);
  return c.json(
    term ? await searchPage(c.env.DB, workspace, term, filter, keyMemoryBucket(c.env)) : await listExecutions(c.env.DB, workspace, filter),
  );
});

/** The R2 bucket of the archive, when this deployment binds one (reading and erasing need only the binding). */
const archiveOf = (env: Env): R2Bucket | undefined => (env as { ARCHIVE?: R2Bucket }).ARCHIVE;

/** What an erasure answers beside its counts when the deployment binds no archive bucket. */
const ARCHIVE_UNBOUND = {
  archive: "unbound",
  archiveDetail:
    "No ARCHIVE bucket is bound to this deployment, so no archive object was looked for: objects an earlier " +
    "deployment archived under these ids, if any, remain. Bind the bucket and erase again to remove them.",
} as const;

/** The answer for an execution with no row: 410 `execution-removed` when it was removed, else 404. */
async function notFoundOrRemoved(db: D1Database, workspace: string, executionId: string, what: string): Promise<never> {
  const tombstone = await readTombstone(db, workspace, executionId);
  if (tombstone) throw executionProblems.executionRemoved(tombstone);
  throw commonProblems.notFound(what);
}

/** Header of an archived trace's answer: when its rows were removed (the inspector's banner shows it). */
export const REMOVED_AT_HEADER = "execution-removed-at";

executionRoutes.get("/:executionId", async (c) => {
  const workspace = c.get("workspace");
  const executionId = c.req.param("executionId");
  const trace = await readTrace(c.env.DB, workspace, executionId, nowOf(c.env));
  if (trace) return c.json(trace);
  const tombstone = await readTombstone(c.env.DB, workspace, executionId);
  if (!tombstone) {
    // Removed so long ago that its tombstone is gone too: the archive may still hold its trace.
    const bucket = archiveOf(c.env);
    const found = bucket ? await findArchivedTrace(bucket, workspace, executionId) : null;
    if (!found) throw commonProblems.notFound(`Execution ${executionId}`);
    return c.json(found.trace, 200, { [REMOVED_AT_HEADER]: found.uploaded.toISOString() });
  }
  if (!tombstone.archived) throw executionProblems.executionNotRetained(tombstone, "not-archived");
  const bucket = archiveOf(c.env);
  if (!bucket) throw executionProblems.executionNotRetained(tombstone, "archive-unbound");
  const archived = await readArchivedTrace(bucket, tombstone);
  if (!archived) throw executionProblems.executionNotRetained(tombstone, "object-missing");
  return c.json(archived, 200, { [REMOVED_AT_HEADER]: isoTime(tombstone.removedAt) ?? "" });
});

/** Erasure (SPEC section 12, src/history/erase.ts): the execution and its chain, from D1 and the archive. */
executionRoutes.delete("/:executionId", operatorKey, async (c) => {
  const executionId = c.req.param("executionId");
  const bucket = archiveOf(c.env);
  const outcome = await eraseExecution(c.env.DB, bucket, c.get("workspace"), executionId, () => nowOf(c.env));
  switch (outcome.kind) {
    case "erased":
      // No bucket: no archive object was looked for, and the answer says so rather than a bare 0.
      return c.json({ erased: outcome.erased, archiveObjectsDeleted: outcome.archiveObjectsDeleted, ...(bucket ? {} : ARCHIVE_UNBOUND) });
    case "not-found":
      throw commonProblems.notFound(`Execution ${executionId}`);
    case "running":
      throw executionProblems.executionChainRunning(executionId, outcome.running);
    case "chain-too-long":
      throw executionProblems.executionChainTooLong(executionId, MAX_CHAIN_MEMBERS);
    case "conflict":
      throw executionProblems.erasureConflict(executionId);
    case "archive-unbound":
      throw executionProblems.archiveUnbound(executionId);
  }
});

// The execution's changes as server-sent events, resumable (src/http/execution-events.ts,
// docs/events.md). The 404 is decided by the first read, before anything is streamed.
executionRoutes.get("/:executionId/events", async (c) => {
  const executionId = c.req.param("executionId");
  const q = parseQuery(ExecutionEventsQuery, c.req.query());
  const after = parseEventId(c.req.header("last-event-id") ?? q.lastEventId);
  if (after === null) throw invalidEventId();
  const stream = await openExecutionEvents(c.env.DB, c.get("workspace"), executionId, after);
  // A removed execution has nothing left to stream: 410, like the actions (its archived trace is GET's).
  if (!stream) return notFoundOrRemoved(c.env.DB, c.get("workspace"), executionId, `Execution ${executionId}`);
  c.executionCtx.waitUntil(stream.done);
  return stream.response;
});

const invalidEventId = () =>
  new ProblemError({
    status: 400,
    code: "invalid-cursor",
    title: "Invalid cursor",
    detail: "Last-Event-ID must be an id this stream sent (`<n>.<n>` or `<n>.<n>.end`), unchanged; omit it to read from the start.",
  });

executionRoutes.post("/:executionId/steps/:vertexId/retry", operatorKey, async (c) => {
  const ref = { executionId: c.req.param("executionId"), vertexId: c.req.param("vertexId") };
  const { acknowledgeForgottenKey } = await parseOperatorBody(c.req.raw, RetryBody, executionProblems.retryBodyInvalid);
  const result = await retryFailedStep(c.env.DB, c.get("workspace"), ref, nowOf(c.env), { acknowledgeForgottenKey });
  if (!result.retried) {
    switch (result.reason) {
      case "not-found":
        return notFoundOrRemoved(c.env.DB, c.get("workspace"), ref.executionId, `Step ${ref.vertexId} of execution ${ref.executionId}`);
      case "not-failed":
        throw executionProblems.stepNotFailed(ref, result.state);
      case "needs-acknowledgement":
        throw executionProblems.keyMayBeForgotten(ref);
      case "execution-cancelled":
        throw executionProblems.executionCancelled(ref);
      case "compensation":
        throw executionProblems.executionCompensation(ref, result.status);
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
  if (!old) return notFoundOrRemoved(c.env.DB, workspace, executionId, `Execution ${executionId}`);
  // The common case answered early; the start batch checks it again atomically (`startOverGate`).
  if (old.status === "RUNNING") throw executionProblems.executionRunning(executionId);
  // The new execution runs the version the old one pinned, on the same payload: business-derived
  // destination keys come out identical, so destinations deduplicate what already happened.
  const workflow = await getWorkflow(c.env.DB, workspace, old.workflowId, old.version);
  if (!workflow) throw commonProblems.notFound(`The workflow version of execution ${executionId}`);
  // With chaining on, the new execution's first step runs after the answer, as a trigger's does.
  const started = await startWorkflowExecution(ingressDeps(c.env, requestCtx(c)), {
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
  const { releaseIdentity, compensate } = await parseOperatorBody(c.req.raw, CancelBody, executionProblems.cancelBodyInvalid);
  const result = await cancelExecution(c.env.DB, c.get("workspace"), executionId, nowOf(c.env), { releaseIdentity, compensate });
  if (result.cancelled) {
    // With `compensate`, the first undo step's message after the commit (docs/steps.md "Compensation").
    if (result.compensating) await sendUndoMessages(c.env.QUEUE as never, await dispatchedUndos(c.env.DB, executionId));
    const status = result.compensating ? "COMPENSATING" : "CANCELLED";
    return c.json({ executionId, status, cancelledSteps: result.inFlight, identityReleased: result.identityReleased }, 200);
  }
  if (result.status === null) return notFoundOrRemoved(c.env.DB, c.get("workspace"), executionId, `Execution ${executionId}`);
  if (result.status !== "CANCELLED") throw executionProblems.executionNotCancellable(executionId, result.status);
  // Already cancelled: its state, as a repeat of the cancel would find it.
  return c.json({ executionId, status: "CANCELLED", cancelledSteps: [], identityReleased: result.identityReleased }, 200);
});
