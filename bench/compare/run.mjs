#!/usr/bin/env node
/**
 * idemflow vs Cloudflare Workflows, side by side on the same local runtime (issue 7).
 *
 *   npm run bench:compare            (about 3-4 minutes; BENCH_QUICK=1 for a smoke run)
 *
 * Starts, on free loopback ports and fresh temporary --persist-to directories:
 *   - the demo destinations (demo/wrangler.toml): POST /payments/charges behind the ledger;
 *   - the idemflow engine: the repo's wrangler.toml with `main` pointed at
 *     bench/compare/engine-counting.ts (src/index.ts plus a D1 statement counter);
 *   - the Workflows twin (bench/compare/wrangler.toml): the same 3-step job as a WorkflowEntrypoint.
 * Then measures, alternating the two systems scenario by scenario (ABBA, to cancel drift), and
 * prints one table. Everything it starts is stopped at the end (process groups), also on Ctrl-C.
 */
import { createHash, randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync, mkdirSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DEMO_CONFIG, ROOT, applyMigrations, startWorker, stopAll, waitForHealth } from "../../scripts/lib/wrangler-dev.mjs";
import { LOCAL_TOKENS } from "../../scripts/lib/local-tokens.mjs";
import { snapshotConfig } from "../lib/snapshot.mjs";
import { migrateShards } from "../../scripts/lib/shards.mjs";
import { percentile, runLoad, shuffle } from "../lib/load.mjs";
import { startProfile, summarizeProfile } from "../lib/profile.mjs";
import { treeCpuMs } from "../lib/cpu.mjs";
import { pinSystem } from "../lib/pin.mjs";

const HERE = import.meta.dirname;
const QUICK = process.env.BENCH_QUICK === "1";
/** Triggers per scenario and system. */
const TRIGGERS = Number(process.env.BENCH_TRIGGERS ?? (QUICK ? 64 : 192));
const CONCURRENCIES = [16, 64];
const DUPLICATE_ROUNDS = QUICK ? 2 : 5;
const LATENCY_RUNS = QUICK ? 4 : 10;
const DUPLICATE_SHARES = [0, 0.5];
const COMPLETION_TIMEOUT_MS = QUICK ? 30_000 : 60_000;
/** Completion polling interval. Completion TIMES come from the systems' own clocks, not from polls. */
const POLL_MS = 500;
const TOKEN = "dev-token";
const PAYMENTS_KEY = "sk_bench_local";
const RUN = Date.now().toString(36);
/** BENCH_ONLY=idemflow|Workflows runs one side (development); the published table runs both. */
const ONLY = process.env.BENCH_ONLY;
/**
 * BENCH_PROFILE=c16-d0 (a throughput scenario, "latency", or "dupcost-0" / "dupcost-16384") writes a
 * CPU profile of the engine's isolate for it (development).
 */
const PROFILE = process.env.BENCH_PROFILE;
/**
 * BENCH_PIN=1 runs each scenario with the measured system's Worker alone on CPU 0 and the
 * destination, the driver and the idle other system on the rest (bench/lib/pin.mjs).
 */
const PIN = process.env.BENCH_PIN === "1";
/**
 * BENCH_PHASES=dupcost (a comma-separated subset of warmup, latency, throughput, dupcost,
 * correctness) runs only those phases (development: e.g. a duplicate's profile in a minute).
 */
const PHASES = process.env.BENCH_PHASES?.split(",").map((p) => p.trim());
const phase = (name) => !PHASES || PHASES.includes(name);

const log = (...args) => console.error("[bench:compare]", ...args);

// wrangler dev attaches a local trace collector to every Worker by default (it records each span,
// one per D1 call, into a SQLite store on the same cores). Production has no such in-process
// collector, and it taxes the system with more D1 calls far more than the other: off for all
// three Workers (docs/benchmarks.md). X_LOCAL_OBSERVABILITY=true in the environment keeps it.
process.env.X_LOCAL_OBSERVABILITY ??= "false";

// ---------------------------------------------------------------------------------------------
// Setup

/** The run's temp dir; its Worker state and bundles are removed at exit (results and logs stay). */
let runDir;

