// `npm run bench:steps [-- --n=300 --concurrency=16,64 --cap=60000]`: steps/s and end-to-end
// executions/s of a 3-vertex workflow (ENTRY_POINT → GATEWAY → TRANSFORM) under `wrangler dev`.
//
// Starts, on free loopback ports and fresh temporary --persist-to directories (migrations applied
// first; outside connections off):
//   - the demo destinations (demo/wrangler.toml): POST /payments/charges behind the ledger;
//   - the engine (wrangler.toml), with OUTBOUND_ALLOWLIST pointed at the demo's port and
//     PAYMENTS_KEY from a temporary --env-file (so the user's .dev.vars is never read).
// First a few executions one at a time (latency without a queue backlog, `--serial=10`).
// Then, per concurrency: PUT a fresh workflow, fire N triggers with distinct order ids (closed
// loop), wait until none of its executions is RUNNING (bounded), and read createdAt/finishedAt of
// every execution from GET /v1/executions. Afterwards it checks every trace (one attempt, one
// epoch, no events: the happy path the statement counts assume) and that the destination charged
// each order exactly once. Prints one markdown table; raw figures go to bench/results/.
//
// D1 statements per step are NOT measured on the wire (the production Worker runs unwrapped):
// they are counted by calling the engine's own public ledger operations (src/ledger/index.ts)
// with a recording stand-in that executes nothing. See
// docs/benchmarks.md ("Steps") for the derivation from the code.
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { importTs } from "../scripts/import-ts.mjs";
import { ROOT, stopAll } from "../scripts/lib/wrangler-dev.mjs";
import { demoCharge, orderWorkflow } from "../scripts/lib/order-workflow.mjs";
import { flag, runBench, startEngineAndDemo } from "./lib/bench-run.mjs";
import { api, HEADERS } from "./lib/api.mjs";
import { percentile, runLoad } from "./lib/load.mjs";
import { fmt, machine, markdownTable } from "./lib/report.mjs";

const RUN = Date.now().toString(36);
const STEPS_PER_EXECUTION = 2; // GATEWAY + TRANSFORM; the entry is written COMPLETED by ingress

const N = Number(flag("n", 300));
const CONCURRENCIES = flag("concurrency", "16,64").split(",").map(Number);
/** Per round: the trigger phase and the wait for completion are each capped by this. */
const CAP_MS = Number(flag("cap", 60_000));
/** Executions run one at a time first, for the latency without a queue backlog (0: skip). */
const SERIAL = Number(flag("serial", 10));
/** wrangler's --log-level for both Workers (`info` shows each queue batch with its duration). */
const LOG_LEVEL = flag("log-level", "warn");
/** The whole run, servers included, is stopped after this no matter what. */
const HARD_STOP_MS = Number(flag("hard-stop", 240_000));

// ---------------------------------------------------------------------------------------------
// The workflow and the API calls

const definition = (id, demoPort) =>
  orderWorkflow({
    id,
    gateway: demoCharge(`http://127.0.0.1:${demoPort}`),
    then: { id: "done", output: { order: "= payload.order.id", charge: "= steps.charge.body.id" } },
  });

/** Every execution of a workflow with the given status (newest first, following the cursor). */
async function listAll(baseUrl, workflowId, status, maxPages = 50) {
  const items = [];
  let cursor = null;
  for (let page = 0; page < maxPages; page++) {
    const q = new URLSearchParams({ workflowId, status, limit: "100", ...(cursor ? { cursor } : {}) });
    const body = await api(baseUrl, "GET", `/v1/executions?${q}`);
    items.push(...body.items);
    cursor = body.nextCursor;
    if (!cursor) break;
  }
  return items;
}

/** Run `fn` over `items` with at most `limit` in flight, stopping new work at `deadline`. */
async function pool(items, limit, deadline, fn) {
  let next = 0;
  const out = [];
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length && Date.now() < deadline) {
        const i = next++;
        out[i] = await fn(items[i]);
      }
    }),
  );
  return out;
}

// ---------------------------------------------------------------------------------------------
// One round: N executions at one trigger concurrency

