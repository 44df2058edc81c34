/**
 * Starting workflows over the authenticated API (SPEC sections 3 and 7):
 * - `POST /v1/workflows/:workflowId/trigger[?clientIdempotencyId=…]` — production, always deduped;
 * - `POST /v1/workflows/:workflowId/test-runs[?forceNewExecution=false]` — `Prefer: wait=N`;
 * - `POST /v1/workflows/:workflowId/stream[?forceNewExecution=false]` — `text/event-stream`.
 * The work is in src/ingress; these handlers only adapt HTTP to it.
 */
import { Hono, type Context } from "hono";
import { createMiddleware } from "hono/factory";
import { requireWorkspace, type AppEnv } from "../auth";
import { idempotency, principalFromContext } from "../idempotency";
import { ingressDeps } from "../../ingress/start";
import { requestCtx } from "../execution-ctx";
import { healLostStepMessages } from "../../ingress/heal";
import { startResponse, triggerFromRequest } from "../../ingress/trigger";
import {
  preferredWaitSeconds,
  STREAM_MAX_POLLS,
  STREAM_POLL_MS,
  STREAM_STATEMENTS_PER_POLL,
  streamExecution,
  waitForExecution,
} from "../../ingress/watch";
import { countQueries } from "../../lib/query-count";
import { readTrace } from "../../steps/trace";
import { MAX_PAYLOAD_BYTES_LIMIT } from "../../definitions/schema";

export const triggerRoutes = new Hono<AppEnv>();

/** `STREAM_POLL_MS` from the Worker's vars: the pause between a stream's polls (default 250). */
function streamPollMs(env: unknown): number {
  const value = (env as { STREAM_POLL_MS?: string } | undefined)?.STREAM_POLL_MS;
  const n = Number(value);
  return value !== undefined && value !== "" && Number.isFinite(n) && n >= 0 ? n : STREAM_POLL_MS;
}

/**
 * An `Idempotency-Key` header, when sent, goes through the ledger (SPEC section 6) on top of the
 * trigger's own dedupe: a retry with the same key replays the first answer verbatim (e.g. the
 * 202), and the same key with a different body is refused. Without the header, nothing changes.
 */
const optionalIdempotencyKey = idempotency({
  required: false,
  principal: principalFromContext("workspace"),
  // The largest maxPayloadBytes an entry point may declare (src/definitions/schema.ts); the
  // workflow's own, smaller limit is still enforced by the trigger itself.
  maxBodyBytes: MAX_PAYLOAD_BYTES_LIMIT,
});

/**
 * After the answer is built (whatever it is), offer the steps reaper a throttled sweep in
 * `waitUntil` (src/ingress/heal.ts), so authenticated traffic also heals lost step messages when
 * the queue stalls or cron is late. Never delays or fails the answer.
 */
const healAfterResponse = createMiddleware<AppEnv>(async function healAfterResponse(c, next) {
  await next();
  let ctx: ExecutionContext;
  try {
    // Hono declares its own, narrower ExecutionContext; at run time it is the Worker's own.
    ctx = c.executionCtx as unknown as ExecutionContext;
  } catch {
    return; // No ExecutionContext (e.g. `app.request` in a test): nothing to run after the response.
  }
  healLostStepMessages(c.env, ctx);
});

triggerRoutes.post("/:workflowId/trigger", requireWorkspace, healAfterResponse, optionalIdempotencyKey, async (c) => {
  const result = await triggerFromRequest(ingressDeps(c.env, requestCtx(c)), {
    workspace: c.get("workspace"),
    workflowId: c.req.param("workflowId"),
    invocation: "production",
    request: c.req.raw,
  });
  return startResponse(result);
});

/** A test run or stream: the trigger, with what the handler needs to watch the execution it names. */
async function triggerToWatch(c: Context<AppEnv, "/:workflowId">, invocation: "test" | "stream", env: Env = c.env) {
  const deps = ingressDeps(env, requestCtx(c));
  const workspace = c.get("workspace");
  const result = await triggerFromRequest(deps, { workspace, workflowId: c.req.param("workflowId"), invocation, request: c.req.raw });
  return { deps, workspace, result };
}

triggerRoutes.post("/:workflowId/test-runs", requireWorkspace, healAfterResponse, async (c) => {
  const { deps, workspace, result } = await triggerToWatch(c, "test");
  const wait = preferredWaitSeconds(c.req.header("prefer"));
  if (wait === undefined) return startResponse(result);
  // 200 with the finished trace, or 202 with the trace so far when it is still running.
  const finished = await waitForExecution(deps.db, workspace, result.executionId, wait * 1000);
  const trace = await readTrace(deps.db, workspace, result.executionId, deps.now());
  return new Response(JSON.stringify({ ...trace, deduplicated: result.deduplicated }), {
    status: finished ? 200 : 202,
    headers: { "content-type": "application/json", "preference-applied": `wait=${wait}`, location: `/v1/executions/${result.executionId}` },
  });
});

triggerRoutes.post("/:workflowId/stream", requireWorkspace, healAfterResponse, async (c) => {
  // One query count for the invocation (Workers allow 1,000): the start, the inline run of the first
  // step (its budget counts through the same counter, src/steps/chain.ts) and the stream's polls,
  // reserved before the start so the inline run leaves them free (docs/ingress.md).
  const counted = countQueries(c.env.DB);
  const reservation = counted.reserve(STREAM_MAX_POLLS * STREAM_STATEMENTS_PER_POLL);
  const { deps, workspace, result } = await triggerToWatch(c, "stream", { ...c.env, DB: counted.db }).catch((error: unknown) => {
    reservation.release();
    throw error;
  });
  const { response, done } = streamExecution(deps.db, workspace, result, { reservation, pollMs: streamPollMs(c.env) });
  c.executionCtx.waitUntil(done);
  return response;
});
