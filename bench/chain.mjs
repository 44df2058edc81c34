// `npm run bench:chain [-- --runs=10 --steps=1,2,5,10 --n=64 --concurrency=16]`: how an execution's
// latency grows with its number of steps, with step chaining on and off (docs/steps.md "Chaining").
//
// Starts, on free loopback ports and fresh temporary --persist-to directories (migrations applied
// first; outside connections off), two engines from the repo's wrangler.toml — one with
// CHAIN_STEPS=on, one with CHAIN_STEPS=off — side by side. wrangler's local trace collector is off
// for both (X_LOCAL_OBSERVABILITY=false; see bench/compare/run.mjs).
//
// The workflows: ENTRY_POINT → s1 → s2 → … → sN, a linear chain of N TRANSFORM steps, each reading
// the previous one's output (s1 reads the payload). No destination: what is measured is the
// engine's cost per step — a queue hop per step when chaining is off, the same invocation when on.
//
//   1. Latency, one execution at a time: for each N, `--runs` executions per engine, alternating
//      the engines run by run; trigger sent → execution finished (the engine's own finishedAt).
//   2. Throughput of the longest chain: `--n` executions at `--concurrency`, per engine: end-to-end
//      executions/s and steps/s (first created → last finished, on the engine's clock).
// Prints one markdown table; raw figures go to bench/results/.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ROOT, startWorker, waitForHealth } from "../scripts/lib/wrangler-dev.mjs";
import { LOCAL_TOKENS } from "../scripts/lib/local-tokens.mjs";
import { migrateLocalDatabases } from "../scripts/lib/local-migrate.mjs";
import { readShards } from "../scripts/lib/shards.mjs";
import { api, HEADERS } from "./lib/api.mjs";
import { percentile, runLoad } from "./lib/load.mjs";
import { machine, markdownTable } from "./lib/report.mjs";
import { flag, runBench } from "./lib/bench-run.mjs";

process.env.X_LOCAL_OBSERVABILITY ??= "false";

const RUN = Date.now().toString(36);
const RUNS = Number(flag("runs", 10));
const STEPS = flag("steps", "1,2,5,10").split(",").map(Number);
const N = Number(flag("n", 64));
const CONCURRENCY = Number(flag("concurrency", 16));
const HARD_STOP_MS = Number(flag("hard-stop", 300_000));

const log = (line) => console.error(`[bench:chain] ${line}`);

/** ENTRY_POINT → s1 → … → sN; each step adds one to the previous count. */
function definition(id, steps) {
  const vertices = [{ id: "received", type: "ENTRY_POINT", config: {} }];
  const edges = [];
  for (let i = 1; i <= steps; i++) {
    const previous = i === 1 ? "payload.n" : `steps.s${i - 1}.n`;
    vertices.push({ id: `s${i}`, type: "TRANSFORM", config: { output: { n: `= ${previous} + 1` } } });
    edges.push({ from: i === 1 ? "received" : `s${i - 1}`, to: `s${i}` });
  }
  return { id, vertices, edges };
}

async function prepare(engines, steps, tag) {
  const workflowId = `bench-chain-${RUN}-${tag}-${steps}`;
  for (const engine of engines) await api(engine.url, "PUT", `/v1/workflows/${workflowId}`, definition(workflowId, steps));
  return workflowId;
}

/** One execution at a time, the engines alternating run by run. */
async function latency(engines, steps) {
  const workflowId = await prepare(engines, steps, "latency");
  const samples = Object.fromEntries(engines.map((e) => [e.mode, []]));
  for (let run = 0; run < RUNS; run++) {
    for (const engine of run % 2 === 0 ? engines : [...engines].reverse()) {
      const sentAt = Date.now();
      const { executionId } = await api(engine.url, "POST", `/v1/workflows/${workflowId}/trigger`, { n: run });
      const trace = await waitFinished(engine, executionId, Date.now() + 30_000, 10);
      samples[engine.mode].push(Date.parse(trace.finishedAt) - sentAt);
    }
  }
  return Object.fromEntries(
    Object.entries(samples).map(([mode, ms]) => [mode, { p50: percentile(ms, 0.5), max: Math.max(...ms), runs: ms.length }]),
  );
}

/** `N` executions of the longest chain at `CONCURRENCY`, on one engine. */
async function throughput(engine, steps) {
  const workflowId = await prepare([engine], steps, `load-${engine.mode}`);
  const load = await runLoad({
    concurrency: CONCURRENCY,
    maxRequests: N,
    keepResults: true,
    request: (i) => ({
      url: `${engine.url}/v1/workflows/${workflowId}/trigger`,
      init: { method: "POST", headers: HEADERS, body: JSON.stringify({ n: i }) },
    }),
  });
  const ids = load.results.filter((r) => r.status === 202).map((r) => r.body.executionId);
  const deadline = Date.now() + 120_000;
  const created = [];
  const finished = [];
  for (const id of ids) {
    const trace = await waitFinished(engine, id, deadline);
    created.push(Date.parse(trace.createdAt));
    finished.push(Date.parse(trace.finishedAt));
  }
  const spanS = (Math.max(...finished) - Math.min(...created)) / 1000;
  const latencies = finished.map((f, i) => f - created[i]);
  return {
    accepted: ids.length,
    executionsPerSecond: ids.length / spanS,
    stepsPerSecond: (ids.length * steps) / spanS,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
  };
}