async function setup() {
  const tmp = mkdtempSync(join(tmpdir(), "idemflow-compare-"));
  runDir = tmp;
  const logs = join(tmp, "logs");
  mkdirSync(logs);

  log(`temp dir ${tmp}`);
  // Each Worker runs from a snapshot: bundled once now (`wrangler deploy --dry-run --outdir`) and
  // served with no_bundle, so edits to the working tree during a run cannot reload a Worker and
  // reset its isolate mid-measurement. The engine's config is generated from the repo's
  // wrangler.toml so the two never drift: only `main` (the counting entry) changes.
  log("bundling snapshots and applying migrations…");
  const [engineConfig, demoConfig, wfConfig] = await Promise.all([
    snapshot({ tmp, logs, name: "engine", config: join(ROOT, "wrangler.toml"), main: join(HERE, "engine-counting.ts") }),
    snapshot({ tmp, logs, name: "demo", config: DEMO_CONFIG }),
    snapshot({ tmp, logs, name: "workflows", config: join(HERE, "wrangler.toml") }),
  ]);
  await Promise.all([
    migrateShards({
      config: engineConfig,
      persistTo: join(tmp, "engine"),
      logFile: join(logs, "engine-migrate.log"),
    }),
    applyMigrations({
      database: "idemflow-demo",
      config: demoConfig,
      persistTo: join(tmp, "demo"),
      logFile: join(logs, "demo-migrate.log"),
    }),
  ]);

  log("starting demo, engine and Workflows twin…");
  const worker = (name, config, vars = {}) =>
    startWorker({ name, config, persistTo: join(tmp, name), vars, logLevel: "warn", logFile: join(logs, `${name}.log`) });
  // The demo first: the other two are pointed at its (free) port.
  const demo = await worker("demo", demoConfig);
  // CHAIN_STEPS=off (or any CHAIN_* var) in the environment overrides the engine's step chaining
  // configuration (docs/steps.md "Chaining").
  const chain = Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith("CHAIN_")));
  const engine = await worker("engine", engineConfig, {
    ...LOCAL_TOKENS,
    OUTBOUND_ALLOWLIST: `127.0.0.1:${demo.port}`,
    PAYMENTS_KEY,
    ...chain,
  });
  const wf = await worker("workflows", wfConfig, { PAYMENTS_URL: demo.url, PAYMENTS_KEY });
  await Promise.all([demo, engine, wf].map((w) => waitForHealth(w)));
  return {
    tmp,
    logs,
    demo: demo.url,
    demoPort: demo.port,
    engine: engine.url,
    engineInspector: engine.inspectorPort,
    wf: wf.url,
    // Each Worker's process tree (wrangler and its workerd): the CPU row of the table.
    pids: { idemflow: engine.pid, Workflows: wf.pid, destination: demo.pid, driver: process.pid },
  };
}

/** Bundle a Worker once and serve that bundle (bench/lib/snapshot.mjs, shared with every bench). */
const snapshot = ({ tmp, logs, name, config, main }) =>
  snapshotConfig({ dir: tmp, logFile: join(logs, `${name}-build.log`), name, config, main });

// ---------------------------------------------------------------------------------------------
// The two systems behind one interface: trigger requests, completion, destination key.

/** The destination key both systems derive: `$idempotencyKey('charge', order.id)`. */
function chargeKey(orderId) {
  // JCS of a one-string array is plain JSON for the ASCII ids used here.
  const digest = createHash("sha256")
    .update(JSON.stringify([orderId]))
    .digest("base64url");
  return `charge-${digest}`;
}

function makeIdemflow(ctx) {
  const definition = JSON.parse(readFileSync(join(HERE, "order-charge.workflow.json"), "utf8"));
  const auth = { authorization: `Bearer ${TOKEN}` };
  return {
    name: "idemflow",
    /** Each scenario gets its own workflow id, so its executions can be counted apart. */
    async prepare(scenario) {
      const body = structuredClone(definition);
      delete body.$schema;
      body.id = `bench-${scenario}`;
      for (const vertex of body.vertices) {
        if (vertex.type === "GATEWAY") vertex.config.url = vertex.config.url.replace("http://127.0.0.1:8788", ctx.demo);
      }
      const response = await fetch(`${ctx.engine}/v1/workflows/${body.id}`, {
        method: "PUT",
        headers: { ...auth, "content-type": "application/json", "idempotency-key": randomUUID() },
        body: JSON.stringify(body),
      });
      if (!response.ok) throw new Error(`PUT /v1/workflows/${body.id} → ${response.status} ${await response.text()}`);
      await fetch(`${ctx.engine}/__bench/d1/reset`, { method: "POST" });
    },
    trigger(scenario, orderId, extra = {}) {
      return {
        url: `${ctx.engine}/v1/workflows/bench-${scenario}/trigger`,
        init: {
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify({ order: { id: orderId, total: 42 }, ...extra }),
        },
      };
    },
    /** Wait until the scenario's workflow has finished as many executions as were started. */
    async awaitCompletion(scenario, executionIds, deadline, pollMs = POLL_MS) {
      let summary = { completed: 0, failed: 0, lastFinishedAt: 0 };
      while (Date.now() < deadline) {
        const { byStatus } = await (await fetch(`${ctx.engine}/__bench/executions?workflowId=bench-${scenario}`)).json();
        const count = (s) => byStatus.find((r) => r.status === s)?.n ?? 0;
        summary = {
          completed: count("COMPLETED"),
          failed: count("FAILED"),
          lastFinishedAt: Math.max(0, ...byStatus.map((r) => r.last_finished ?? 0)),
          executions: byStatus.reduce((n, r) => n + r.n, 0),
        };
        if (summary.completed + summary.failed >= executionIds.length) break;
        await sleep(pollMs);
      }
      return summary;
    },
    async d1() {
      return (await fetch(`${ctx.engine}/__bench/d1?detail`)).json();
    },
    async crashAfterCall(orderId) {
      await fetch(`${ctx.engine}/__bench/crash-after-call`, {
        method: "POST",
        body: JSON.stringify({ key: chargeKey(orderId), count: 1 }),
      });
      return (order) => this.trigger("crash", order);
    },
    async crashesFired() {
      return (await (await fetch(`${ctx.engine}/__bench/crashes`)).json()).fired;
    },
    async chargeAttempts(executionId) {
      const response = await fetch(`${ctx.engine}/v1/executions/${executionId}`, { headers: auth });
      if (!response.ok) return undefined;
      const trace = await response.json();
      const charge = trace.steps?.find((s) => s.vertexId === "charge");
      log(
        `  idemflow ${executionId.slice(0, 12)}…: charge step ${charge?.state}, attempt ${charge?.attempt}, epoch ` +
          `${charge?.epoch}, events ${JSON.stringify(charge?.events ?? []).slice(0, 300)}`,
      );
      return charge?.attempt;
    },
  };
}

