// `npm run bench:shards [-- options]`: workspaces placed on several D1 databases (issue 28, SPEC
// section 13, docs/shards.md). Two measurements, one table each:
//
//   1. A SIMULATION of the database ceiling. This 2-core machine is CPU-bound: local D1 is SQLite
//      in the same workerd process as the engine, so a real local run cannot show one database's
//      limit, let alone several. The bench Worker (bench/shards/worker.ts) therefore turns every
//      shard into a simulated single-threaded primary: its round trips run one at a time, and each
//      holds the shard for `--delay-ms` (default 5) × its statements before the real database runs
//      it. One shard then carries about 1000 / (delay × statements per execution) executions/s by
//      construction, and N shards N times that — IF nothing on the engine's side serialises across
//      shards (the invocation's query budget, the cron loop, the one queue, isolate caches) and the
//      machine has the CPU. Scenarios: 1, 2 and 4 shards with the load spread evenly over
//      `--workspaces` (default 8) workspaces, and a skew row: 4 shards configured, every workspace
//      on one of them; then 1 and 4 shards with step chaining off (every step a queue message), and
//      4 shards chaining off with the step queue's max_batch_size raised from 10 to 40 in the bench's
//      config (whether the local queue, which keeps one batch in flight, is what limits that row).
//      Each runs a closed loop of `--concurrency` (default 16) triggers for `--duration` ms (default
//      12000; a third of it with chaining off), waits until every accepted execution finished, and reports
//      executions/s (first created → last finished, the engine's clock), each shard's gate busy
//      share (near 100 %: the simulated database is the limit; lower: something else is), the
//      step-queue messages per execution (the queue path: the local queue keeps one batch of at
//      most 10 in flight), the engine's CPU, and one cron tick's wall time and statements per shard.
//   2. A REAL run (no delay, no gate): `--real-n` (default 192) executions over 4 shards (chaining
//      on; `realq`: chaining off), and per shard its statements, round trips and batches per
//      execution, the rows written and read (D1's `meta.rows_written` / `meta.rows_read`) and the
//      SQL time D1 reports (`meta.duration`,
//      with how many statements reported more than zero: locally the Workers clock does not advance
//      during CPU work, so a zero means "not measured here", not "free").
//
// The job is bench/compare's three-vertex order charge (entry → Gateway POST to the demo
// destinations → transform), so the statement counts compare with bench:compare's. Everything runs
// on free loopback ports (never 8787/8788) with outside connections off and wrangler's local trace
// collector off (X_LOCAL_OBSERVABILITY=false, as in bench:compare), from bundled snapshots
// (bench/lib/snapshot.mjs) on a fresh temporary state per scenario: the engine's wrangler config is
// generated from the repo's wrangler.toml with its D1 bindings replaced by four (DB, DB_1, DB_2,
// DB_3), each with a distinct database_id (locally wrangler keys a database by its id: one id would
// be one SQLite file), every one migrated. D1_SHARDS and WORKSPACE_SHARDS are set per scenario.
//
// Options: --delay-ms=5 --duration=12000 --concurrency=16 --workspaces=8 --real-n=192
//          --scenarios=real,realq,1,2,4,skew,1q,4q,4qw --json=FILE (raw figures) --hard-stop=420000
import { cp, mkdir, readFile, writeFile } from "node:fs/promises";
import { loadavg } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DEMO_CONFIG, ROOT, startWorker, waitForHealth } from "../scripts/lib/wrangler-dev.mjs";
import { migrateLocalDatabases } from "../scripts/lib/local-migrate.mjs";
import { readShards } from "../scripts/lib/shards.mjs";
import { demoCharge, orderWorkflow } from "../scripts/lib/order-workflow.mjs";
import { flag, runBench } from "./lib/bench-run.mjs";
import { treeCpuMs } from "./lib/cpu.mjs";
import { runLoad } from "./lib/load.mjs";
import { machine, markdownTable } from "./lib/report.mjs";
import { snapshotConfig } from "./lib/snapshot.mjs";

process.env.X_LOCAL_OBSERVABILITY ??= "false";

