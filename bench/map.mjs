// `npm run bench:map [-- --items=1000 --concurrency=10,50 --small=100 --small-items=10 --systems=idemflow,workflows]`:
// a MAP's throughput under `wrangler dev`, side by side with Cloudflare Workflows on the same runtime
// (docs/steps.md "MAP", docs/benchmarks.md).
//
// Starts, from snapshots (bundled once, so edits to the tree during the run reload nothing):
//   - the demo destinations (demo/wrangler.toml), the destination of both systems: POST /refunds/lines,
//     which records every call per key;
//   - the engine: src/index.ts behind bench/compare/engine-counting.ts (counts D1 statements, round
//     trips and step-queue messages; the driver's reads are not counted);
//   - the Workflows twin (bench/compare/map-wrangler.toml, map-worker.ts): the same refunds as
//     `step.do` per line, in batches of `concurrency` under Promise.all, the same key by hand.
// The idemflow workflow: ENTRY_POINT → refund (a MAP over the order's lines, each line a Gateway call
// to POST /refunds/lines keyed `refund-<order>-<sku>`) → summary (a TRANSFORM).
// Measured, from the driver's send of the trigger to the system's own completion stamp (idemflow:
// the execution's finishedAt; Workflows: the instance output's Date.now() after its last step):
//   1. one execution of `--items` lines at each `--concurrency`: items/s (the systems alternate);
//   2. `--small` executions of `--small-items` lines at concurrency 10, `--small-in-flight` (16) at a
//      time in a closed loop (one finishes, the next is triggered): items/s over the whole set (first
//      trigger sent → last finished). A closed loop for both: 100 Workflows instances started at once
//      send 1,000 calls at once, which the local demo drops ("Network connection lost", steps timed out).
// For idemflow, per item: D1 statements, round trips and queue messages, everything the engine did
// for the scenario (the triggers and cron ticks included) ÷ its items.
// Then the demo's record (GET /refunds/calls?order=) for every order: each key `created` exactly
// once — the figures are only worth printing if no item was refunded twice, on either system.
// Local limits: miniflare's queue keeps one batch of 10 in flight, so concurrency 10 and 50 look
// alike for idemflow here (docs/benchmarks.md states the production arithmetic).
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { api } from "./lib/api.mjs";
import { machine, markdownTable } from "./lib/report.mjs";
import { snapshotConfig } from "./lib/snapshot.mjs";
import { flag, runBench, startEngineAndDemo } from "./lib/bench-run.mjs";
import { DEMO_CONFIG, ROOT, startWorker, waitForHealth } from "../scripts/lib/wrangler-dev.mjs";

const RUN = Date.now().toString(36);
const ITEMS = Number(flag("items", 1000));
const CONCURRENCIES = flag("concurrency", "10,50").split(",").filter(Boolean).map(Number);
const SMALL = Number(flag("small", 100));
const SMALL_ITEMS = Number(flag("small-items", 10));
/** Executions in flight at once in the many-small scenario (a closed loop: one finishes, the next is triggered). */
const SMALL_IN_FLIGHT = Number(flag("small-in-flight", 16));
/** Each in-flight execution's status poll in that scenario (both systems alike). */
const SMALL_POLL_MS = 500;
const SYSTEMS = flag("systems", "idemflow,workflows").split(",");
const HARD_STOP_MS = Number(flag("hard-stop", 3_600_000));
const CRON_EVERY_MS = Number(flag("cron-every", 60_000));
/** One scenario may take this long before the bench gives up on it. */
const SCENARIO_MS = Number(flag("scenario-timeout", 1_200_000));

process.env.X_LOCAL_OBSERVABILITY ??= "false";

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

const lines = (n) => Array.from({ length: n }, (_, i) => ({ sku: `S${i}`, amount: 1 + (i % 50) }));
const order = (id, n) => ({ order: { id, lines: lines(n) } });