function makeWorkflows(ctx) {
  return {
    name: "Workflows",
    async prepare() {},
    trigger(scenario, orderId, extra = {}) {
      return {
        url: `${ctx.wf}/instances`,
        init: {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ id: `${scenario}-${orderId}`, params: { order: { id: orderId, total: 42 }, ...extra } }),
        },
      };
    },
    async awaitCompletion(scenario, executionIds, deadline, pollMs = POLL_MS) {
      const pending = new Set(executionIds);
      let completed = 0;
      let failed = 0;
      let lastFinishedAt = 0;
      while (pending.size > 0 && Date.now() < deadline) {
        const ids = [...pending].slice(0, 100);
        const result = await (await fetch(`${ctx.wf}/instances/status`, { method: "POST", body: JSON.stringify({ ids }) })).json();
        for (const id of result.complete) pending.delete(id);
        completed += result.complete.length;
        lastFinishedAt = Math.max(lastFinishedAt, result.lastCompletedAt);
        const errored = (result.counts.errored ?? 0) + (result.counts.terminated ?? 0);
        if (errored > 0) {
          // Count errored instances once: drop them from the pending set by asking per id.
          for (const id of ids) {
            const status = await (await fetch(`${ctx.wf}/instances/${encodeURIComponent(id)}`)).json();
            if (status.status === "errored" || status.status === "terminated") {
              pending.delete(id);
              failed++;
            }
          }
        }
        if (pending.size > 0) await sleep(pollMs);
      }
      return { completed, failed, lastFinishedAt, executions: completed + failed + pending.size };
    },
    async crashAfterCall() {
      return (order) => this.trigger("crash", order, { throwAfterCharge: true });
    },
    /** How many times the instance's charge callback ran (the twin counts it in its isolate). */
    async chargeAttempts(instanceId) {
      const response = await fetch(`${ctx.wf}/instances/${encodeURIComponent(instanceId)}`);
      if (!response.ok) return undefined;
      const { chargeCalls, chargeOutcomes } = await response.json();
      log(`  Workflows ${instanceId}: charge step calls: ${chargeOutcomes.join("; ")}`);
      return chargeCalls;
    },
  };
}

async function chargesFor(ctx, orderId) {
  const key = chargeKey(orderId);
  const response = await fetch(`${ctx.demo}/payments/charges?idempotencyKey=${encodeURIComponent(key)}`);
  const { items } = await response.json();
  return items.filter((item) => (item.idempotencyKey ?? item.idempotency_key ?? item.key) === key).length;
}

// ---------------------------------------------------------------------------------------------
// Throughput scenarios

/** Order ids for one scenario: with a duplicate share d, N·(1-d) unique orders, the rest repeats. */
function scenarioOrders(system, scenario, total, duplicateShare, seed) {
  const unique = Math.round(total * (1 - duplicateShare));
  const ids = Array.from({ length: unique }, (_, i) => `${system === "idemflow" ? "if" : "wf"}-${RUN}-${scenario}-${i}`);
  const sends = [...ids];
  for (let i = 0; sends.length < total; i++) sends.push(ids[i % unique]);
  return { unique: ids, sends: shuffle(sends, seed) };
}

/**
 * The process trees of a scenario: the measured system, the other (idle) system, the destination
 * and the driver. The other system is a root of its own, so that its tree is not billed to the
 * driver, its ancestor.
 */
function rootsFor(system, ctx) {
  const other = system.name === "idemflow" ? "Workflows" : "idemflow";
  return { system: ctx.pids[system.name], other: ctx.pids[other], destination: ctx.pids.destination, driver: ctx.pids.driver };
}