const DELAY_MS = Number(flag("delay-ms", 5));
const DURATION_MS = Number(flag("duration", 12_000));
const CONCURRENCY = Number(flag("concurrency", 16));
const WORKSPACES = Number(flag("workspaces", 8));
const REAL_N = Number(flag("real-n", 192));
const SCENARIOS = flag("scenarios", "real,realq,1,2,4,skew,1q,4q,4qw").split(",");
const JSON_OUT = flag("json", null);
const HARD_STOP_MS = Number(flag("hard-stop", 420_000));
/** How long the drain after a scenario's load may take before the scenario is reported incomplete. */
const DRAIN_MS = 90_000;
const SHARD_BINDINGS = ["DB", "DB_1", "DB_2", "DB_3"];
const PAYMENTS_KEY = "sk_bench_shards_local";
const WORKFLOW_ID = "bench-shards";
const CRON_PATH = "/cdn-cgi/local/scheduled?cron=*+*+*+*+*";

if (!(DELAY_MS > 0 && DURATION_MS > 0 && CONCURRENCY > 0 && WORKSPACES >= 4 && REAL_N > 0)) {
  throw new Error("--delay-ms, --duration, --concurrency, --real-n must be positive and --workspaces at least 4");
}

const log = (line) => console.error(`[bench:shards] ${new Date().toISOString().slice(11, 19)} ${line}`);
const workspaces = Array.from({ length: WORKSPACES }, (_, i) => `shards-w${i}`);
const tokenOf = (workspace) => `token-${workspace}`;

/**
 * The scenarios: which bindings are shards, where each workspace lives, and the per-statement delay.
 * `place(i)` is the shard of workspace i; the map written to WORKSPACE_SHARDS lists every workspace.
 */
const SCENARIO_DEFS = {
  real: { label: "real run, 4 shards, even", shards: 4, place: (i) => i % 4, delay: 0 },
  realq: { label: "real run, 4 shards, even, CHAIN_STEPS=off", shards: 4, place: (i) => i % 4, delay: 0, chain: "off" },
  1: { label: "1 shard", shards: 1, place: () => 0, delay: DELAY_MS },
  2: { label: "2 shards, even", shards: 2, place: (i) => i % 2, delay: DELAY_MS },
  4: { label: "4 shards, even", shards: 4, place: (i) => i % 4, delay: DELAY_MS },
  skew: { label: "4 shards, all on shard 3 (skew)", shards: 4, place: () => 3, delay: DELAY_MS },
  // Chaining off: every step goes through the one local queue (one batch of at most 10 in flight).
  "1q": { label: "1 shard, CHAIN_STEPS=off", shards: 1, place: () => 0, delay: DELAY_MS, chain: "off" },
  "4q": { label: "4 shards, even, CHAIN_STEPS=off", shards: 4, place: (i) => i % 4, delay: DELAY_MS, chain: "off" },
  // The same with the step queue's max_batch_size raised from 10 to 40 in the bench's config only: if
  // this row is faster, the local queue's one batch in flight (not the engine) held the row above back.
  "4qw": {
    label: "4 shards, even, CHAIN_STEPS=off, queue batch 40",
    shards: 4,
    place: (i) => i % 4,
    delay: DELAY_MS,
    chain: "off",
    queueBatch: 40,
  },
};

// ---------------------------------------------------------------------------------------------
// Setup: the generated config, its snapshot, the migrated template state, the demo destinations

/** The repo's wrangler.toml with its D1 bindings replaced by the bench's four, paths made absolute. */
async function engineConfig(dir) {
  const source = await readFile(join(ROOT, "wrangler.toml"), "utf8");
  const withoutD1 = source.replace(/^\[\[d1_databases\]\][\s\S]*?(?=^\[)/gm, "");
  if (/^\[\[d1_databases\]\]/m.test(withoutD1)) throw new Error("wrangler.toml: a [[d1_databases]] table was not replaced");
  const bindings = SHARD_BINDINGS.map((binding, i) =>
    [
      "[[d1_databases]]",
      `binding = "${binding}"`,
      `database_name = "idemflow-bench-shard-${i}"`,
      // Distinct ids: locally a database is keyed by its id.
      `database_id = "00000000-0000-0000-0000-0000000005b${i}"`,
      `migrations_dir = ${JSON.stringify(join(ROOT, "migrations"))}`,
    ].join("\n"),
  ).join("\n\n");
  const text =
    withoutD1.replace(/^directory\s*=\s*"([^"]+)"/m, (_, d) => `directory = ${JSON.stringify(join(ROOT, d))}`) +
    `\n# bench:shards: four shards, each its own local SQLite file.\n${bindings}\n`;
  const file = join(dir, "engine-source.wrangler.toml");
  await writeFile(file, text);
  return file;
}