/** The engine side: PUT the workflow, trigger, wait, and read the counters. */
function idemflow(engine, demo) {
  const tick = () => fetch(`${engine.url}/cdn-cgi/local/scheduled?cron=*+*+*+*+*`).catch(() => undefined);
  /**
   * Poll until COMPLETED, ticking the engine's cron every `CRON_EVERY_MS` as production's runs every
   * minute: `wrangler dev` never fires it, and under load the local queue loses an invocation's
   * messages now and then; the reaper re-sends their items (docs/steps.md "MAP", recovery).
   */
  async function waitFinished(executionId, deadline, pollMs = 250) {
    let lastTick = Date.now();
    while (Date.now() < deadline) {
      const trace = await api(engine.url, "GET", `/v1/executions/${executionId}`);
      if (trace.status === "COMPLETED") return trace;
      if (trace.status !== "RUNNING") throw new Error(`execution ${executionId} ended ${trace.status}`);
      if (Date.now() - lastTick >= CRON_EVERY_MS) {
        lastTick = Date.now();
        await tick();
      }
      await sleep(pollMs);
    }
    throw new Error(`execution ${executionId} did not finish in time`);
  }
  const counters = async () => (await fetch(`${engine.url}/__bench/d1`)).json();
  const reset = () => fetch(`${engine.url}/__bench/d1/reset`, { method: "POST" });
  const perItem = (d1, items) => ({
    statements: d1.statements / items,
    roundTrips: d1.roundTrips / items,
    queueMessages: d1.queueMessages / items,
  });
  return {
    name: "idemflow",
    async one(concurrency, orderId, items) {
      const workflowId = `bench-map-${RUN}-c${concurrency}`;
      await api(engine.url, "PUT", `/v1/workflows/${workflowId}`, definition(workflowId, demo.url, concurrency, Math.max(items, 10)));
      await reset();
      const sentAt = Date.now();
      const { executionId } = await api(engine.url, "POST", `/v1/workflows/${workflowId}/trigger`, order(orderId, items));
      const trace = await waitFinished(executionId, Date.now() + SCENARIO_MS);
      const d1 = await counters();
      return { seconds: (Date.parse(trace.finishedAt) - sentAt) / 1000, cost: perItem(d1, items) };
    },
    async many(prefix, count, items) {
      const workflowId = `bench-map-${RUN}-small`;
      await api(engine.url, "PUT", `/v1/workflows/${workflowId}`, definition(workflowId, demo.url, 10, items));
      await reset();
      const deadline = Date.now() + SCENARIO_MS;
      const span = await closedLoop(count, async (i) => {
        const { executionId } = await api(engine.url, "POST", `/v1/workflows/${workflowId}/trigger`, order(`${prefix}${i}`, items));
        return Date.parse((await waitFinished(executionId, deadline, SMALL_POLL_MS)).finishedAt);
      });
      const d1 = await counters();
      return { seconds: span, cost: perItem(d1, count * items) };
    },
  };
}

