// `npm run bench:map [-- --items=1000 --concurrency=10,50 --small=100 --small-items=10]`: a MAP's
// throughput under `wrangler dev` (docs/steps.md "MAP", docs/benchmarks.md).
//
// Starts the engine and the demo destinations (bench/lib/bench-run.mjs: fresh state, migrated, the
// engine's allowlist pointed at the demo). The workflow: ENTRY_POINT → refund (a MAP over the
// order's lines, each line a Gateway call to the demo's POST /refunds/lines keyed
// `refund-<order>-<sku>`) → summary (a TRANSFORM). Measured, on the engine's own clock (the
// execution's createdAt → finishedAt):
//   1. one execution of `--items` lines at each `--concurrency`: items/s;
//   2. `--small` executions of `--small-items` lines at concurrency 10, triggered 16 at a time:
//      items/s over the whole set (first created → last finished).
// Then the demo's record (GET /refunds/calls?order=): every key `created` exactly once — the
// figures are only worth printing if no item was refunded twice.
// Local limits: miniflare's queue keeps one batch of 10 in flight, so concurrency 10 and 50 look
// alike here (docs/benchmarks.md states the production arithmetic).
import { setTimeout as sleep } from "node:timers/promises";
import { api, HEADERS } from "./lib/api.mjs";
import { runLoad } from "./lib/load.mjs";
import { machine, markdownTable } from "./lib/report.mjs";
import { flag, runBench, startEngineAndDemo } from "./lib/bench-run.mjs";

const RUN = Date.now().toString(36);
const ITEMS = Number(flag("items", 1000));
const CONCURRENCIES = flag("concurrency", "10,50").split(",").map(Number);
const SMALL = Number(flag("small", 100));
const SMALL_ITEMS = Number(flag("small-items", 10));
const HARD_STOP_MS = Number(flag("hard-stop", 900_000));
const CRON_EVERY_MS = Number(flag("cron-every", 60_000));

function definition(id, demoUrl, concurrency, maxItems) {
  return {
    id,
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      {
        id: "refund",
        type: "MAP",
        config: {
          items: "= payload.order.lines",
          as: "line",
          concurrency,
          maxItems,
          maxCollectBytes: 256,
          step: {
            type: "GATEWAY",
            config: {
              method: "POST",
              url: `${demoUrl}/refunds/lines`,
              headers: {
                "Idempotency-Key": "= 'refund-' & payload.order.id & '-' & line.sku",
                Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}",
              },
              body: "= { 'order': payload.order.id, 'sku': line.sku, 'amount': line.amount }",
              retry: { maxAttempts: 5, backoff: "exponential", initialDelayMs: 500 },
            },
          },
        },
      },
      { id: "summary", type: "TRANSFORM", config: { output: { refunded: "= $count(steps.refund)" } } },
    ],
    edges: [
      { from: "received", to: "refund" },
      { from: "refund", to: "summary" },
    ],
  };
}

const order = (id, n) => ({ order: { id, lines: Array.from({ length: n }, (_, i) => ({ sku: `S${i}`, amount: 1 + (i % 50) })) } });

/**
 * Poll until COMPLETED, ticking the engine's cron every `CRON_EVERY_MS` as production's runs every
 * minute: `wrangler dev` never fires it, and under load the local queue loses an invocation's
 * messages now and then; the reaper re-sends their items (docs/steps.md "MAP", recovery).
 */
async function waitFinished(url, executionId, deadline) {
  let lastTick = Date.now();
  while (Date.now() < deadline) {
    const trace = await api(url, "GET", `/v1/executions/${executionId}`);
    if (trace.status === "COMPLETED") return trace;
    if (trace.status !== "RUNNING") throw new Error(`execution ${executionId} ended ${trace.status}`);
    if (Date.now() - lastTick >= CRON_EVERY_MS) {
      lastTick = Date.now();
      await fetch(`${url}/cdn-cgi/local/scheduled`).catch(() => undefined);
    }
    await sleep(500);
  }
  throw new Error(`execution ${executionId} did not finish in time`);
}

