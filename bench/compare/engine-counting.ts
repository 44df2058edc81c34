/**
 * The idemflow engine as the comparison bench runs it: src/index.ts, unchanged, behind a thin
 * entry that adds two instruments and nothing else.
 *
 * 1. D1 statement counting. Every handler (fetch, queue, scheduled) gets an env whose `DB` is
 *    `countingD1(env.DB)` (the same wrapper the test budgets use, counting only): the real database does all the
 *    work, the wrapper only counts statements and round trips. `GET /__bench/d1` reads the
 *    counters, `POST /__bench/d1/reset` zeroes them. The driver's own reads (`/__bench/*` and
 *    `GET /v1/executions…`) run on the uncounted binding, so polling never inflates the figure.
 *
 * 2. A crash right after a destination call. `POST /__bench/crash-after-call { key, count }` arms
 *    the next `count` outbound requests carrying `Idempotency-Key: key`: the request really reaches
 *    the destination (the charge happens), then the call throws in the step's worker before the
 *    engine can record the result. This is the Workflows twin's `throwAfterCharge`.
 *
 * Counters and armed crashes live in isolate memory: `wrangler dev` serves this Worker from one
 * isolate, which is all a local bench needs (never do this for state the engine relies on).
 */
import engine from "../../src/index";
import { countingD1, type CountingD1 } from "../../test/helpers/counting-d1";
import { countingQueue } from "../lib/counting-queue";

let counter: CountingD1 | undefined;
/** Messages the engine sent to its step queue (send and sendBatch), since the last reset. */
let queueMessages = 0;
let countedQueue: Env["QUEUE"] | undefined;
const armedCrashes = new Map<string, number>();
let crashesFired = 0;

const realFetch = globalThis.fetch.bind(globalThis);
globalThis.fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
  if (armedCrashes.size === 0) return realFetch(input, init);
  const key = idempotencyKeyOf(input, init);
  const response = await realFetch(input, init);
  const remaining = key ? (armedCrashes.get(key) ?? 0) : 0;
  if (key && remaining > 0) {
    if (remaining > 1) armedCrashes.set(key, remaining - 1);
    else armedCrashes.delete(key);
    crashesFired++;
    // Drain the body so the destination's response is fully received: the side effect is done.
    await response.arrayBuffer();
    throw new Error("bench: injected crash after the destination call");
  }
  return response;
};

// Read before the call: building a Request from a sent one would touch its consumed body.
function idempotencyKeyOf(input: RequestInfo | URL, init?: RequestInit): string | null {
  if (init?.headers) return new Headers(init.headers).get("idempotency-key");
  return input instanceof Request ? input.headers.get("idempotency-key") : null;
}

/** One counted env per env the runtime hands in (the same object per isolate): the engine's per-env caches keep working. */
const countedEnvs = new WeakMap<Env, Env>();

function counted(env: Env): Env {
  // Count only: the tests enforce D1's limits (test/helpers/d1-limits.ts); measuring every bound
  // value here would bill the engine for the instrument.
  counter ??= countingD1(env.DB, { enforceLimits: false });
  countedQueue ??= countingQueue(env.QUEUE, (n) => (queueMessages += n));
  let wrapped = countedEnvs.get(env);
  if (!wrapped) countedEnvs.set(env, (wrapped = { ...env, DB: counter.db, QUEUE: countedQueue }));
  return wrapped;
}

/** Statement counts grouped by the first words of their SQL, to show where the statements go. */
function statementsBySql(calls: CountingD1["calls"]): Record<string, number> {
  const groups: Record<string, number> = {};
  for (const call of calls) {
    for (const sql of call.sql) {
      const head = sql.replace(/\s+/g, " ").trim().slice(0, 70);
      groups[head] = (groups[head] ?? 0) + 1;
    }
  }
  return groups;
}

async function benchRoute(request: Request, env: Env): Promise<Response> {
  const url = new URL(request.url);
  if (url.pathname === "/__bench/d1" && request.method === "GET") {
    const calls = counter?.calls ?? [];
    return Response.json({
      roundTrips: counter?.roundTrips() ?? 0,
      statements: counter?.statements() ?? 0,
      batches: calls.filter((c) => c.kind === "batch").length,
      // What D1 reports each statement wrote and read (`meta`): what it bills, indexes and triggers included.
      rowsWritten: counter?.rowsWritten() ?? 0,
      rowsRead: counter?.rowsRead() ?? 0,
      queueMessages,
      bySql: url.searchParams.has("detail") ? statementsBySql(calls) : undefined,
    });
  }
  if (url.pathname === "/__bench/d1/reset" && request.method === "POST") {
    counter?.reset();
    queueMessages = 0;
    return Response.json({ ok: true });
  }
  if (url.pathname === "/__bench/crash-after-call" && request.method === "POST") {
    const { key, count } = (await request.json()) as { key: string; count: number };
    armedCrashes.set(key, count);
    return Response.json({ armed: key, count });
  }
  if (url.pathname === "/__bench/crashes" && request.method === "GET") {
    return Response.json({ fired: crashesFired });
  }
  // Completion summary of one workflow's executions, read straight from the engine's table
  // (one statement, uncounted): how many finished, and when the last one did.
  if (url.pathname === "/__bench/executions" && request.method === "GET") {
    const workflowId = url.searchParams.get("workflowId") ?? "";
    const { results } = await env.DB.prepare(
      `SELECT status, count(*) AS n, min(created_at) AS first_created, max(finished_at) AS last_finished
         FROM executions WHERE workspace = 'dev' AND workflow_id = ? GROUP BY status`,
    )
      .bind(workflowId)
      .all();
    return Response.json({ byStatus: results });
  }
  // Baselines for a duplicate's CPU (bench/compare/run.mjs `duplicateCost`): a request that reads
  // its body and answers, and one that also sends a D1 batch of three trivial statements — what
  // workerd and local D1 cost before the engine's own work.
  if (url.pathname === "/__bench/noop" && request.method === "POST") {
    await request.arrayBuffer();
    return Response.json({ ok: true });
  }
  if (url.pathname === "/__bench/d1-select" && request.method === "POST") {
    await request.arrayBuffer();
    const select = env.DB.prepare("SELECT 1 AS one");
    const results = await env.DB.batch([select, select, select]);
    return Response.json({ ok: results.length === 3 });
  }
  return Response.json({ error: "unknown bench route" }, { status: 404 });
}

export default {
  fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.pathname.startsWith("/__bench/")) return benchRoute(request, env);
    const driverRead = request.method === "GET" && url.pathname.startsWith("/v1/executions");
    return engine.fetch(request, driverRead ? env : counted(env), ctx);
  },
  queue: (batch, env, ctx) => engine.queue(batch, counted(env), ctx),
  scheduled: (controller, env, ctx) => engine.scheduled(controller, counted(env), ctx),
} satisfies ExportedHandler<Env>;