async function round({ engine, demo, concurrency }) {
  const workflowId = `bench-steps-${RUN}-c${concurrency}`;
  await api(engine.url, "PUT", `/v1/workflows/${workflowId}`, definition(workflowId, demo.port));
  const orderId = (i) => `o-${RUN}-c${concurrency}-${i}`;
  const triggerUrl = `${engine.url}/v1/workflows/${workflowId}/trigger`;

  const startedAt = Date.now();
  const triggers = await runLoad({
    concurrency,
    durationMs: CAP_MS,
    maxRequests: N,
    request: (i) => ({
      url: triggerUrl,
      init: { method: "POST", headers: HEADERS, body: JSON.stringify({ order: { id: orderId(i), total: 1 + (i % 50) } }) },
    }),
    check: (r) => r.status === 202,
  });
  const triggeredAt = Date.now();

  // Every accepted trigger has its execution row now: wait until none is RUNNING (one cheap
  // query per poll), capped.
  const deadline = triggeredAt + CAP_MS;
  let running = true;
  while (Date.now() < deadline) {
    const q = new URLSearchParams({ workflowId, status: "RUNNING", limit: "1" });
    running = (await api(engine.url, "GET", `/v1/executions?${q}`)).items.length > 0;
    if (!running) break;
    await sleep(200);
  }
  const drainedAt = Date.now();

  const completed = await listAll(engine.url, workflowId, "COMPLETED");
  const failed = await listAll(engine.url, workflowId, "FAILED");
  const stall = running ? await diagnoseStall(engine, workflowId) : null;
  return {
    concurrency,
    n: N,
    workflowId,
    accepted: triggers.statuses[202] ?? 0,
    triggerErrors: triggers.errors,
    triggerStatuses: triggers.statuses,
    triggerRps: triggers.rps,
    triggerP50: triggers.p50,
    triggerP99: triggers.p99,
    completed: completed.length,
    failed: failed.length,
    stillRunning: running,
    ...executionFigures(completed),
    wallMs: drainedAt - startedAt,
    executionIds: completed.map((e) => e.executionId),
    failedSample: failed.slice(0, 3).map((e) => e.executionId),
    stall,
    orderPrefix: `o-${RUN}-c${concurrency}-`,
  };
}

/**
 * Throughput and latency of finished executions on the engine's clock (createdAt → finishedAt);
 * the span runs from the first execution created to the last one finished.
 */
function executionFigures(completed) {
  const created = completed.map((e) => Date.parse(e.createdAt));
  const finished = completed.map((e) => Date.parse(e.finishedAt));
  const latencies = completed.map((_, i) => finished[i] - created[i]).sort((a, b) => a - b);
  const spanMs = completed.length > 0 ? Math.max(...finished) - Math.min(...created) : NaN;
  return {
    spanMs,
    executionsPerSecond: completed.length / (spanMs / 1000),
    stepsPerSecond: (completed.length * STEPS_PER_EXECUTION) / (spanMs / 1000),
    latencyP50: percentile(latencies, 0.5),
    latencyP99: percentile(latencies, 0.99),
    latencyMax: latencies.at(-1) ?? NaN,
  };
}

/**
 * When a round hits its cap: where are the unfinished executions? Step states per vertex, and for
 * EXECUTING steps whether the key was persisted, an output recorded and the lease has expired.
 */
async function diagnoseStall(engine, workflowId) {
  const running = await listAll(engine.url, workflowId, "RUNNING");
  const traces = (
    await pool(running.slice(0, 300), 8, Date.now() + 20_000, (e) => api(engine.url, "GET", `/v1/executions/${e.executionId}`))
  ).filter(Boolean);
  const now = Date.now();
  const states = {};
  const executing = [];
  for (const t of traces) {
    for (const st of t.steps) {
      states[`${st.vertexId}:${st.state}`] = (states[`${st.vertexId}:${st.state}`] ?? 0) + 1;
      if (st.state === "EXECUTING") {
        executing.push({
          executionId: t.executionId,
          vertexId: st.vertexId,
          attempt: st.attempt,
          epoch: st.epoch,
          keyPersisted: st.idempotencyKey !== null,
          output: st.output !== null,
          leaseExpiredMsAgo: st.leaseUntil ? now - Date.parse(st.leaseUntil) : null,
          events: st.events.map((e) => e.type),
        });
      }
    }
  }
  return { running: running.length, tracesRead: traces.length, states, executing: executing.slice(0, 12) };
}

/**
 * Unloaded latency: one execution at a time (trigger, wait until it finished, next), so no
 * backlog builds up in the queue. Same result shape as a round.
 */