async function throughput(system, ctx, { concurrency, duplicateShare, total, seed }) {
  const scenario = `c${concurrency}-d${Math.round(duplicateShare * 100)}`;
  await system.prepare(scenario);
  if (PIN) pinSystem(rootsFor(system, ctx));
  const profiling =
    system.name === "idemflow" && PROFILE === scenario && total === TRIGGERS ? await startProfile(ctx.engineInspector) : null;
  const { unique, sends } = scenarioOrders(system.name, scenario, total, duplicateShare, seed);
  const requests = sends.map((orderId) => system.trigger(scenario, orderId));
  const roots = rootsFor(system, ctx);
  const cpuBefore = treeCpuMs(roots);
  const load = await runLoad({ concurrency, maxRequests: requests.length, request: (i) => requests[i], keepResults: true });
  const accepted = load.results.filter((r) => r.status === 200 || r.status === 202);
  const created = load.results.filter((r) => r.status === 202).length;
  const deduplicated = load.results.filter((r) => r.status === 200 && r.body?.deduplicated === true).length;
  const errors = load.results.filter((r) => r.status !== 200 && r.status !== 202);
  // Wait for what was actually started (a failed trigger starts nothing).
  const started = [...new Set(accepted.map((r) => r.body?.executionId).filter(Boolean))];
  const completion =
    started.length > 0
      ? await system.awaitCompletion(scenario, started, Date.now() + COMPLETION_TIMEOUT_MS)
      : { completed: 0, failed: 0, lastFinishedAt: 0 };
  const e2eSeconds = (completion.lastFinishedAt - load.startedAt) / 1000;
  const cpuAfter = cpuBefore && treeCpuMs(roots);
  // CPU per completed execution (the completion polls' idle tail included), per process tree.
  const cpuMsPerExecution =
    cpuBefore && cpuAfter && completion.completed > 0
      ? Object.fromEntries(Object.keys(roots).map((name) => [name, (cpuAfter[name] - cpuBefore[name]) / completion.completed]))
      : undefined;
  if (profiling) await writeProfile(ctx, scenario, await profiling());
  const d1 = system.d1 ? await system.d1() : undefined;
  return {
    system: system.name,
    scenario,
    concurrency,
    duplicateShare,
    sent: sends.length,
    unique: unique.length,
    accepted: accepted.length,
    created,
    deduplicated,
    errors: errors.length,
    firstError: errors[0] ? `${errors[0].status} ${JSON.stringify(errors[0].body).slice(0, 200)}` : undefined,
    triggersPerSecond: accepted.length / (load.elapsedMs / 1000),
    // Over every request, failed ones included (runLoad's own p50/p99 count answers only).
    p50: percentile(
      load.results.map((r) => r.ms),
      0.5,
    ),
    p99: percentile(
      load.results.map((r) => r.ms),
      0.99,
    ),
    completed: completion.completed,
    failed: completion.failed,
    completedPerSecond: completion.completed > 0 && e2eSeconds > 0 ? completion.completed / e2eSeconds : 0,
    d1StatementsPerExecution: d1 && completion.completed > 0 ? d1.statements / completion.completed : undefined,
    d1RoundTripsPerExecution: d1 && completion.completed > 0 ? d1.roundTrips / completion.completed : undefined,
    d1RowsWrittenPerExecution: d1 && completion.completed > 0 ? d1.rowsWritten / completion.completed : undefined,
    d1RowsReadPerExecution: d1 && completion.completed > 0 ? d1.rowsRead / completion.completed : undefined,
    queueMessagesPerExecution:
      d1?.queueMessages !== undefined && completion.completed > 0 ? d1.queueMessages / completion.completed : undefined,
    d1BySql: d1?.bySql,
    cpuMsPerExecution,
  };
}

async function writeProfile(ctx, scenario, profile) {
  const file = join(ctx.logs, `engine-${scenario}.cpuprofile`);
  writeFileSync(file, JSON.stringify(profile));
  log(`CPU profile of the engine for ${scenario}: ${file}\n${summarizeProfile(profile)}`);
}

/**
 * One execution at a time: the time from sending the trigger to the system's own completion
 * timestamp (idemflow: executions.finished_at; Workflows: the receipt step's Date.now()).
 */