/** The Workflows twin: create instances, poll their status. */
function workflows(twin) {
  const post = async (path, body) => {
    const res = await fetch(`${twin.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const json = await res.json();
    if (!res.ok) throw new Error(`Workflows twin ${path} answered ${res.status}: ${JSON.stringify(json).slice(0, 300)}`);
    return json;
  };
  /** Until every id is complete; the latest completion stamp. An errored instance fails the scenario. */
  async function waitAll(ids, deadline, pollMs = 250) {
    const pending = new Set(ids);
    let last = 0;
    while (pending.size > 0 && Date.now() < deadline) {
      for (let i = 0; i < ids.length; i += 50) {
        const chunk = ids.slice(i, i + 50).filter((id) => pending.has(id));
        if (chunk.length === 0) continue;
        const { items } = await post("/instances/status", { ids: chunk });
        for (const item of items) {
          if (item.status === "complete") {
            pending.delete(item.id);
            last = Math.max(last, item.output?.completedAt ?? 0);
          } else if (item.status === "errored" || item.status === "terminated") {
            throw new Error(`Workflows instance ${item.id} ${item.status}: ${item.error}`);
          }
        }
      }
      if (pending.size > 0) await sleep(pollMs);
    }
    if (pending.size > 0) throw new Error(`Workflows: ${pending.size} instances did not finish in time`);
    return last;
  }
  return {
    name: "Workflows",
    async one(concurrency, orderId, items) {
      const sentAt = Date.now();
      await post("/instances", { id: orderId, params: { ...order(orderId, items), concurrency } });
      const last = await waitAll([orderId], Date.now() + SCENARIO_MS);
      return { seconds: (last - sentAt) / 1000 };
    },
    async many(prefix, count, items) {
      const deadline = Date.now() + SCENARIO_MS;
      const span = await closedLoop(count, async (i) => {
        const id = `${prefix}${i}`;
        await post("/instances", { id, params: { ...order(id, items), concurrency: 10 } });
        return waitAll([id], deadline, SMALL_POLL_MS);
      });
      return { seconds: span };
    },
  };
}

/**
 * `count` executions, at most `SMALL_IN_FLIGHT` at once: `runOne(i)` starts execution i and resolves to
 * its completion stamp once it finished. Resolves to the seconds from the first start to the last stamp.
 */
async function closedLoop(count, runOne) {
  const startedAt = Date.now();
  let next = 0;
  let last = 0;
  const worker = async () => {
    while (next < count) last = Math.max(last, await runOne(next++));
  };
  await Promise.all(Array.from({ length: Math.min(SMALL_IN_FLIGHT, count) }, worker));
  return (last - startedAt) / 1000;
}

/** Every key of the order refunded exactly once at the demo (its record of every call). */
async function refundedOnce(demoUrl, orderId, expected) {
  const res = await fetch(`${demoUrl}/refunds/calls?order=${encodeURIComponent(orderId)}`);
  const { items } = await res.json();
  const created = new Map();
  for (const call of items) if (call.outcome === "created") created.set(call.idempotencyKey, (created.get(call.idempotencyKey) ?? 0) + 1);
  const conflicts = items.filter((call) => call.outcome === "conflict").length;
  const doubles = [...created.values()].filter((n) => n > 1).length;
  return { keys: created.size, calls: items.length, doubles, conflicts, ok: created.size === expected && doubles === 0 && conflicts === 0 };
}

const f1 = (n) => (Number.isFinite(n) ? n.toFixed(1) : "–");
/** A scenario's log line tail: idemflow's cost per item when counted, and the machine's load. */
const costLine = (r) =>
  (r.cost
    ? `, per item ${f1(r.cost.statements)} statements / ${f2(r.cost.roundTrips)} round trips / ${f2(r.cost.queueMessages)} queue messages`
    : "") + `, load ${machine().loadAverage1m}`;
const f2 = (n) => (Number.isFinite(n) ? n.toFixed(2) : "–");

await runBench({ name: "map", hardStopMs: HARD_STOP_MS }, async ({ dir, info, log, keepDir }) => {
  log("bundling snapshots (engine with its counters, demo, Workflows twin)…");
  const logs = join(dir, "logs");
  const [engineConfig, demoConfig, twinConfig] = await Promise.all([
    snapshotConfig({
      dir,
      logFile: join(dir, "engine-build.log"),
      name: "engine",
      config: join(ROOT, "wrangler.toml"),
      main: join(ROOT, "bench", "compare", "engine-counting.ts"),
    }),
    snapshotConfig({ dir, logFile: join(dir, "demo-build.log"), name: "demo", config: DEMO_CONFIG }),
    snapshotConfig({
      dir,
      logFile: join(dir, "workflows-build.log"),
      name: "workflows",
      config: join(ROOT, "bench", "compare", "map-wrangler.toml"),
    }),
  ]);
  const { engine, demo } = await startEngineAndDemo({ dir, name: "map", engineConfig, demoConfig, logsDir: logs });
  const twin = await startWorker({
    name: "workflows",
    config: twinConfig,
    persistTo: join(dir, "workflows-state"),
    vars: { REFUNDS_URL: demo.url, PAYMENTS_KEY: "sk_bench_map_local" },
    logLevel: "warn",
    logFile: join(logs, "workflows.log"),
  });
  await waitForHealth(twin);
  const systems = [idemflow(engine, demo), workflows(twin)].filter((s) => SYSTEMS.includes(s.name.toLowerCase()));

  const results = [];
  const checks = [];
  let turn = 0;
  // The systems alternate who goes first, scenario by scenario (drift of the machine's load).
  const inTurn = () => (turn++ % 2 === 0 ? systems : [...systems].reverse());
  for (const concurrency of CONCURRENCIES) {
    const row = { run: `1 execution × ${ITEMS} items, concurrency ${concurrency}`, items: ITEMS };
    for (const system of inTurn()) {
      const orderId = `${system.name === "idemflow" ? "if" : "wf"}-${RUN}-c${concurrency}`;
      log(`${system.name}: one execution of ${ITEMS} items at concurrency ${concurrency}…`);
      row[system.name] = await system.one(concurrency, orderId, ITEMS);
      log(`  ${f1(ITEMS / row[system.name].seconds)} items/s (${f1(row[system.name].seconds)} s)${costLine(row[system.name])}`);
      checks.push({ what: `${system.name} ${orderId}`, ...(await refundedOnce(demo.url, orderId, ITEMS)) });
    }
    results.push(row);
  }
  if (SMALL > 0) {
    const row = {
      run: `${SMALL} executions × ${SMALL_ITEMS} items, concurrency 10, ${SMALL_IN_FLIGHT} executions in flight`,
      items: SMALL * SMALL_ITEMS,
    };
    for (const system of inTurn()) {
      const prefix = `${system.name === "idemflow" ? "if" : "wf"}-${RUN}-s`;
      log(`${system.name}: ${SMALL} executions of ${SMALL_ITEMS} items…`);
      row[system.name] = await system.many(prefix, SMALL, SMALL_ITEMS);
      log(`  ${f1(row.items / row[system.name].seconds)} items/s (${f1(row[system.name].seconds)} s)${costLine(row[system.name])}`);
      for (const i of [0, SMALL - 1])
        checks.push({ what: `${system.name} ${prefix}${i}`, ...(await refundedOnce(demo.url, `${prefix}${i}`, SMALL_ITEMS)) });
    }
    results.push(row);
  }

  const after = machine().loadAverage1m;
  const rate = (r, name) => (r[name] ? r.items / r[name].seconds : NaN);
  const table = markdownTable(
    [
      "run",
      "idemflow items/s",
      "Workflows items/s",
      "idemflow ÷ Workflows",
      "idemflow per item: statements / round trips / queue messages",
    ],
    results.map((r) => [
      r.run,
      f1(rate(r, "idemflow")),
      f1(rate(r, "Workflows")),
      `${f2(rate(r, "idemflow") / rate(r, "Workflows"))}×`,
      r.idemflow ? `${f1(r.idemflow.cost.statements)} / ${f2(r.idemflow.cost.roundTrips)} / ${f2(r.idemflow.cost.queueMessages)}` : "–",
    ]),
  );
  console.log(
    [
      `bench:map — ${new Date().toISOString()}, ${info.cpus} × ${info.cpuModel}, ` +
        `load average ${info.loadAverage1m} before / ${after} after`,
      "",
      table,
      "",
      `seconds (trigger sent → the system's completion stamp): ${results
        .map((r) => `${r.run}: ${systems.map((s) => `${s.name} ${f1(r[s.name]?.seconds)}`).join(", ")}`)
        .join("; ")}`,
      "",
      `demo record: ${checks
        .map((c) => `${c.what}: ${c.keys} keys, ${c.calls} calls, ${c.doubles} refunded twice, ${c.conflicts} conflicts`)
        .join("; ")}`,
    ].join("\n"),
  );
  if (checks.some((c) => !c.ok)) {
    keepDir(["engine-state", "demo-state", "workflows-state"]);
    return 2;
  }
  return 0;
});