async function serialRound({ engine, demo, count }) {
  const workflowId = `bench-steps-${RUN}-serial`;
  await api(engine.url, "PUT", `/v1/workflows/${workflowId}`, definition(workflowId, demo.port));
  const startedAt = Date.now();
  const traces = [];
  for (let i = 0; i < count && Date.now() < startedAt + CAP_MS; i++) {
    const { executionId } = await api(engine.url, "POST", `/v1/workflows/${workflowId}/trigger`, {
      order: { id: `o-${RUN}-serial-${i}`, total: 1 },
    });
    const deadline = Date.now() + 15_000;
    let trace;
    while (Date.now() < deadline) {
      trace = await api(engine.url, "GET", `/v1/executions/${executionId}`);
      if (trace.status !== "RUNNING") break;
      await sleep(25);
    }
    traces.push(trace);
  }
  const wallMs = Date.now() - startedAt;
  const completed = traces.filter((t) => t?.status === "COMPLETED");
  return {
    concurrency: "1, one at a time",
    serial: true,
    n: count,
    workflowId,
    completed: completed.length,
    failed: traces.filter((t) => t?.status === "FAILED").length,
    stillRunning: traces.some((t) => t?.status === "RUNNING"),
    triggerRps: NaN,
    ...executionFigures(completed),
    wallMs,
    executionIds: completed.map((e) => e.executionId),
    orderPrefix: `o-${RUN}-serial-`,
  };
}

/** The happy-path assumption behind the statement counts: one attempt, one epoch, no events. */
async function checkTraces(engine, ids, deadline) {
  const traces = await pool(ids, 8, deadline, (id) => api(engine.url, "GET", `/v1/executions/${id}`));
  const seen = traces.filter(Boolean);
  const offPath = seen.filter((t) =>
    t.steps.some((s) => s.vertexId !== "received" && (s.state !== "COMPLETED" || s.attempt !== 1 || s.epoch !== 1 || s.events.length > 0)),
  );
  const stepMs = { charge: [], done: [] };
  for (const t of seen) {
    for (const s of t.steps)
      if (stepMs[s.vertexId] && s.createdAt && s.finishedAt) stepMs[s.vertexId].push(Date.parse(s.finishedAt) - Date.parse(s.createdAt));
  }
  for (const list of Object.values(stepMs)) list.sort((a, b) => a - b);
  return {
    checked: seen.length,
    offHappyPath: offPath.length,
    offSample: offPath.slice(0, 2).map((t) => ({
      id: t.executionId,
      steps: t.steps.map((s) => ({
        v: s.vertexId,
        state: s.state,
        attempt: s.attempt,
        epoch: s.epoch,
        events: s.events.map((e) => e.type),
      })),
    })),
    // A step's row is created when it is dispatched: created → finished is queue wait + run.
    chargeP50: percentile(stepMs.charge, 0.5),
    doneP50: percentile(stepMs.done, 0.5),
  };
}

// ---------------------------------------------------------------------------------------------
// D1 statements per step, from the engine's own ledger operations (nothing is executed)

