// `npm run bench:flow [-- --n=500 --inject=60]`: a connector's limits under `wrangler dev` (SPEC
// section 17, docs/connectors.md "Limits"), measured on the destination's own record.
//
// Starts the engine and the demo destinations (bench/lib/bench-run.mjs). The demo's /limited API
// answers 429 with Retry-After past 25 calls a second; the connector `bench-limited` in front of it
// allows 5 in flight and 20 a second (burst 20). Then:
//   1. N executions fired at once (16 triggers in flight), waited for; the destination's record
//      (GET /limited/record) gives the most calls in flight, the calls per second, the 429s, the
//      effects per order; a sample of traces gives the attempts per execution (1: waiting is not an
//      attempt) and GET /v1/connectors/bench-limited/state the sends held back.
//   2. One injected 429 with `Retry-After: 3`, then `--inject` more executions: the record must show
//      no call to the scope for 3 s after it (the shared pause).
// Prints a markdown table and exits 2 when a check fails (the Workers' logs kept).
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DEMO_CONFIG, ROOT } from "../scripts/lib/wrangler-dev.mjs";
import { flag, runBench, startEngineAndDemo } from "./lib/bench-run.mjs";
import { snapshotConfig } from "./lib/snapshot.mjs";
import { api } from "./lib/api.mjs";
import { fmt, markdownTable } from "./lib/report.mjs";

const N = Number(flag("n", 500));
const INJECT = Number(flag("inject", 60));
const CONCURRENCY = 5;
/** The connector's rate (default 20/s, the issue's); locally keep it under the local queue's ceiling (see docs/benchmarks.md). */
const RATE = Number(flag("rate", 20));

/** The destination's own limit: a quarter above the connector's. */
const DEST_RATE = Math.ceil(RATE * 1.25);
/**
 * The bucket's size: by default what keeps rate + burst — the most a token bucket lets through in
 * one second — within the destination's own limit (the 20/s with a burst of 20 would pass 40
 * in the first second, past the destination's 25).
 */
const BURST = Number(flag("burst", Math.max(1, DEST_RATE - RATE)));
const RETRY_AFTER_S = 3;

const RUN = Date.now().toString(36);
const CONNECTOR = "bench-limited";
const WORKFLOW = `bench-flow-${RUN}`;
/** A trigger of this no-op workflow every half second while the bench waits: see `settle`. */
const NUDGE = `bench-flow-nudge-${RUN}`;
const nudgeWorkflow = {
  id: NUDGE,
  vertices: [
    { id: "received", type: "ENTRY_POINT", config: {} },
    { id: "noop", type: "TRANSFORM", config: { output: { ok: true } } },
  ],
  edges: [{ from: "received", to: "noop" }],
};

const connector = (demoUrl) => ({
  name: CONNECTOR,
  baseUrl: `${demoUrl}/limited`,
  headers: { "Content-Type": "application/json" },
  key: { profile: "stripe", rule: { fields: ["order"], format: "plain" } },
  retry: { maxAttempts: 5, backoff: "exponential", initialDelayMs: 1000, maxDelayMs: 10_000 },
  limits: { concurrency: CONCURRENCY, rate: `${RATE}/s`, burst: BURST },
});

const workflow = {
  id: WORKFLOW,
  vertices: [
    { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order.id" } },
    {
      id: "charge",
      type: "GATEWAY",
      config: {
        connector: CONNECTOR,
        operation: "charge",
        method: "POST",
        path: "/charges",
        keyFields: { order: "= payload.order.id" },
        body: "= { 'order': payload.order.id, 'amount': 5 }",
      },
    },
  ],
  edges: [{ from: "received", to: "charge" }],
};

async function demoCall(demoUrl, method, path, body) {
  const res = await fetch(`${demoUrl}${path}`, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return res.status === 204 ? null : res.json();
}

/** Fire `ids` as triggers, at most 16 in flight. */
async function fire(engineUrl, ids) {
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < ids.length) {
        const id = ids[next++];
        await api(engineUrl, "POST", `/v1/workflows/${WORKFLOW}/trigger`, { order: { id } });
      }
    }),
  );
}

/**
 * Wait until no execution of the workflow is RUNNING (bounded). Meanwhile a no-op execution every
 * half second: wrangler dev's local queue was seen delivering a delayed message only once another
 * message was sent after its delay passed (200 waiters sat parked with their wake-ups due, until one
 * more trigger), so the bench keeps the queue moving as production's queue does by itself.
 */
async function settle(engineUrl, capMs) {
  const deadline = Date.now() + capMs;
  let nudges = 0;
  while (Date.now() < deadline) {
    const running = await api(engineUrl, "GET", `/v1/executions?workflowId=${WORKFLOW}&status=RUNNING&limit=1`);
    if (running.items.length === 0) return true;
    await api(engineUrl, "POST", `/v1/workflows/${NUDGE}/test-runs`, { nudge: ++nudges });
    await sleep(500);
  }
  return false;
}