async function singleExecutionLatency(system, _ctx) {
  const scenario = "latency";
  await system.prepare(scenario);
  const profiling = system.name === "idemflow" && PROFILE === scenario ? await startProfile(_ctx.engineInspector) : null;
  const latencies = [];
  let lastFinishedAt = 0;
  for (let i = 0; i < LATENCY_RUNS; i++) {
    const orderId = `${system.name === "idemflow" ? "if" : "wf"}-${RUN}-latency-${i}`;
    const request = system.trigger(scenario, orderId);
    const sentAt = Date.now();
    const body = await (await fetch(request.url, request.init)).json();
    // The Workflows twin reports completion of the given ids; idemflow counts the workflow's
    // finished executions, so it waits for i + 1 of them.
    const ids = system.name === "idemflow" ? Array.from({ length: i + 1 }, () => body.executionId) : [body.executionId];
    const completion = await system.awaitCompletion(scenario, ids, Date.now() + 20_000, 20);
    if (completion.lastFinishedAt > lastFinishedAt) {
      latencies.push(completion.lastFinishedAt - sentAt);
      lastFinishedAt = completion.lastFinishedAt;
    }
  }
  if (profiling) await writeProfile(_ctx, scenario, await profiling());
  return { runs: LATENCY_RUNS, completed: latencies.length, p50: percentile(latencies, 0.5), max: Math.max(...latencies) };
}

/** Duplicates per payload size in `duplicateCost`, and the sizes (bytes of padding added to the small order). */
const DUPLICATE_COST_ORDERS = Number(process.env.BENCH_DUP_ORDERS ?? (QUICK ? 16 : 64));
const DUPLICATE_COST_PADS = [0, 16 * 1024];

/**
 * What a duplicate trigger costs, apart from everything else: the orders of one scenario are
 * started and finished first, then each is triggered again — once with the bench's small order,
 * once padded by 16 KiB (the padding is outside the identity, so it is the same trigger) — eight at
 * a time. Per duplicate: the system's Worker CPU (its process tree), and for idemflow the D1
 * statements, round trips and rows the duplicates cost (counted from a reset, nothing else running).
 */
async function duplicateCost(system, ctx) {
  const scenario = "dupcost";
  await system.prepare(scenario);
  const prefix = `${system.name === "idemflow" ? "if" : "wf"}-${RUN}-dupcost-`;
  const orders = Array.from({ length: DUPLICATE_COST_ORDERS }, (_, i) => `${prefix}${i}`);
  const first = await runLoad({
    concurrency: 8,
    maxRequests: orders.length,
    request: (i) => system.trigger(scenario, orders[i]),
    keepResults: true,
  });
  const started = first.results.map((r) => r.body?.executionId).filter(Boolean);
  await system.awaitCompletion(scenario, started, Date.now() + COMPLETION_TIMEOUT_MS);
  const roots = rootsFor(system, ctx);
  const bySize = [];
  for (const padBytes of DUPLICATE_COST_PADS) {
    const extra = padBytes > 0 ? { pad: "x".repeat(padBytes) } : {};
    if (system.name === "idemflow") await fetch(`${ctx.engine}/__bench/d1/reset`, { method: "POST" });
    const profiling = system.name === "idemflow" && PROFILE === `${scenario}-${padBytes}` ? await startProfile(ctx.engineInspector) : null;
    const cpuBefore = treeCpuMs(roots);
    const load = await runLoad({
      concurrency: 8,
      maxRequests: orders.length,
      request: (i) => system.trigger(scenario, orders[i], extra),
      keepResults: true,
    });
    const cpuAfter = treeCpuMs(roots);
    if (profiling) await writeProfile(ctx, `${scenario}-${padBytes}`, await profiling());
    const d1 = system.d1 ? await system.d1() : undefined;
    const n = orders.length;
    bySize.push({
      padBytes,
      duplicates: load.results.filter((r) => r.status === 200 || r.status === 409).length,
      p50: percentile(
        load.results.map((r) => r.ms),
        0.5,
      ),
      cpuMsPerDuplicate: cpuBefore && cpuAfter ? (cpuAfter.system - cpuBefore.system) / n : undefined,
      statements: d1 ? d1.statements / n : undefined,
      roundTrips: d1 ? d1.roundTrips / n : undefined,
      rowsWritten: d1 ? d1.rowsWritten / n : undefined,
      rowsRead: d1 ? d1.rowsRead / n : undefined,
    });
  }
  if (system.name === "idemflow") {
    // What the engine's process spends on a request before the engine's own work: the same body
    // answered at once, and answered after one D1 batch of three `SELECT 1` (bench routes).
    for (const [label, path] of [
      ["noop", "/__bench/noop"],
      ["d1-select", "/__bench/d1-select"],
    ]) {
      const request = system.trigger(scenario, orders[0]);
      const cpuBefore = treeCpuMs(roots);
      await runLoad({
        concurrency: 8,
        maxRequests: orders.length,
        request: () => ({ url: `${ctx.engine}${path}`, init: { method: "POST", headers: request.init.headers, body: request.init.body } }),
      });
      const cpuAfter = treeCpuMs(roots);
      bySize.push({
        baseline: label,
        cpuMsPerRequest: cpuBefore && cpuAfter ? (cpuAfter.system - cpuBefore.system) / orders.length : undefined,
      });
    }
  }
  return bySize;
}

// ---------------------------------------------------------------------------------------------
// Correctness