async function countStatements(demoPort) {
  // The engine's own public ledger operations (src/ledger/index.ts), through the same in-memory
  // esbuild bundle `npm run validate` and `npm run schema` import src/ through.
  const [{ claimAndLoad, persistIdempotencyKey, settleAndDispatch, startExecution }, { descendantsInOrder }] = await Promise.all(
    ["src/ledger/index.ts", "src/steps/graph.ts"].map((entry) => importTs(entry)),
  );

  // A stand-in D1 that records what would be sent and answers "no rows".
  const calls = [];
  const statement = (sql) => {
    const s = { sql, bind: () => s };
    for (const method of ["first", "run", "all", "raw"])
      s[method] = async () => (calls.push([sql]), method === "first" ? null : { results: [], meta: {} });
    return s;
  };
  const db = {
    prepare: statement,
    batch: async (list) => (calls.push(list.map((s) => s.sql)), list.map(() => ({ results: [], meta: {} }))),
  };
  const take = () => {
    const c = calls.splice(0);
    return { roundTrips: c.length, statements: c.reduce((n, x) => n + x.length, 0) };
  };

  const def = definition("count", demoPort);
  const fence = (vertexId) => ({ executionId: "e", vertexId, epoch: 1 });
  const settle = async (vertexId) => {
    await settleAndDispatch(db, {
      fence: fence(vertexId),
      now: 0,
      outcome: { state: "COMPLETED", output: "{}", nextVertices: vertexId === "charge" ? ["done"] : [] },
      request: null,
      // Ingress stores the entry's taken edges (src/ledger/executions.ts, entryNext), so no
      // settle of this workflow backfills them.
      backfill: [],
      descendants: descendantsInOrder(def, vertexId),
    });
    return take().statements;
  };

  await claimAndLoad(db, { executionId: "e", vertexId: "charge" }, 0, 30_000);
  const claim = take();
  await persistIdempotencyKey(db, fence("charge"), "k", 0, "http://localhost:8788");
  const persist = take();
  const gatewaySettle = await settle("charge");
  const transformSettle = await settle("done");
  const plan = { steps: [{ vertexId: "charge", state: "DISPATCHED" }], entryNext: ["charge"] };
  // The stand-in returns no rows, so the start reads as a version change and throws — after its
  // one batch was recorded, which is all that is counted here.
  await startExecution(
    db,
    {
      workspace: "dev",
      workflowId: "count",
      version: "v",
      entryVertexId: "received",
      triggerKind: "webhook",
      identityKind: "fields",
      payloadJson: "{}",
      requireLatestVersion: true,
    },
    {
      mode: "claim",
      identity: "i",
      claimToken: "t",
      executionId: "x",
      alternateExecutionId: "y",
      expiresAt: 1,
      plans: { first: plan, alternate: plan },
    },
    0,
  ).catch(() => undefined);
  const start = take().statements;

  const gateway = {
    roundTrips: claim.roundTrips + persist.roundTrips + 1,
    statements: claim.statements + persist.statements + gatewaySettle,
  };
  const transform = { roundTrips: claim.roundTrips + 1, statements: claim.statements + transformSettle };
  return {
    claimBatch: claim.statements,
    persistKey: persist.statements,
    gatewaySettle,
    transformSettle,
    gateway,
    transform,
    ingressStart: start,
    perExecution: {
      roundTrips: 1 + gateway.roundTrips + transform.roundTrips,
      statements: start + gateway.statements + transform.statements,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Main

function format(rounds, counts) {
  const perStep = (counts.gateway.statements + counts.transform.statements) / STEPS_PER_EXECUTION;
  const rows = rounds.map((r) => [
    String(r.concurrency),
    `${r.completed}/${r.n}${r.failed ? ` (${r.failed} FAILED)` : ""}`,
    Number.isFinite(r.triggerRps) ? fmt.rps(r.triggerRps) : "–",
    // One at a time, throughput is the bench's own pacing, not the engine's: only latency counts.
    r.serial ? "–" : fmt.ratio(r.executionsPerSecond),
    r.serial ? "–" : fmt.ratio(r.stepsPerSecond),
    fmt.ms(r.latencyP50),
    fmt.ms(r.latencyP99),
    `${(r.spanMs / 1000).toFixed(1)} / ${(r.wallMs / 1000).toFixed(1)}`,
    `${counts.gateway.statements} / ${counts.transform.statements} (≈${perStep.toFixed(1)})`,
  ]);
  return markdownTable(
    [
      "trigger concurrency",
      "completed",
      "triggers/s",
      "executions/s",
      "steps/s",
      "execution p50 ms",
      "execution p99 ms",
      "span s (engine / wall)",
      "D1 statements per step: Gateway / Transform (mean)",
    ],
    rows,
  );
}

async function main({ dir, info, log, keepDir }) {
  const workers = [];
  try {
    const bootStarted = Date.now();
    const { engine, demo } = await startEngineAndDemo({ dir, name: "steps", engineLogLevel: LOG_LEVEL, demoLogLevel: LOG_LEVEL });
    workers.push(demo, engine);
    log(`engine ${engine.url}, demo ${demo.url}; healthy after ${((Date.now() - bootStarted) / 1000).toFixed(1)} s; logs in ${dir}`);

    const counts = await countStatements(demo.port);

    // Warm-up: a few executions end to end (isolates, workflow cache, the queue consumer).
    const warmId = `bench-steps-${RUN}-warm`;
    await api(engine.url, "PUT", `/v1/workflows/${warmId}`, definition(warmId, demo.port));
    await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        api(engine.url, "POST", `/v1/workflows/${warmId}/trigger`, { order: { id: `warm-${RUN}-${i}`, total: 1 } }),
      ),
    );
    const warmDeadline = Date.now() + 30_000;
    let warm = [];
    while (Date.now() < warmDeadline) {
      warm = await listAll(engine.url, warmId, "COMPLETED");
      if (warm.length >= 4) break;
      await sleep(250);
    }
    if (warm.length < 4) {
      const failed = await listAll(engine.url, warmId, "FAILED");
      const detail = failed[0]
        ? JSON.stringify(await api(engine.url, "GET", `/v1/executions/${failed[0].executionId}`)).slice(0, 1500)
        : "none failed; still running";
      throw new Error(`warm-up executions did not complete (${warm.length}/4): ${detail}`);
    }

    const rounds = [];
    if (SERIAL > 0) {
      log(`round: ${SERIAL} executions one at a time`);
      rounds.push(await serialRound({ engine, demo, count: SERIAL }));
    }
    for (const concurrency of CONCURRENCIES) {
      log(`round: ${N} triggers at concurrency ${concurrency}`);
      const r = await round({ engine, demo, concurrency });
      log(
        `  ${r.completed} completed, ${r.failed} failed, ${r.stillRunning ? "SOME STILL RUNNING at the cap" : "none running"}; ` +
          `${fmt.ratio(r.executionsPerSecond)} executions/s`,
      );
      rounds.push(r);
    }

    // Checks, after the clock stopped: traces on the happy path, and the destination's effects.
    const traceDeadline = Date.now() + 40_000;
    for (const r of rounds) r.traces = await checkTraces(engine, r.executionIds, traceDeadline);
    const charges = (await (await fetch(`${demo.url}/payments/charges`)).json()).items;
    for (const r of rounds) {
      const mine = charges.filter((c) => typeof c.order === "string" && c.order.startsWith(r.orderPrefix));
      r.charges = mine.length;
      r.distinctChargeOrders = new Set(mine.map((c) => c.order)).size;
    }

    const table = format(rounds, counts);
    console.log(`\n## Steps (entry → Gateway → TRANSFORM)\n\n${table}\n`);
    console.log(
      `D1 statements (counted from the engine's ledger operations, not measured on the wire): ` +
        `Gateway step ${counts.gateway.statements} in ${counts.gateway.roundTrips} round trips (claim batch ${counts.claimBatch} ` +
        `+ persist key ${counts.persistKey} + settle batch ${counts.gatewaySettle}); ` +
        `TRANSFORM step ${counts.transform.statements} in ${counts.transform.roundTrips} (claim batch ${counts.claimBatch} + ` +
        `settle batch ${counts.transformSettle}); ` +
        `ingress start batch ${counts.ingressStart}; per execution ${counts.perExecution.statements} statements in ` +
        `${counts.perExecution.roundTrips} round trips.`,
    );
    for (const r of rounds) {
      console.log(
        `c=${r.concurrency}: ` +
          (r.triggerStatuses
            ? `triggers ${JSON.stringify(r.triggerStatuses)} (p50 ${fmt.ms(r.triggerP50)} ms, p99 ${fmt.ms(r.triggerP99)} ms, ` +
              `errors ${r.triggerErrors}); `
            : "") +
          `traces checked ${r.traces.checked}, off the happy path ${r.traces.offHappyPath}; step created→finished p50: charge ` +
          `${fmt.ms(r.traces.chargeP50)} ms, done ${fmt.ms(r.traces.doneP50)} ms; ` +
          `destination charges ${r.charges} for ${r.distinctChargeOrders} distinct orders` +
          (r.traces.offHappyPath ? `\n  off-path sample: ${JSON.stringify(r.traces.offSample)}` : "") +
          (r.stall ? `\n  STALLED at the cap: ${JSON.stringify(r.stall)}` : ""),
      );
    }
    // What the engine logged off the happy path (re-sends, crashes, fenced-out writes, failures).
    await stopAll();
    const engineLog = await readFile(engine.logFile, "utf8").catch(() => "");
    const notable = engineLog
      .split("\n")
      .filter((l) => /reaper re-dispatched|crashed|fenced out|step failed|send failed|poison|dead-lettered/.test(l));
    console.log(
      `engine log: ${notable.length} notable line(s)${notable.length ? `, e.g. ${notable.slice(0, 3).join(" | ").slice(0, 600)}` : ""}`,
    );
    const after = machine().loadAverage1m;
    console.log(`load average: ${info.loadAverage1m} before, ${after} after`);

    await mkdir(join(ROOT, "bench", "results"), { recursive: true });
    const file = join(ROOT, "bench", "results", "steps-latest.json");
    await writeFile(
      file,
      JSON.stringify(
        {
          machine: info,
          loadAverageAfter1m: after,
          notableEngineLogLines: notable.length,
          at: new Date().toISOString(),
          n: N,
          capMs: CAP_MS,
          counts,
          rounds: rounds.map(({ executionIds: _ids, ...r }) => r),
        },
        null,
        2,
      ),
    );
    console.log(`raw figures: ${file}`);
    const bad = rounds.some((r) => r.completed !== r.n || r.traces.offHappyPath > 0 || r.charges !== r.completed);
    if (bad) {
      // Stop, keep the logs (not the state) for a look.
      keepDir(["engine-state", "demo-state"]);
      log("a check failed");
      return 2;
    }
    return 0;
  } catch (error) {
    for (const w of workers) log(`  ${w.name} log: ${w.logFile}`);
    throw error;
  }
}

await runBench({ name: "steps", hardStopMs: HARD_STOP_MS }, main);