/** Poll one execution (every `pollMs`) until it COMPLETED; its trace, whose times are the engine's clock. */
async function waitFinished(engine, executionId, deadline, pollMs = 200) {
  while (Date.now() < deadline) {
    const trace = await api(engine.url, "GET", `/v1/executions/${executionId}`);
    if (trace.status === "COMPLETED") return trace;
    if (trace.status !== "RUNNING") throw new Error(`execution ${executionId} ended ${trace.status}`);
    await sleep(pollMs);
  }
  throw new Error(`execution ${executionId} did not finish in time`);
}

async function main({ dir, info }) {
  const engines = [];
  for (const mode of ["on", "off"]) {
    const persistTo = join(dir, `engine-${mode}`);
    // The shards migrated in this process, at once (scripts/lib/local-migrate.mjs, as npm start).
    await migrateLocalDatabases({ persistTo, databases: readShards().shards.map((shard) => ({ label: shard.databaseName, ...shard })) });
    const envFile = join(dir, `engine-${mode}.env`);
    await writeFile(envFile, "PAYMENTS_KEY=sk_bench_chain_local\nWEBHOOK_SECRET=whsec_bench_chain_local\n");
    const worker = await startWorker({
      name: `engine-${mode}`,
      persistTo,
      envFile,
      vars: { ...LOCAL_TOKENS, CHAIN_STEPS: mode },
      logLevel: "warn",
      logFile: join(dir, `engine-${mode}.log`),
    });
    engines.push(Object.assign(worker, { mode }));
  }
  await Promise.all(engines.map((e) => waitForHealth(e, 120_000)));
  // Warm-up: isolates, the workflow cache, the queue consumer.
  const warm = await prepare(engines, 2, "warm");
  for (const engine of engines) {
    for (let i = 0; i < 3; i++) {
      const { executionId } = await api(engine.url, "POST", `/v1/workflows/${warm}/trigger`, { n: i });
      await waitFinished(engine, executionId, Date.now() + 30_000, 10);
    }
  }

  const latencyRows = [];
  for (const steps of STEPS) {
    log(`latency, ${steps} steps…`);
    latencyRows.push({ steps, ...(await latency(engines, steps)) });
  }
  const longest = Math.max(...STEPS);
  const load = {};
  for (const engine of engines) {
    log(`throughput, ${longest} steps, chaining ${engine.mode}…`);
    load[engine.mode] = await throughput(engine, longest);
  }

  const after = machine().loadAverage1m;
  const table = [
    `bench:chain — ${new Date().toISOString()}, ${info.cpus} × ${info.cpuModel}, ` +
      `load average ${info.loadAverage1m} before / ${after} after`,
    "",
    markdownTable(
      ["steps after the entry", "chaining on: p50 / max ms", "chaining off: p50 / max ms", "on ÷ off (p50)"],
      latencyRows.map((r) => [
        String(r.steps),
        `${r.on.p50.toFixed(0)} / ${r.on.max.toFixed(0)}`,
        `${r.off.p50.toFixed(0)} / ${r.off.max.toFixed(0)}`,
        `${(r.on.p50 / r.off.p50).toFixed(2)}×`,
      ]),
    ),
    "",
    markdownTable(
      [`${longest} steps, ${N} executions at c${CONCURRENCY}`, "chaining on", "chaining off"],
      [
        ["end-to-end executions/s", load.on.executionsPerSecond.toFixed(1), load.off.executionsPerSecond.toFixed(1)],
        ["steps/s", load.on.stepsPerSecond.toFixed(0), load.off.stepsPerSecond.toFixed(0)],
        [
          "execution p50 / p99 ms (created → finished)",
          `${load.on.p50.toFixed(0)} / ${load.on.p99.toFixed(0)}`,
          `${load.off.p50.toFixed(0)} / ${load.off.p99.toFixed(0)}`,
        ],
      ],
    ),
  ].join("\n");
  console.log(table);
  const results = join(ROOT, "bench", "results");
  await mkdir(results, { recursive: true });
  const file = join(results, `chain-${RUN}.json`);
  await writeFile(file, JSON.stringify({ machine: info, loadAfter: after, runs: RUNS, latency: latencyRows, load }, null, 2));
  log(`raw results: ${file}`);
}

await runBench({ name: "chain", hardStopMs: HARD_STOP_MS }, main);