/**
 * Rounds of 50 truly concurrent identical triggers (one new order per round). A race shows up
 * only sometimes, so several rounds are run and each round's outcome is reported.
 */
async function concurrentDuplicates(system, ctx) {
  const scenario = "dup";
  await system.prepare(scenario);
  const rounds = [];
  for (let round = 0; round < DUPLICATE_ROUNDS; round++) {
    const orderId = `${system.name === "idemflow" ? "if" : "wf"}-${RUN}-dup-${round}`;
    const request = system.trigger(scenario, orderId);
    // All 50 requests are started before any answer is awaited.
    const responses = await Promise.all(
      Array.from({ length: 50 }, async () => {
        const response = await fetch(request.url, request.init);
        return { status: response.status, body: await response.json().catch(() => null) };
      }),
    );
    rounds.push({
      orderId,
      created: responses.filter((r) => r.status === 202).length,
      deduplicated: responses.filter((r) => r.status === 200).length,
      errors: responses.filter((r) => r.status !== 200 && r.status !== 202).length,
      ids: [...new Set(responses.map((r) => r.body?.executionId).filter(Boolean))],
    });
  }
  const ids = rounds.flatMap((r) => r.ids);
  const completion = ids.length > 0 ? await system.awaitCompletion(scenario, ids, Date.now() + COMPLETION_TIMEOUT_MS) : { executions: 0 };
  for (const round of rounds) {
    round.charges = await chargesFor(ctx, round.orderId);
    round.attempts = round.ids.length === 1 ? await system.chargeAttempts(round.ids[0]) : undefined;
  }
  return {
    rounds: rounds.length,
    createdPerRound: rounds.map((r) => r.created),
    deduplicated: rounds.reduce((n, r) => n + r.deduplicated, 0),
    errors: rounds.reduce((n, r) => n + r.errors, 0),
    distinctIdsPerRound: rounds.map((r) => r.ids.length),
    executions: completion.executions,
    chargesPerRound: rounds.map((r) => r.charges),
    attemptsPerRound: rounds.map((r) => r.attempts ?? "?"),
  };
}

async function crashAfterCall(system, ctx) {
  const scenario = "crash";
  await system.prepare(scenario);
  const orderId = `${system.name === "idemflow" ? "if" : "wf"}-${RUN}-crash`;
  const makeTrigger = await system.crashAfterCall(orderId);
  const outcome = await runToCompletion(system, ctx, scenario, orderId, makeTrigger(orderId));
  return { ...outcome, crashesFired: system.crashesFired ? await system.crashesFired() : 1 };
}