/** Every key of the order refunded exactly once at the demo (its record of every call). */
async function refundedOnce(demoUrl, orderId, lines) {
  const res = await fetch(`${demoUrl}/refunds/calls?order=${encodeURIComponent(orderId)}`);
  const { items } = await res.json();
  const created = new Map();
  for (const call of items) if (call.outcome === "created") created.set(call.idempotencyKey, (created.get(call.idempotencyKey) ?? 0) + 1);
  const doubles = [...created.values()].filter((n) => n > 1).length;
  return { keys: created.size, doubles, ok: created.size === lines && doubles === 0 };
}

await runBench({ name: "map", hardStopMs: HARD_STOP_MS }, async ({ dir, info, log, keepDir }) => {
  const { engine, demo } = await startEngineAndDemo({ dir, name: "map" });
  const rows = [];
  const checks = [];
  for (const concurrency of CONCURRENCIES) {
    const workflowId = `bench-map-${RUN}-c${concurrency}`;
    await api(engine.url, "PUT", `/v1/workflows/${workflowId}`, definition(workflowId, demo.url, concurrency, Math.max(ITEMS, 10)));
    const orderId = `B-${RUN}-c${concurrency}`;
    log(`one execution of ${ITEMS} items at concurrency ${concurrency}…`);
    const { executionId } = await api(engine.url, "POST", `/v1/workflows/${workflowId}/trigger`, order(orderId, ITEMS));
    const trace = await waitFinished(engine.url, executionId, Date.now() + HARD_STOP_MS / 2);
    const seconds = (Date.parse(trace.finishedAt) - Date.parse(trace.createdAt)) / 1000;
    rows.push([`1 execution × ${ITEMS} items, concurrency ${concurrency}`, (ITEMS / seconds).toFixed(1), seconds.toFixed(1)]);
    checks.push({ what: orderId, ...(await refundedOnce(demo.url, orderId, ITEMS)) });
  }

  const smallId = `bench-map-${RUN}-small`;
  await api(engine.url, "PUT", `/v1/workflows/${smallId}`, definition(smallId, demo.url, 10, SMALL_ITEMS));
  log(`${SMALL} executions of ${SMALL_ITEMS} items…`);
  const load = await runLoad({
    concurrency: 16,
    maxRequests: SMALL,
    keepResults: true,
    request: (i) => ({
      url: `${engine.url}/v1/workflows/${smallId}/trigger`,
      init: { method: "POST", headers: HEADERS, body: JSON.stringify(order(`B-${RUN}-s${i}`, SMALL_ITEMS)) },
    }),
  });
  const ids = load.results.filter((r) => r.status === 202).map((r) => r.body.executionId);
  const created = [];
  const finished = [];
  const deadline = Date.now() + HARD_STOP_MS / 2;
  for (const id of ids) {
    const trace = await waitFinished(engine.url, id, deadline);
    created.push(Date.parse(trace.createdAt));
    finished.push(Date.parse(trace.finishedAt));
  }
  const span = (Math.max(...finished) - Math.min(...created)) / 1000;
  rows.push([
    `${ids.length} executions × ${SMALL_ITEMS} items, concurrency 10`,
    ((ids.length * SMALL_ITEMS) / span).toFixed(1),
    span.toFixed(1),
  ]);
  checks.push({ what: `B-${RUN}-s0`, ...(await refundedOnce(demo.url, `B-${RUN}-s0`, SMALL_ITEMS)) });

  const after = machine().loadAverage1m;
  console.log(
    [
      `bench:map — ${new Date().toISOString()}, ${info.cpus} × ${info.cpuModel}, ` +
        `load average ${info.loadAverage1m} before / ${after} after`,
      "",
      markdownTable(["run", "items/s", "seconds (created → finished)"], rows),
      "",
      `demo record: ${checks.map((c) => `${c.what}: ${c.keys} keys, ${c.doubles} refunded twice`).join("; ")}`,
    ].join("\n"),
  );
  if (checks.some((c) => !c.ok)) {
    keepDir(["engine-state", "demo-state"]);
    return 2;
  }
  return 0;
});