/** The most calls that started within any one second (sliding), from the record's start times. */
function maxPerSecond(starts) {
  const sorted = [...starts].sort((a, b) => a - b);
  let best = 0;
  let lo = 0;
  for (let hi = 0; hi < sorted.length; hi++) {
    while (sorted[hi] - sorted[lo] >= 1000) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

await runBench({ name: "flow", hardStopMs: 900_000 }, async ({ dir, info, log, keepDir }) => {
  // Snapshots (bench/lib/snapshot.mjs): an edit of the shared tree during the run cannot reload a
  // Worker — the demo's record is in memory, and a reload would reset it mid-measurement.
  const logs = join(dir, "logs");
  await mkdir(logs, { recursive: true });
  log("bundling snapshots of the engine and the demo destinations…");
  const [engineConfig, demoConfig] = await Promise.all([
    snapshotConfig({ dir, logFile: join(logs, "engine-build.log"), name: "engine", config: join(ROOT, "wrangler.toml") }),
    snapshotConfig({ dir, logFile: join(logs, "demo-build.log"), name: "demo", config: DEMO_CONFIG }),
  ]);
  const { engine, demo } = await startEngineAndDemo({ dir, name: "flow", engineConfig, demoConfig });
  await api(engine.url, "PUT", `/v1/workflows/${NUDGE}`, nudgeWorkflow);
  await api(engine.url, "PUT", `/v1/connectors/${CONNECTOR}`, connector(demo.url));
  await api(engine.url, "PUT", `/v1/workflows/${WORKFLOW}`, workflow);
  await demoCall(demo.url, "POST", "/limited/config", { rate: DEST_RATE, retryAfterSeconds: RETRY_AFTER_S, delayMs: 20, inject429: 0 });
  await demoCall(demo.url, "DELETE", "/limited/record");

  // 1. N at once.
  log(`phase 1: ${N} executions through ${CONNECTOR} (${CONCURRENCY} in flight, ${RATE}/s, burst ${BURST})`);
  const orders = Array.from({ length: N }, (_, i) => `F-${RUN}-${i}`);
  const started = Date.now();
  await fire(engine.url, orders);
  const settled = await settle(engine.url, 600_000);
  const wallMs = Date.now() - started;
  const record = await demoCall(demo.url, "GET", "/limited/record");
  const state = await api(engine.url, "GET", `/v1/connectors/${CONNECTOR}/state`);
  const starts = record.startedAt;
  const spanS = (Math.max(...starts) - Math.min(...starts)) / 1000;
  const throughput = (starts.length - 1) / spanS;
  // Attempts per execution: a sample of 40 traces.
  const listed = await api(engine.url, "GET", `/v1/executions?workflowId=${WORKFLOW}&limit=40`);
  let attempts = 0;
  let sampled = 0;
  for (const item of listed.items) {
    const trace = await api(engine.url, "GET", `/v1/executions/${item.executionId ?? item.id}`);
    const charge = trace.steps.find((s) => s.vertexId === "charge");
    attempts += charge.attempts.length;
    sampled++;
  }
  const perExecution = attempts / Math.max(1, sampled);

  // 2. One injected 429 with Retry-After: 3, then more executions.
  await demoCall(demo.url, "DELETE", "/limited/record");
  await demoCall(demo.url, "POST", "/limited/config", { inject429: 1 });
  log(`phase 2: one injected 429 (Retry-After: ${RETRY_AFTER_S}), then ${INJECT} executions`);
  await fire(
    engine.url,
    Array.from({ length: INJECT }, (_, i) => `P-${RUN}-${i}`),
  );
  const settled2 = await settle(engine.url, 300_000);
  const record2 = await demoCall(demo.url, "GET", "/limited/record");
  const refusedAt = record2.refusedAt.map((t) => Date.parse(t));
  const first429 = refusedAt.length > 0 ? Math.min(...refusedAt) : null;
  // Calls granted before the pause was written (at most concurrency − 1 in flight beside the 429) still
  // arrive; after them, nothing until the pause ends.
  const later = first429 === null ? [] : record2.startedAt.filter((t) => t > first429).sort((a, b) => a - b);
  const inFlightThen = later.filter((t, i) => i < CONCURRENCY - 1 && t < first429 + 1000);
  const during = later.slice(inFlightThen.length).filter((t) => t < first429 + RETRY_AFTER_S * 1000);
  const after = later.length > inFlightThen.length ? later[inFlightThen.length] - first429 : null;

  const checks = [
    ["all settled", settled && settled2],
    [`max in flight ≤ ${CONCURRENCY}`, record.maxInFlight <= CONCURRENCY],
    [`max calls in any second ≤ ${RATE + BURST}`, maxPerSecond(starts) <= RATE + BURST],
    ["no 429 from the destination (phase 1)", record.refused === 0],
    [`one effect per order (${N})`, record.effects === N && record.doubled === 0],
    [`throughput ≥ 90 % of ${RATE}/s`, throughput >= 0.9 * RATE],
    ["attempts per execution = 1", perExecution === 1],
    [`no new send for ${RETRY_AFTER_S} s after the 429`, first429 !== null && during.length === 0],
  ];
  const table = markdownTable(
    ["figure", "value"],
    [
      ["executions", String(N)],
      ["wall time, trigger to settled", `${fmt.ms(wallMs)} ms`],
      ["destination: most in flight", String(record.maxInFlight)],
      ["destination: most calls in one second (sliding)", String(maxPerSecond(starts))],
      ["destination: calls / 429s", `${record.calls} / ${record.refused}`],
      ["throughput, first to last call", `${throughput.toFixed(1)} calls/s`],
      ["attempts per execution (40 traces)", perExecution.toFixed(2)],
      ["sends held back (GET …/state heldBack)", String(state.heldBack)],
      ["phase 2: calls already granted when the 429 came (≤ concurrency − 1)", String(inFlightThen.length)],
      ["phase 2: the next call after the 429", after === null ? "—" : `${(after / 1000).toFixed(2)} s`],
      ["phase 2: other calls within the pause", String(during.length)],
    ],
  );
  console.log(`\nbench:flow — ${new Date().toISOString()} — ${info.cpus} × ${info.cpuModel}, load average ${info.loadAverage1m}\n`);
  console.log(table);
  console.log("");
  for (const [name, ok] of checks) console.log(`${ok ? "ok  " : "FAIL"}  ${name}`);
  if (checks.some(([, ok]) => !ok)) {
    keepDir(["engine-state", "demo-state"]);
    return 2;
  }
  return 0;
});