async function responseLost(system, ctx) {
  const scenario = "lost";
  await system.prepare(scenario);
  const orderId = `${system.name === "idemflow" ? "if" : "wf"}-${RUN}-lost`;
  const armed = await fetch(`${ctx.demo}/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ path: "/payments/charges", mode: "after-commit", count: 1 }),
  });
  if (!armed.ok) throw new Error(`POST /faults → ${armed.status} ${await armed.text()}`);
  return runToCompletion(system, ctx, scenario, orderId, system.trigger(scenario, orderId));
}

/** Send one trigger, wait for its execution, then read the charges and how often the charge step ran. */
async function runToCompletion(system, ctx, scenario, orderId, request) {
  const response = await fetch(request.url, request.init);
  const body = await response.json().catch(() => null);
  if (!body?.executionId) throw new Error(`trigger → ${response.status} ${JSON.stringify(body)}`);
  const completion = await system.awaitCompletion(scenario, [body.executionId], Date.now() + COMPLETION_TIMEOUT_MS);
  return {
    completed: completion.completed,
    charges: await chargesFor(ctx, orderId),
    attempts: system.chargeAttempts ? await system.chargeAttempts(body.executionId) : undefined,
  };
}

// ---------------------------------------------------------------------------------------------
// Output

const fmt = (n, digits = 0) => (n === undefined || Number.isNaN(n) ? "–" : n.toFixed(digits));

/** One table: a row per metric, the two systems side by side. */
function table(rows, correctness, latency, meta, duplicates = {}) {
  const lines = [];
  lines.push(
    `idemflow vs Cloudflare Workflows (local) — ${meta.triggers} triggers per cell, loopback, ${meta.date}, ` +
      `${meta.cpus} CPUs${meta.pinned ? " (each system pinned to CPU 0, the rest on the others)" : ""}, ` +
      `load average ${meta.loadBefore} before / ${meta.loadAfter} after`,
  );
  lines.push("");
  lines.push("| metric | idemflow | Workflows |");
  lines.push("| --- | ---: | ---: |");
  const single = (l) => (l ? `${fmt(l.p50)} / ${fmt(l.max)}${l.completed < l.runs ? ` (${l.completed}/${l.runs} completed)` : ""}` : "–");
  lines.push(
    `| one execution at a time: trigger → completed, p50 / max ms (${LATENCY_RUNS} runs) | ${single(latency.idemflow)} | ` +
      `${single(latency.Workflows)} |`,
  );
  const cell = (concurrency, duplicateShare, system) =>
    rows.find((r) => r.concurrency === concurrency && r.duplicateShare === duplicateShare && r.system === system);
  const both = (label, value) => {
    lines.push(`| ${label} | ${value(cellOf("idemflow"))} | ${value(cellOf("Workflows"))} |`);
  };
  let cellOf;
  for (const concurrency of CONCURRENCIES) {
    for (const duplicateShare of DUPLICATE_SHARES) {
      cellOf = (system) => cell(concurrency, duplicateShare, system);
      const scenario = `c=${concurrency}, ${Math.round(duplicateShare * 100)} % dup`;
      const errors = (r) => (r.errors > 0 ? ` (${r.errors} errors)` : "");
      both(`${scenario}: accepted triggers/s`, (r) => (r ? `${fmt(r.triggersPerSecond)}${errors(r)}` : "–"));
      both(`${scenario}: trigger latency p50 / p99 ms`, (r) => (r ? `${fmt(r.p50)} / ${fmt(r.p99)}` : "–"));
      both(`${scenario}: end-to-end completed executions/s`, (r) =>
        r ? `${fmt(r.completedPerSecond, 1)} (${r.completed}/${r.unique}${r.failed ? `, ${r.failed} failed` : ""})` : "–",
      );
      both(`${scenario}: D1 statements (round trips) per execution`, (r) =>
        !r
          ? "–"
          : r.d1StatementsPerExecution === undefined
            ? "no D1 (instance storage)"
            : `${fmt(r.d1StatementsPerExecution, 1)} (${fmt(r.d1RoundTripsPerExecution, 1)})`,
      );
      both(`${scenario}: D1 rows written / read per execution`, (r) =>
        !r || r.d1RowsWrittenPerExecution === undefined
          ? "–"
          : `${fmt(r.d1RowsWrittenPerExecution, 1)} / ${fmt(r.d1RowsReadPerExecution, 1)}`,
      );
      both(`${scenario}: CPU ms per execution: the system's Worker / the destination / the driver`, (r) =>
        !r?.cpuMsPerExecution
          ? "–"
          : [r.cpuMsPerExecution.system, r.cpuMsPerExecution.destination, r.cpuMsPerExecution.driver].map((v) => fmt(v, 1)).join(" / "),
      );
      both(`${scenario}: step-queue messages per execution`, (r) =>
        !r || r.queueMessagesPerExecution === undefined ? "–" : fmt(r.queueMessagesPerExecution, 2),
      );
    }
  }
  for (const padBytes of DUPLICATE_COST_PADS) {
    const of = (system) => duplicates[system]?.find((d) => d.baseline === undefined && d.padBytes === padBytes);
    const label = `a duplicate trigger${padBytes ? ` padded by ${padBytes / 1024} KiB` : ""}`;
    const cost = (d) =>
      !d
        ? "–"
        : `${fmt(d.cpuMsPerDuplicate, 2)} ms CPU, p50 ${fmt(d.p50)} ms` +
          (d.statements === undefined
            ? ""
            : `; ${fmt(d.statements, 1)} statements (${fmt(d.roundTrips, 1)} round trips), ` +
              `${fmt(d.rowsWritten, 1)} rows written / ${fmt(d.rowsRead, 1)} read`);
    lines.push(`| ${label}: the system's Worker CPU, latency, D1 | ${cost(of("idemflow"))} | ${cost(of("Workflows"))} |`);
  }
  const baseline = (label) => duplicates.idemflow?.find((d) => d.baseline === label)?.cpuMsPerRequest;
  if (baseline("noop") !== undefined) {
    lines.push(
      `| the engine's Worker CPU per request without the engine: the same body answered at once / after one D1 batch of ` +
        `three \`SELECT 1\` | ${fmt(baseline("noop"), 2)} / ${fmt(baseline("d1-select"), 2)} ms | – |`,
    );
  }
  const c = correctness;
  const dup = (d) =>
    d
      ? `answered "created" per round: ${d.createdPerRound.join(", ")}${d.errors ? `; ${d.errors} errors` : ""}; ` +
        `${d.executions} executions for ${d.rounds} orders; charge ran per order: ${d.attemptsPerRound.join(", ")}; ` +
        `**charges per order: ${d.chargesPerRound.join(", ")}**`
      : "–";
  const rounds = c.idemflow?.duplicates?.rounds ?? c.Workflows?.duplicates?.rounds ?? DUPLICATE_ROUNDS;
  lines.push(`| ${rounds} rounds × 50 concurrent identical triggers | ${dup(c.idemflow?.duplicates)} | ${dup(c.Workflows?.duplicates)} |`);
  const once = (d) =>
    d
      ? `charge ran ${d.attempts ?? "?"}×; **${d.charges} charge**; completed ` +
        `${d.completed}/1${d.crashesFired === 0 ? " (crash NOT injected)" : ""}`
      : "–";
  lines.push(`| step throws after the HTTP call | ${once(c.idemflow?.crash)} | ${once(c.Workflows?.crash)} |`);
  lines.push(`| destination answers 502 after committing | ${once(c.idemflow?.lost)} | ${once(c.Workflows?.lost)} |`);
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const started = Date.now();
  // The machine's load is part of the result: both systems share the same cores with it.
  const loadBefore = loadavg()[0].toFixed(1);
  const ctx = await setup();
  const systems = { idemflow: makeIdemflow(ctx), Workflows: makeWorkflows(ctx) };
  const order = (i) =>
    (i % 2 === 0 ? [systems.idemflow, systems.Workflows] : [systems.Workflows, systems.idemflow]).filter((s) => !ONLY || s.name === ONLY);

  log("warm-up…");
  for (const system of phase("warmup") ? order(0) : []) {
    await throughput(system, ctx, { concurrency: 8, duplicateShare: 0, total: 16, seed: 1 }).catch((e) =>
      log(`warm-up ${system.name}: ${e.message}`),
    );
  }

  log("single-execution latency…");
  const latency = {};
  for (const system of phase("latency") ? order(1) : []) {
    try {
      if (PIN) pinSystem(rootsFor(system, ctx));
      latency[system.name] = await singleExecutionLatency(system, ctx);
      log(`  ${system.name}: p50 ${fmt(latency[system.name].p50)} ms, max ${fmt(latency[system.name].max)} ms`);
    } catch (error) {
      log(`  ${system.name} latency failed: ${error.message}`);
    }
  }

  const rows = [];
  let i = 0;
  for (const concurrency of phase("throughput") ? CONCURRENCIES : []) {
    for (const duplicateShare of DUPLICATE_SHARES) {
      for (const system of order(i)) {
        log(`${system.name}: concurrency ${concurrency}, ${duplicateShare * 100}% duplicates…`);
        try {
          const row = await throughput(system, ctx, { concurrency, duplicateShare, total: TRIGGERS, seed: 1000 + i });
          rows.push(row);
          log(
            `  ${fmt(row.triggersPerSecond)} triggers/s, p50 ${fmt(row.p50)} ms, p99 ${fmt(row.p99)} ms, ` +
              `${row.completed}/${row.unique} completed, ${fmt(row.completedPerSecond, 1)}/s` +
              `${row.firstError ? `, first error: ${row.firstError}` : ""}`,
          );
        } catch (error) {
          log(`  ${system.name} failed: ${error.message}`);
        }
      }
      i++;
    }
  }

  log("duplicate cost…");
  const duplicates = {};
  for (const system of phase("dupcost") ? order(0) : []) {
    try {
      if (PIN) pinSystem(rootsFor(system, ctx));
      duplicates[system.name] = await duplicateCost(system, ctx);
    } catch (error) {
      log(`  ${system.name} duplicate cost failed: ${error.message}`);
    }
  }

  log("correctness…");
  const correctness = {};
  for (const system of phase("correctness") ? order(0) : []) {
    const result = {};
    for (const [name, run] of [
      ["duplicates", concurrentDuplicates],
      ["crash", crashAfterCall],
      ["lost", responseLost],
    ]) {
      try {
        result[name] = await run(system, ctx);
      } catch (error) {
        log(`  ${system.name} ${name} failed: ${error.message}`);
      }
    }
    correctness[system.name] = result;
  }

  const d1Detail = await fetch(`${ctx.engine}/__bench/d1?detail`)
    .then((r) => r.json())
    .catch(() => undefined);
  const meta = {
    triggers: TRIGGERS,
    date: new Date().toISOString(),
    cpus: cpus().length,
    pinned: PIN,
    loadBefore,
    loadAfter: loadavg()[0].toFixed(1),
  };
  const output = table(rows, correctness, latency, meta, duplicates);
  console.log(output);
  const resultsFile = join(ctx.tmp, "results.json");
  writeFileSync(resultsFile, JSON.stringify({ meta, latency, rows, duplicates, correctness, lastScenarioD1: d1Detail }, null, 2));
  log(`raw results: ${resultsFile} (logs in ${ctx.logs}); total ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

let stopping = false;
async function shutdown(code) {
  if (stopping) return;
  stopping = true;
  await stopAll();
  if (runDir && process.env.BENCH_KEEP !== "1") {
    for (const dir of ["engine", "demo", "workflows", "engine-build", "demo-build", "workflows-build"]) {
      rmSync(join(runDir, dir), { recursive: true, force: true });
    }
  }
  process.exit(code);
}
process.on("SIGINT", () => shutdown(130));
process.on("SIGTERM", () => shutdown(143));

main().then(
  () => shutdown(0),
  (error) => {
    log(error.stack ?? String(error));
    return shutdown(1);
  },
);