async function setup(dir) {
  const logs = join(dir, "logs");
  await mkdir(logs, { recursive: true });
  log("bundling snapshots of the bench engine (bench/shards/worker.ts) and the demo destinations…");
  const source = await engineConfig(dir);
  const [engine, demo] = await Promise.all([
    snapshotConfig({
      dir,
      logFile: join(logs, "engine-build.log"),
      name: "engine",
      config: source,
      main: join(ROOT, "bench", "shards", "worker.ts"),
    }),
    snapshotConfig({ dir, logFile: join(logs, "demo-build.log"), name: "demo", config: DEMO_CONFIG }),
  ]);
  log("applying migrations to the four shards (into one template state, copied per scenario) and to the demo…");
  // In this process, every database at once (scripts/lib/local-migrate.mjs, as npm start): each shard's
  // database is its own SQLite file (named after its id) in the template's state directory.
  const template = join(dir, "template");
  const shards = SHARD_BINDINGS.map((_, i) => ({
    label: `idemflow-bench-shard-${i}`,
    databaseId: `00000000-0000-0000-0000-0000000005b${i}`,
    migrationsDir: join(ROOT, "migrations"),
  }));
  const demoDb = readShards({ config: DEMO_CONFIG }).shards[0];
  await Promise.all([
    migrateLocalDatabases({ persistTo: template, databases: shards }),
    migrateLocalDatabases({ persistTo: join(dir, "demo"), databases: [{ label: demoDb.databaseName, ...demoDb }] }),
  ]);
  const demoWorker = await startWorker({
    name: "demo",
    config: demo,
    persistTo: join(dir, "demo"),
    logLevel: "warn",
    logFile: join(logs, "demo.log"),
  });
  await waitForHealth(demoWorker);
  return { logs, engine, template, demo: demoWorker };
}

// ---------------------------------------------------------------------------------------------
// One scenario

const definition = (demoPort) =>
  orderWorkflow({
    id: WORKFLOW_ID,
    gateway: demoCharge(`http://127.0.0.1:${demoPort}`, {
      timeoutMs: 10_000,
      retry: { maxAttempts: 5, backoff: "fixed", initialDelayMs: 100 },
    }),
    then: {
      id: "receipt",
      output: {
        order: "= payload.order.id",
        charged: "= steps.charge.status = 201 or steps.charge.status = 200",
        key: "= steps.charge.idempotencyKey",
      },
    },
  });

const headersOf = (workspace) => ({ authorization: `Bearer ${tokenOf(workspace)}`, "content-type": "application/json" });

async function call(url, init = {}) {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${init.method ?? "GET"} ${url} answered ${res.status}: ${text.slice(0, 400)}`);
  return text ? JSON.parse(text) : null;
}

const triggerRequest = (engineUrl, tag, i) => {
  const workspace = workspaces[i % WORKSPACES];
  return {
    url: `${engineUrl}/v1/workflows/${WORKFLOW_ID}/trigger`,
    init: { method: "POST", headers: headersOf(workspace), body: JSON.stringify({ order: { id: `${tag}-${i}`, total: 42 } }) },
  };
};

/** Per shard and workspace: finished and running executions, first created, last finished. */
async function executionSummary(engineUrl) {
  const { shards } = await call(`${engineUrl}/__bench/executions?workflowId=${WORKFLOW_ID}`);
  let finished = 0;
  let running = 0;
  let failed = 0;
  let firstCreated = Infinity;
  let lastFinished = 0;
  const byShard = shards.map((shard) => {
    const perWorkspace = {};
    for (const row of shard.rows) {
      perWorkspace[row.workspace] = (perWorkspace[row.workspace] ?? 0) + row.n;
      if (row.status === "RUNNING") running += row.n;
      else finished += row.n;
      if (row.status === "FAILED" || row.status === "CANCELLED") failed += row.n;
      if (row.first_created !== null) firstCreated = Math.min(firstCreated, row.first_created);
      if (row.last_finished !== null) lastFinished = Math.max(lastFinished, row.last_finished);
    }
    return { index: shard.index, perWorkspace };
  });
  return { finished, running, failed, firstCreated, lastFinished, byShard };
}

async function waitAllFinished(engineUrl, expected, deadline) {
  let summary;
  while (Date.now() < deadline) {
    summary = await executionSummary(engineUrl);
    if (summary.running === 0 && summary.finished >= expected) return { ...summary, complete: true };
    await sleep(200);
  }
  return { ...summary, complete: false };
}

async function runScenario(ctx, key) {
  const scenario = SCENARIO_DEFS[key];
  const tag = `s${key}`;
  const persistTo = join(ctx.dir, `state-${tag}`);
  await cp(ctx.template, persistTo, { recursive: true });
  const shardsVar = SHARD_BINDINGS.slice(0, scenario.shards).join(",");
  const placement = workspaces.map((w, i) => `${w}:${scenario.place(i)}`).join(",");
  const vars = {
    D1_SHARDS: shardsVar,
    WORKSPACE_SHARDS: placement,
    API_TOKENS: workspaces.map((w) => `${tokenOf(w)}:${w}`).join(","),
    SECRET_GRANTS: workspaces.map((w) => `${w}:PAYMENTS_KEY`).join(";"),
    OUTBOUND_ALLOWLIST: `127.0.0.1:${ctx.demo.port}`,
    PAYMENTS_KEY,
    BENCH_SHARD_DELAY_MS: String(scenario.delay),
    CHAIN_STEPS: scenario.chain ?? "on",
  };
  log(`${scenario.label}: D1_SHARDS=${shardsVar}, delay ${scenario.delay} ms per statement; starting the engine…`);
  let config = ctx.engine;
  if (scenario.queueBatch) {
    // A copy of the snapshot's config (every path in it is absolute) with a wider consumer batch.
    config = join(ctx.dir, `engine-batch-${scenario.queueBatch}.wrangler.toml`);
    const text = await readFile(ctx.engine, "utf8");
    await writeFile(config, text.replace(/^max_batch_size\s*=\s*\d+/gm, `max_batch_size = ${scenario.queueBatch}`));
  }
  // Chaining off accepts triggers much faster than it completes them: a shorter load keeps the drain short.
  const durationMs = scenario.chain === "off" ? Math.round(DURATION_MS / 3) : DURATION_MS;
  const engine = await startWorker({
    name: `engine-${tag}`,
    config,
    persistTo,
    vars,
    logLevel: "warn",
    logFile: join(ctx.logs, `engine-${tag}.log`),
  });
  try {
    await waitForHealth(engine, 120_000);
    // The workflow in every workspace, then one warm-up execution per workspace (isolate, caches,
    // the placement record of each workspace, the queue consumer).
    for (const w of workspaces) {
      await call(`${engine.url}/v1/workflows/${WORKFLOW_ID}`, {
        method: "PUT",
        headers: { ...headersOf(w), "idempotency-key": `${tag}-${w}-put` },
        body: JSON.stringify(definition(ctx.demo.port)),
      });
    }
    const warm = await runLoad({
      concurrency: WORKSPACES,
      maxRequests: WORKSPACES,
      request: (i) => triggerRequest(engine.url, `${tag}-warm`, i),
      check: (r) => r.status === 202,
    });
    if (warm.errors > 0) throw new Error(`warm-up: ${warm.errors} triggers failed (${JSON.stringify(warm.statuses)})`);
    const warmed = await waitAllFinished(engine.url, WORKSPACES, Date.now() + 60_000);
    if (!warmed.complete) throw new Error(`warm-up executions did not finish: ${JSON.stringify(warmed)}`);
    const before = warmed.finished;

    await call(`${engine.url}/__bench/shards/reset`, { method: "POST" });
    const load1m = loadavg()[0];
    const cpuBefore = treeCpuMs({ engine: engine.pid, demo: ctx.demo.pid });
    const wallBefore = Date.now();
    const load = await runLoad({
      concurrency: CONCURRENCY,
      ...(scenario.delay === 0 ? { maxRequests: REAL_N } : { durationMs }),
      keepResults: false,
      request: (i) => triggerRequest(engine.url, tag, i),
      check: (r) => r.status === 202,
    });
    const accepted = load.statuses[202] ?? 0;
    const done = await waitAllFinished(engine.url, before + accepted, Date.now() + DRAIN_MS);
    const stats = await call(`${engine.url}/__bench/shards`);
    const cpuAfter = treeCpuMs({ engine: engine.pid, demo: ctx.demo.pid });
    const wallMs = Date.now() - wallBefore;
    const executions = done.finished - before;
    // The warm-up's executions were created before the load: the span starts at the load's first trigger.
    const spanS = (done.lastFinished - load.startedAt) / 1000;

    // One cron tick on the idle system, counters reset: its wall time and its statements per shard.
    await call(`${engine.url}/__bench/shards/reset`, { method: "POST" });
    const cronStarted = Date.now();
    const tick = await fetch(`${engine.url}${CRON_PATH}`, { signal: AbortSignal.timeout(60_000) });
    await tick.arrayBuffer();
    const cronMs = Date.now() - cronStarted;
    await sleep(500);
    const cron = await call(`${engine.url}/__bench/shards`);

    // Each shard's executions of the load (the warm-up's subtracted).
    const loadByShard = done.byShard.map((shard) => {
      const warm = warmed.byShard.find((w) => w.index === shard.index)?.perWorkspace ?? {};
      const total = (counts) => Object.values(counts).reduce((a, b) => a + b, 0);
      return { index: shard.index, executions: total(shard.perWorkspace) - total(warm) };
    });
    const misplaced = [];
    for (const shard of done.byShard) {
      for (const [workspace, n] of Object.entries(shard.perWorkspace)) {
        const expected = scenario.place(workspaces.indexOf(workspace));
        if (expected !== shard.index) misplaced.push(`${workspace} (${n}) on shard ${shard.index}, placed on ${expected}`);
      }
    }
    const cpu = cpuBefore && cpuAfter ? { engine: cpuAfter.engine - cpuBefore.engine, demo: cpuAfter.demo - cpuBefore.demo } : null;
    return {
      key,
      label: scenario.label,
      shards: scenario.shards,
      delayMs: scenario.delay,
      chain: scenario.chain ?? "on",
      loadedShards: new Set(workspaces.map((_, i) => scenario.place(i))).size,
      load1mBefore: load1m,
      accepted,
      triggerErrors: load.errors,
      triggerStatuses: load.statuses,
      triggerP50: load.p50,
      triggersPerSecond: load.rps,
      executions,
      failed: done.failed,
      complete: done.complete,
      executionsPerSecond: executions / spanS,
      spanS,
      wallMs,
      cpu,
      stats,
      cronMs,
      cronStatus: tick.status,
      cron,
      misplaced,
      placement: done.byShard,
      loadByShard,
    };
  } finally {
    await engine.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// Report

const f1 = (n) => (Number.isFinite(n) ? n.toFixed(1) : "–");
const f2 = (n) => (Number.isFinite(n) ? n.toFixed(2) : "–");
const pct = (n) => (Number.isFinite(n) ? `${Math.round(100 * n)} %` : "–");

function simulationTable(rows) {
  // Each row against the 1-shard row of the same chaining mode.
  const baseOf = (r) => rows.find((b) => b.shards === 1 && b.chain === r.chain)?.executionsPerSecond;
  return markdownTable(
    [
      "scenario",
      "executions (failed)",
      "**executions/s**",
      "÷ 1 shard",
      "per loaded shard",
      "busy share of each shard's gate",
      "accepted triggers/s",
      "queue messages / execution",
      "engine CPU ms / execution (cores used)",
      "cron tick ms (statements per shard)",
    ],
    rows.map((r) => {
      const sinceMs = r.stats.sinceMs;
      const busy = r.stats.shards.map((s) => pct(s.busyMs / sinceMs)).join(" · ");
      const cronStatements = r.cron.shards.map((s) => s.statements).join(" · ");
      const cpu = r.cpu ? `${f1(r.cpu.engine / r.executions)} (${f2(r.cpu.engine / r.wallMs)})` : "n/a";
      return [
        r.label,
        `${r.executions} (${r.failed})${r.complete ? "" : " INCOMPLETE"}`,
        `**${f1(r.executionsPerSecond)}**`,
        baseOf(r) ? `${f2(r.executionsPerSecond / baseOf(r))}×` : "–",
        f1(r.executionsPerSecond / r.loadedShards),
        busy,
        f1(r.triggersPerSecond),
        f2(r.stats.queueMessages / r.executions),
        cpu,
        `${r.cronMs} (${cronStatements})`,
      ];
    }),
  );
}

function realTable(r) {
  const rows = r.stats.shards.map((s) => {
    const n = r.loadByShard.find((p) => p.index === s.index)?.executions ?? NaN;
    const per = (x) => f1(x / n);
    return [
      `${s.index} (${s.name})`,
      String(n),
      per(s.statements),
      per(s.roundTrips),
      per(s.batches),
      per(s.rowsWritten),
      per(s.rowsRead),
      `${f2(s.sqlMs / n)} (${s.sqlNonZero} of ${s.withMeta})`,
      ((c) => (c ? `${c.statements} (${c.roundTrips})` : "–"))(r.cron.shards.find((c) => c.index === s.index)),
    ];
  });
  return markdownTable(
    [
      "shard",
      "executions",
      "statements / execution",
      "round trips / execution",
      "batches / execution",
      "rows written / execution",
      "rows read / execution",
      "SQL ms / execution (statements reporting > 0 ms)",
      "one idle cron tick: statements (round trips)",
    ],
    rows,
  );
}

// ---------------------------------------------------------------------------------------------

async function main({ dir, info }) {
  const results = [];
  const ctx = { dir, ...(await setup(dir)) };
  for (const key of SCENARIOS) {
    if (!SCENARIO_DEFS[key]) throw new Error(`unknown scenario ${key} (${Object.keys(SCENARIO_DEFS).join(", ")})`);
    const result = await runScenario(ctx, key);
    log(
      `${result.label}: ${result.executions} executions, ${f1(result.executionsPerSecond)}/s, ` +
        `queue messages ${result.stats.queueMessages}, misplaced ${result.misplaced.length}`,
    );
    results.push(result);
  }
  const after = machine().loadAverage1m;
  const lines = [
    `bench:shards — ${new Date().toISOString()}, ${info.cpus} × ${info.cpuModel}, node ${info.node}, wrangler ${info.wrangler}, ` +
      `load average ${info.loadAverage1m} before / ${after} after`,
  ];
  const sim = results.filter((r) => r.delayMs > 0);
  if (sim.length > 0) {
    lines.push(
      "",
      `SIMULATION: each shard's round trips run one at a time, each holding its shard ${DELAY_MS} ms per statement ` +
        `before the real (local) database runs it. Closed loop, ${CONCURRENCY} triggers in flight for ${DURATION_MS / 1000} s ` +
        `(${Math.round(DURATION_MS / 3) / 1000} s with CHAIN_STEPS=off), ` +
        `round-robin over ${WORKSPACES} workspaces; executions/s = executions / (first trigger → last finished).`,
      "It shows whether the engine serialises anything ACROSS shards (N shards ≈ N × one shard when it does not, " +
        "as long as the machine has CPU to spare). It does not measure D1: the per-shard ceiling is set by the injected delay.",
      "",
      simulationTable(sim),
    );
  }
  for (const real of results.filter((r) => r.delayMs === 0)) {
    lines.push(
      "",
      `REAL run${real.chain === "off" ? ", CHAIN_STEPS=off" : ""} (no delay, no gate): ${real.executions} executions ` +
        `at c${CONCURRENCY} over 4 shards, ${WORKSPACES / 4} workspaces each; counters per shard (the warm-up excluded). ` +
        `${f1(real.executionsPerSecond)} executions/s on this machine (CPU-bound); ` +
        `queue messages ${f2(real.stats.queueMessages / real.executions)} per execution.`,
      "",
      realTable(real),
    );
  }
  const misplaced = results.flatMap((r) => r.misplaced.map((m) => `${r.label}: ${m}`));
  lines.push(
    "",
    misplaced.length === 0 ? "Placement: every execution's rows are on its workspace's shard." : `MISPLACED: ${misplaced.join("; ")}`,
  );
  console.log(lines.join("\n"));
  if (JSON_OUT) {
    await writeFile(JSON_OUT, JSON.stringify({ machine: info, loadAfter: after, delayMs: DELAY_MS, results }, null, 2));
    log(`raw results: ${JSON_OUT}`);
  }
}

await runBench({ name: "shards", hardStopMs: HARD_STOP_MS }, main);
