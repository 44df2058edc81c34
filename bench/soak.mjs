// `npm run bench:soak [-- options]`: does the database stay flat? (issue 27, SPEC section 12)
//
// Starts, on free loopback ports and fresh temporary --persist-to directories (migrations applied
// first; outside connections off; wrangler's local trace collector off, as in bench/compare), the
// demo destinations (demo/wrangler.toml) and the engine (the repo's wrangler.toml), both served
// from bundled snapshots (bench/lib/snapshot.mjs) so that edits to the working tree during a run
// cannot reload them. `wrangler dev` fires no crons by itself, and its `--test-scheduled` route
// (`/__scheduled`) is a middleware injected when wrangler bundles, so a snapshot has none: the
// bench fires the minute cron through wrangler's own local route,
// `GET /cdn-cgi/local/scheduled?cron=*+*+*+*+*`, on its own clock.
//
// The workflow is the order fulfilment of workflows/order-fulfilment.json (entry → charge → ship,
// two Gateway calls to the demo destination; the charge key is a Stripe-profile key, so its send row
// is guarded and outlives its execution; the ship key is a header-form key and goes with it), or
// with `--workflow=order-charge` bench/compare's entry → charge (header-form key) → receipt.
//
// Modes (one per run):
//   (default)   the soak: `--rate` triggers/s (default 10, open loop) with unique order ids for
//               `--minutes` (default 6), retention 1m and dedupeWindow 1m; the cron every
//               `--cron-every` s (default 60, as production's `* * * * *`, first at 5 s); every 10 s a
//               sample of the database's size (GET /v1/operator/storage: D1's size_after, the pages
//               in use), the SQLite file's size, executions retained, RUNNING/FAILED executions
//               (GET /v1/executions?status=…, every page) and, read-only from the file with sqlite3,
//               tombstones and key sends. Every `--verify-every`-th execution (default 1: all) is
//               read with GET until it is COMPLETED, and every 20th of those again after it is due.
//               Checks: all completed (none RUNNING after a drain), none lost before its retention
//               ended, and the plateau — the last size sample within 10 % of the one at minute two
//               (`--plateau-from=<s>`: a later baseline, for a run whose longest-lived rows — key
//               sends hot for their retention plus KEY_MEMORY_HOT — reach their steady state later).
//               The size saws with the cron (a tick removes a period's worth at once), so the two
//               are compared at the same phase: keep (minutes × 60 − 120) a multiple of --cron-every.
//               The growth between them is split into guarded key sends (kept for good by default)
//               and tombstones, priced at their bytes per row (dbstat) at the end; beside the verdict
//               (which stays the whole size's), the plateau without the key filter's pages, whose
//               first generation is written block by block (docs/benchmarks.md, the 10/s runs).
//   --capacity  removal capacity: a backlog of `--backlog` (default 2,000) executions created at
//               c16 (closed loop: also the creation rate on this machine), retention 1m; once all are
//               due, ONE cron tick, then the sweep's continuation chain through the queue until
//               executions retained reaches zero: executions removed per minute, with
//               HISTORY_ARCHIVE off and on (a fresh engine each).
//   --bytes     bytes per execution on the local D1: `--n` (default 300) executions with the tiny
//               payload, then `--n` with a 10 KB payload, retention left at the defaults (nothing is
//               swept): (size after − size before) / n, and per table (sqlite3's dbstat). On a tree
//               without the operator route (to measure "before"), the size is dbstat's pages in use.
//
// Options: --rate=10 --minutes=6 --payload=tiny|10k --cron-every=60 --verify-every=1 --archive=on|off
// (soak; default on, as wrangler.toml) --workflow=order-fulfilment|order-charge --backlog=2000 --n=300
// --key-hot=<duration> (soak; test-only: the engine's KEY_MEMORY_HOT, so kept key sends move to the
// cold tier within the run — docs/history.md "Key memory: hot and cold"; default: wrangler.toml's)
// --key-retention=<duration> (soak; test-only: the retention the demo connectors' keys declare, over
// their profile's — Stripe's 24 h — with a retry schedule that fits in 1m (3 attempts, 5 s timeout)
// since a kept send stays hot for its key's retention plus
// KEY_MEMORY_HOT, migrations/0036: with --key-hot=1m --key-retention=1m a charge key goes cold 2 minutes
// after its first send, once its execution is swept).
// Prints markdown; raw figures go to bench/results/soak-<mode>-<run>.json.
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { DEMO_CONFIG, ROOT, applyMigrations, startWorker, stopAll, waitForHealth } from "../scripts/lib/wrangler-dev.mjs";
import { LOCAL_TOKENS } from "../scripts/lib/local-tokens.mjs";
import { loadDemoConnectors } from "../scripts/lib/load-workflows.mjs";
import { migrateShards } from "../scripts/lib/shards.mjs";
import { api, HEADERS } from "./lib/api.mjs";
import { percentile, runLoad } from "./lib/load.mjs";
import { bytesByObject, fileBytes, hasSqlite, journalMode, sqliteFile, sqliteRows } from "./lib/local-d1.mjs";
import { machine, markdownTable } from "./lib/report.mjs";
import { snapshotConfig } from "./lib/snapshot.mjs";

process.env.X_LOCAL_OBSERVABILITY ??= "false";

const args = process.argv.slice(2);
const flag = (name, fallback) => args.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback;
const has = (name) => args.includes(`--${name}`);
const MODE = has("capacity") ? "capacity" : has("bytes") ? "bytes" : "soak";
const RATE = Number(flag("rate", 10));
const MINUTES = Number(flag("minutes", 6));
const PAYLOAD = flag("payload", "tiny");
const CRON_EVERY_S = Number(flag("cron-every", 60));
const VERIFY_EVERY = Number(flag("verify-every", 1));
const SOAK_ARCHIVE = flag("archive", "on");
const WORKFLOW = flag("workflow", "order-fulfilment");
const BACKLOG = Number(flag("backlog", 2000));
const BYTES_N = Number(flag("n", 300));
const KEY_HOT = flag("key-hot", null);
const KEY_RETENTION = flag("key-retention", null);
const SAMPLE_EVERY_S = 10;
/** The sample the plateau is judged against (a multiple of the sampling period), and the margin. */
const PLATEAU_FROM_S = Number(flag("plateau-from", 120));
const BASELINE = PLATEAU_FROM_S === 120 ? "minute two" : `t = ${PLATEAU_FROM_S} s`;
const PLATEAU_MARGIN = 0.1;
/** How long, after the last trigger, the soak waits for every execution to finish and be observed. */
const DRAIN_MS = 120_000;
/** Triggers in flight before the driver skips a tick's trigger (and says so): the engine is not keeping up. */
const MAX_IN_FLIGHT = 256;
const RETENTION_MS = 60_000;
const RUN = Date.now().toString(36);
const HARD_STOP_MS = Number(flag("hard-stop", MODE === "soak" ? (MINUTES * 60 + 600) * 1000 : 1_800_000));

if (!["tiny", "10k"].includes(PAYLOAD)) throw new Error(`--payload is tiny or 10k, not ${PAYLOAD}`);
if (!["order-fulfilment", "order-charge"].includes(WORKFLOW)) throw new Error(`--workflow is order-fulfilment or order-charge`);
if (!(RATE > 0 && MINUTES > 0 && CRON_EVERY_S > 0 && VERIFY_EVERY >= 1)) throw new Error("--rate, --minutes, --cron-every, --verify-every");

const exec = promisify(execFile);
const log = (line) => console.error(`[bench:soak] ${new Date().toISOString().slice(11, 19)} ${line}`);
/** The cron tick: wrangler's own local route; it answers once the scheduled handler has returned. */
const CRON_PATH = "/cdn-cgi/local/scheduled?cron=*+*+*+*+*";
const OPERATOR = { authorization: "Bearer operator-token" };
const MB = (n) => (n / 1e6).toFixed(2);

// ---------------------------------------------------------------------------------------------
// The system: the demo destinations and the engine, from snapshots, on fresh state

let snapshots;

async function startSystem(dir, tag, vars) {
  const logs = join(dir, "logs");
  await mkdir(logs, { recursive: true });
  if (!snapshots) {
    log("bundling snapshots of the engine and the demo destinations…");
    const [engine, demo] = await Promise.all([
      snapshotConfig({ dir, logFile: join(logs, "engine-build.log"), name: "engine", config: join(ROOT, "wrangler.toml") }),
      snapshotConfig({ dir, logFile: join(logs, "demo-build.log"), name: "demo", config: DEMO_CONFIG }),
    ]);
    snapshots = { engine, demo };
  }
  const enginePersist = join(dir, `engine-${tag}`);
  const demoPersist = join(dir, `demo-${tag}`);
  await Promise.all([
    migrateShards({
      config: snapshots.engine,
      persistTo: enginePersist,
      logFile: join(logs, `${tag}-migrate.log`),
    }),
    applyMigrations({
      database: "idemflow-demo",
      config: snapshots.demo,
      persistTo: demoPersist,
      logFile: join(logs, `${tag}-migrate.log`),
    }),
  ]);
  const envFile = join(dir, `${tag}.env`);
  await writeFile(
    envFile,
    `SECRETS_MASTER_KEY=${randomBytes(32).toString("base64")}\nPAYMENTS_KEY=sk_bench_soak_local\nWEBHOOK_SECRET=whsec_bench_soak_local\n`,
  );
  const demo = await startWorker({
    name: `demo-${tag}`,
    config: snapshots.demo,
    persistTo: demoPersist,
    logLevel: "warn",
    logFile: join(logs, `${tag}-demo.log`),
  });
  const sweeps = [];
  const coldReads = [];
  const engine = await startWorker({
    name: `engine-${tag}`,
    config: snapshots.engine,
    persistTo: enginePersist,
    envFile,
    vars: { ...LOCAL_TOKENS, OUTBOUND_ALLOWLIST: `127.0.0.1:${demo.port}`, ...vars },
    // "log": the Worker's own lines (the sweep's report) come through, with wrangler's request lines.
    logLevel: "log",
    logFile: join(logs, `${tag}-engine.log`),
    // The sweep's own report, one line per invocation that removed something (src/history/cron.ts).
    onLine: (line) => {
      // The retention guard's reads of the cold tier (src/keys/recall.ts).
      if (line.includes('"keys.cold_read"')) coldReads.push(Date.now());
      if (!line.includes('"history.swept"')) return;
      try {
        sweeps.push({ at: Date.now(), ...JSON.parse(line.slice(line.indexOf("{"))) });
      } catch {
        // not a JSON line
      }
    },
  });
  await Promise.all([waitForHealth(demo, 120_000), waitForHealth(engine, 120_000)]);
  return { engine, demo, persistTo: enginePersist, sweeps, coldReads, logs, sqlite: () => sqliteFile(enginePersist) };
}

async function stopSystem(system) {
  await Promise.all([system.engine.stop(), system.demo.stop()]);
}

/** The workflow, pointed at the demo's port; `retention: true` sets 1m retention and a 1m dedupe window. */
function definition(system, id, { retention }) {
  const source =
    WORKFLOW === "order-fulfilment"
      ? join(ROOT, "workflows", "order-fulfilment.json")
      : join(ROOT, "bench", "compare", "order-charge.workflow.json");
  const body = JSON.parse(readFileSync(source, "utf8"));
  delete body.$schema;
  body.id = id;
  for (const vertex of body.vertices) {
    // A step through a connector takes its URL from the connector (saved with the demo's port: saveWorkflow).
    if (vertex.type === "GATEWAY" && vertex.config.url)
      vertex.config.url = vertex.config.url.replace(/^http:\/\/(localhost|127\.0\.0\.1):8788/, system.demo.url);
    if (vertex.type === "ENTRY_POINT" && retention) vertex.config.dedupeWindow = "1m";
  }
  if (retention) body.history = { completed: "1m", failed: "1m", cancelled: "1m" };
  return body;
}

async function saveWorkflow(system, id, options) {
  // The demo connectors order-fulfilment goes through, pointed at the demo's port.
  const connectors = await loadDemoConnectors(system.engine.url, "dev-token", {
    rewrite: (text) => {
      const connector = JSON.parse(text.replaceAll("http://localhost:8788", system.demo.url));
      // A test-only retention over the profile's, so kept key sends go cold within the run — with a
      // retry schedule that fits in it (the save refuses one that outlasts the retention: 28 s here).
      if (KEY_RETENTION && connector.key) {
        connector.key.retention = KEY_RETENTION;
        connector.retry = { maxAttempts: 3, backoff: "exponential", initialDelayMs: 1000, maxDelayMs: 5000, inProgressBudgetMs: 10_000 };
        connector.timeoutMs = 5000;
      }
      return JSON.stringify(connector);
    },
  });
  for (const c of connectors) if (!c.ok) throw new Error(`connector ${c.file} refused: ${JSON.stringify(c.answer)}`);
  await api(system.engine.url, "PUT", `/v1/workflows/${id}`, definition(system, id, options));
}

/** The order payload: `{"order":{"id","total"}}`, or the same order with line items to about 10 KB of JSON. */
function payload(kind, orderId, i) {
  const order = { id: orderId, total: 42 + (i % 100) };
  if (kind === "tiny") return { order };
  const items = [];
  let n = 0;
  const base = JSON.stringify({ order }).length;
  let size = base;
  while (size < 10_240 - 40) {
    const item = {
      sku: `SKU-${(i * 31 + n * 7) % 100000}`.padEnd(12, "0"),
      title: `Item ${n} of order ${orderId}`,
      quantity: 1 + ((i + n) % 5),
      unitPrice: 100 + ((i * 13 + n) % 9000),
      note: randomBytes(60).toString("base64"),
    };
    items.push(item);
    size += JSON.stringify(item).length + 1;
    n++;
  }
  return { order: { ...order, customer: { email: `customer-${i}@example.com`, country: "DE" }, items } };
}

function triggerRequest(system, workflowId, kind, orderId, i) {
  return {
    url: `${system.engine.url}/v1/workflows/${workflowId}/trigger`,
    init: { method: "POST", headers: HEADERS, body: JSON.stringify(payload(kind, orderId, i)) },
  };
}

async function storage(system) {
  const res = await fetch(`${system.engine.url}/v1/operator/storage`, { headers: OPERATOR, signal: AbortSignal.timeout(30_000) });
  if (!res.ok) throw new Error(`GET /v1/operator/storage answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
  return res.json();
}

/**
 * The database's pages in use: the operator route's figure, or — on an engine without that route
 * (a tree from before issue 27, to measure "before") — the same count read from the file (dbstat).
 */
async function sizeOf(system, file) {
  try {
    return { sizeBytes: (await storage(system)).sizeBytes, source: "operator route" };
  } catch {
    const objects = await bytesByObject(file);
    if (!objects) throw new Error("no operator route and no sqlite3: cannot read the database's size");
    return { sizeBytes: Object.values(objects).reduce((n, o) => n + o.bytes, 0), source: "dbstat" };
  }
}

/** Every execution of `workflowId` with `status` (all pages of 100): summaries. */
async function listAll(system, workflowId, status) {
  const items = [];
  let cursor;
  do {
    const query = new URLSearchParams({ workflowId, limit: "100" });
    if (status) query.set("status", status);
    if (cursor) query.set("cursor", cursor);
    const page = await api(system.engine.url, "GET", `/v1/executions?${query}`);
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

/** `GET /v1/executions/{id}`: `{ status, ok, body }`; status 0 when the request itself failed. */
async function getExecution(system, id) {
  try {
    const res = await fetch(`${system.engine.url}/v1/executions/${encodeURIComponent(id)}`, {
      headers: HEADERS,
      signal: AbortSignal.timeout(30_000),
    });
    return { status: res.status, ok: res.ok, body: await res.json().catch(() => null) };
  } catch {
    return { status: 0, ok: false, body: null };
  }
}

/** Fire the minute cron; the answer's status and how long the tick took. */
async function fireCron(system) {
  const t0 = performance.now();
  try {
    const res = await fetch(`${system.engine.url}${CRON_PATH}`, { signal: AbortSignal.timeout(120_000) });
    await res.arrayBuffer();
    return { status: res.status, ms: performance.now() - t0 };
  } catch (error) {
    return { status: 0, ms: performance.now() - t0, error: String(error) };
  }
}

/** Wait until no execution of `workflowId` is RUNNING (or the deadline); the last count. */
async function waitNoneRunning(system, workflowId, deadline) {
  for (;;) {
    const running = (await listAll(system, workflowId, "RUNNING")).length;
    if (running === 0 || Date.now() > deadline) return running;
    await sleep(1_000);
  }
}

/**
 * Tombstones and key sends, read-only from the file, and the key filter's pages (the `dbstat` of
 * `key_filter` and its indexes: the blocked Bloom filter of docs/history.md, which writes its first
 * generation block by block — a growth that stops at about 90 MB per generation). Null without
 * sqlite3 or outside WAL mode; the filter's bytes null when `dbstat` cannot be read.
 */
async function fileCounts(file, walOk) {
  if (!walOk) return null;
  const [rows, filter] = await Promise.all([
    sqliteRows(
      file,
      `SELECT (SELECT count(*) FROM execution_tombstones) AS tombstones,
              (SELECT count(*) FROM destination_key_sends) AS keySends,
              (SELECT count(*) FROM destination_key_sends WHERE guarded = 1) AS guardedKeySends`,
    ),
    sqliteRows(
      file,
      `SELECT coalesce(sum(pgsize), 0) AS bytes FROM dbstat
       WHERE name IN (SELECT name FROM sqlite_master WHERE tbl_name = 'key_filter')`,
    ),
  ]);
  const counts = rows?.[0];
  return counts ? { ...counts, keyFilterBytes: filter?.[0]?.bytes ?? null } : null;
}

/** Bytes per table, each with its indexes (dbstat names objects; sqlite_master maps an index to its table). */
async function bytesByTable(file) {
  const objects = await bytesByObject(file);
  const owners = await sqliteRows(file, "SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')");
  if (!objects || !owners) return null;
  const ownerOf = Object.fromEntries(owners.map((r) => [r.name, r.tbl_name]));
  const tables = {};
  for (const [name, { bytes }] of Object.entries(objects)) {
    const table = ownerOf[name] ?? name;
    tables[table] = (tables[table] ?? 0) + bytes;
  }
  return tables;
}

// ---------------------------------------------------------------------------------------------
// The soak

async function soak(dir) {
  const system = await startSystem(dir, "soak", { HISTORY_ARCHIVE: SOAK_ARCHIVE, ...(KEY_HOT ? { KEY_MEMORY_HOT: KEY_HOT } : {}) });
  const file = system.sqlite();
  const mode = await journalMode(file);
  const walOk = mode === "wal";
  if (!(await hasSqlite())) log("sqlite3 is not installed: tombstones and key sends are not sampled");
  else if (!walOk) log(`the SQLite file is in ${mode} mode, not WAL: not read beside the engine (tombstones, key sends: n/a)`);
  const workflowId = `soak-${RUN}`;
  await saveWorkflow(system, workflowId, { retention: true });
  // Warm-up: the isolate, the workflow cache, the destination (its executions are swept like the rest).
  for (let i = 0; i < 3; i++)
    await api(system.engine.url, "POST", `/v1/workflows/${workflowId}/trigger`, payload(PAYLOAD, `warm-${RUN}-${i}`, i));
  await waitNoneRunning(system, workflowId, Date.now() + 30_000);

  const durationMs = MINUTES * 60_000;
  const t0 = Date.now();
  const at = (ms) => sleep(Math.max(0, t0 + ms - Date.now()));
  let stopped = false;

  // Triggers: open loop at RATE per second.
  const triggers = { sent: 0, accepted: 0, skipped: 0, errors: 0, firstError: null, latencies: [] };
  const executions = new Map(); // executionId → { triggeredAt, order, observed, finishedAt, lost, ... }
  const toVerify = [];
  let inFlight = 0;
  const fire = async (i) => {
    inFlight++;
    const orderId = `soak-${RUN}-${i}`;
    const req = triggerRequest(system, workflowId, PAYLOAD, orderId, i);
    const sentAt = Date.now();
    try {
      const res = await fetch(req.url, { ...req.init, signal: AbortSignal.timeout(30_000) });
      const body = await res.json().catch(() => null);
      triggers.latencies.push(Date.now() - sentAt);
      if (res.status === 202 && body?.executionId) {
        triggers.accepted++;
        const entry = { id: body.executionId, triggeredAt: sentAt, order: orderId, checks: 0, next: sentAt + 2_000 };
        executions.set(body.executionId, entry);
        if (i % VERIFY_EVERY === 0) toVerify.push(entry);
      } else {
        triggers.errors++;
        triggers.firstError ??= `${res.status} ${JSON.stringify(body).slice(0, 200)}`;
      }
    } catch (error) {
      triggers.errors++;
      triggers.firstError ??= String(error);
    } finally {
      inFlight--;
    }
  };
  const pending = new Set();
  const triggerLoop = (async () => {
    const started = performance.now();
    for (;;) {
      const elapsed = performance.now() - started;
      if (elapsed >= durationMs) break;
      const due = Math.floor((elapsed / 1000) * RATE) + 1;
      while (triggers.sent < due) {
        const i = triggers.sent++;
        if (inFlight >= MAX_IN_FLIGHT) {
          triggers.skipped++;
          continue;
        }
        const p = fire(i);
        pending.add(p);
        void p.finally(() => pending.delete(p));
      }
      await sleep(Math.max(2, Math.floor(500 / RATE)));
    }
    await Promise.all(pending);
  })();

  // The verifier: GET each chosen execution until it is COMPLETED; a 404 (or an archived trace)
  // before that is an execution lost before its retention ended. Every 20th observed one is read
  // again once it is due (after its retention and the next cron): what GET answers for a swept one.
  const verify = {
    observed: 0,
    lost: [],
    failed: [],
    reads: 0,
    readErrors: 0,
    sweptChecks: { gone404: 0, archived: 0, stillThere: 0, other: 0, codes: {} },
  };
  const dueChecks = [];
  const verifyLoop = (async () => {
    const worker = async () => {
      while (!stopped || toVerify.length > 0) {
        const now = Date.now();
        const index = toVerify.findIndex((e) => e.next <= now);
        if (index < 0) {
          const recheck = dueChecks.findIndex((e) => e.next <= now);
          if (recheck >= 0) {
            const [entry] = dueChecks.splice(recheck, 1);
            const res = await getExecution(system, entry.id);
            const body = res.body;
            verify.reads++;
            if (res.status === 404) {
              verify.sweptChecks.gone404++;
              // `execution-not-retained` (its tombstone explains it) or `not-found` (no tombstone left).
              const code = body?.code ?? "?";
              verify.sweptChecks.codes[code] = (verify.sweptChecks.codes[code] ?? 0) + 1;
            } else if (res.ok && body?.archived === true) verify.sweptChecks.archived++;
            else if (res.ok) verify.sweptChecks.stillThere++;
            else verify.sweptChecks.other++;
            continue;
          }
          if (stopped && toVerify.length === 0) break;
          await sleep(100);
          continue;
        }
        const [entry] = toVerify.splice(index, 1);
        entry.checks++;
        const res = await getExecution(system, entry.id);
        const body = res.body;
        verify.reads++;
        if (res.status === 0 || res.status >= 500) {
          // The read failed (not an answer about the execution): read it again.
          verify.readErrors++;
          entry.next = Date.now() + 2_000;
          toVerify.push(entry);
        } else if (res.ok && body?.status === "COMPLETED" && body.archived !== true) {
          entry.observed = Date.now();
          entry.finishedAt = Date.parse(body.finishedAt);
          entry.createdAt = Date.parse(body.createdAt);
          verify.observed++;
          if (verify.observed % 20 === 0)
            dueChecks.push({ id: entry.id, next: entry.finishedAt + RETENTION_MS + CRON_EVERY_S * 1000 + 30_000 });
        } else if (res.ok && body?.status === "RUNNING") {
          entry.next = Date.now() + 2_000;
          toVerify.push(entry);
        } else if (res.ok && (body?.status === "FAILED" || body?.status === "CANCELLED")) {
          verify.failed.push({ id: entry.id, status: body.status });
        } else {
          verify.lost.push({ id: entry.id, status: res.status, archived: body?.archived === true, ageMs: Date.now() - entry.triggeredAt });
        }
      }
    };
    await Promise.all(Array.from({ length: 4 }, worker));
  })();

  // The cron: first at 5 s, then every CRON_EVERY_S (a tick that overran is followed at once).
  const crons = [];
  const cronLoop = (async () => {
    for (let k = 0; !stopped; k++) {
      await at(5_000 + k * CRON_EVERY_S * 1000);
      if (stopped) break;
      const tick = await fireCron(system);
      crons.push({ t: (Date.now() - t0) / 1000, ...tick });
    }
  })();

  // Samples every 10 s, from 0 to the end of the triggers.
  const samples = [];
  const sampleLoop = (async () => {
    for (let k = 0; k * SAMPLE_EVERY_S * 1000 <= durationMs; k++) {
      await at(k * SAMPLE_EVERY_S * 1000);
      const [figures, running, failed, counts] = await Promise.all([
        storage(system),
        listAll(system, workflowId, "RUNNING"),
        listAll(system, workflowId, "FAILED"),
        fileCounts(file, walOk),
      ]);
      const disk = fileBytes(file);
      const sample = {
        t: k * SAMPLE_EVERY_S,
        sizeBytes: figures.sizeBytes,
        fileBytes: disk.db,
        walBytes: disk.wal,
        retained: figures.executionsRetained,
        running: running.length,
        failed: failed.length,
        tombstones: counts?.tombstones ?? null,
        keySends: counts?.keySends ?? null,
        guardedKeySends: counts?.guardedKeySends ?? null,
        keyFilterBytes: counts?.keyFilterBytes ?? null,
        accepted: triggers.accepted,
      };
      samples.push(sample);
      log(
        `t=${sample.t}s size ${MB(sample.sizeBytes)} MB (file ${MB(sample.fileBytes)} MB) retained ${sample.retained} running ` +
          `${sample.running} tombstones ${sample.tombstones ?? "n/a"} triggered ${triggers.accepted}`,
      );
    }
  })();

  await Promise.all([triggerLoop, sampleLoop]);
  const triggersEndedAt = Date.now();
  log(
    `triggers done: ${triggers.accepted} accepted of ${triggers.sent} (${triggers.skipped} skipped, ${triggers.errors} errors); draining…`,
  );
  // Drain: every execution finished and every chosen one observed (the cron keeps running).
  const drainDeadline = Date.now() + DRAIN_MS;
  await waitNoneRunning(system, workflowId, drainDeadline);
  while (toVerify.length > 0 && Date.now() < drainDeadline) await sleep(500);
  const unobserved = toVerify.length;
  const runningAtEnd = (await listAll(system, workflowId, "RUNNING")).length;
  const failedAtEnd = await listAll(system, workflowId, "FAILED");
  // Let the due re-reads that fall inside the drain run, then stop.
  while (dueChecks.some((e) => e.next <= drainDeadline) && Date.now() < drainDeadline) await sleep(500);
  stopped = true;
  toVerify.length = 0;
  await Promise.all([verifyLoop, cronLoop]);
  const final = await storage(system);
  const finalCounts = await fileCounts(file, walOk);
  const tableBytes = walOk ? await bytesByTable(file) : null;
  await stopSystem(system);

  const observedList = [...executions.values()].filter((e) => e.observed);
  const latencies = observedList.map((e) => e.finishedAt - e.createdAt);
  const at120 = samples.find((s) => s.t === PLATEAU_FROM_S);
  const last = samples.at(-1);
  const drift = at120 ? (last.sizeBytes - at120.sizeBytes) / at120.sizeBytes : NaN;
  const plateau = Number.isFinite(drift) && Math.abs(drift) <= PLATEAU_MARGIN;
  // The same, without the key filter's pages (reported beside the verdict, which stays the whole size's).
  const unfiltered = (s) => (s?.keyFilterBytes == null ? NaN : s.sizeBytes - s.keyFilterBytes);
  const driftWithoutFilter = (unfiltered(last) - unfiltered(at120)) / unfiltered(at120);
  const completedAll = runningAtEnd === 0 && failedAtEnd.length === 0 && verify.failed.length === 0 && unobserved === 0;
  const noneLost = verify.lost.length === 0;
  const sweepRuns = system.sweeps.map((s) => ({ ...s, t: (s.at - t0) / 1000 }));
  return {
    mode: "soak",
    rate: RATE,
    minutes: MINUTES,
    payload: PAYLOAD,
    workflow: WORKFLOW,
    archive: SOAK_ARCHIVE,
    cronEveryS: CRON_EVERY_S,
    verifyEvery: VERIFY_EVERY,
    journalMode: mode,
    triggers: { ...triggers, latencies: undefined, p50: percentile(triggers.latencies, 0.5), p99: percentile(triggers.latencies, 0.99) },
    achievedRate: triggers.accepted / (durationMs / 1000),
    triggersEndedAt,
    samples,
    crons,
    sweepRuns,
    verify: { ...verify, chosen: Math.ceil(triggers.sent / VERIFY_EVERY), unobserved },
    executionLatency: { p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99) },
    runningAtEnd,
    failedAtEnd: failedAtEnd.length,
    final,
    finalCounts,
    tableBytes,
    growth: growthOf(samples, finalCounts, tableBytes),
    keyMemory: {
      hot: KEY_HOT ?? "wrangler.toml",
      retention: KEY_RETENTION ?? "the profiles'",
      movedCold: sweepRuns.reduce((n, s) => n + (s.keysMovedCold ?? 0), 0),
      coldWritten: sweepRuns.reduce((n, s) => n + (s.keysColdWritten ?? 0), 0),
      coldWriteFailed: sweepRuns.reduce((n, s) => n + (s.keysColdFailed ?? 0), 0),
      guardColdReads: system.coldReads.length,
      sends: triggers.accepted,
    },
    checks: {
      completedAll,
      noneLost,
      plateau,
      drift,
      at120: at120?.sizeBytes,
      last: last?.sizeBytes,
      driftWithoutFilter,
      filterFrom: at120?.keyFilterBytes ?? null,
      filterTo: last?.keyFilterBytes ?? null,
    },
  };
}

/**
 * What grew between minute two and the last sample (the same phase of the cron when the soak's
 * length minus two minutes is a multiple of its period): the size, and the rows that outlive their
 * executions — guarded key sends (kept for good by default, HISTORY_KEY_SENDS) and tombstones —
 * priced at their bytes per row at the end (dbstat: their tables' pages with their indexes, divided
 * by their rows).
 */
function growthOf(samples, finalCounts, tableBytes) {
  const from = samples.find((s) => s.t === PLATEAU_FROM_S);
  const to = samples.at(-1);
  if (!from || !to || to === from) return null;
  const minutes = (to.t - from.t) / 60;
  const perRow = (table, rows) => (tableBytes?.[table] && rows ? tableBytes[table] / rows : null);
  const keySendBytes = perRow("destination_key_sends", finalCounts?.keySends);
  const tombstoneBytes = perRow("execution_tombstones", finalCounts?.tombstones);
  const keySends = to.guardedKeySends === null ? null : to.guardedKeySends - from.guardedKeySends;
  const tombstones = to.tombstones === null ? null : to.tombstones - from.tombstones;
  return {
    minutes,
    sizeBytes: to.sizeBytes - from.sizeBytes,
    guardedKeySends: keySends,
    keySendBytesPerRow: keySendBytes,
    tombstones,
    tombstoneBytesPerRow: tombstoneBytes,
    explained: (keySends ?? 0) * (keySendBytes ?? 0) + (tombstones ?? 0) * (tombstoneBytes ?? 0),
  };
}

/** Whether minute two and the last sample sit at the same point of the cron's period (the size saws with it). */
const samePhase = (r) => (r.minutes * 60 - PLATEAU_FROM_S) % r.cronEveryS === 0;

function formatSoak(r) {
  const lines = [];
  lines.push(
    markdownTable(
      [
        "t (s)",
        "size (MB, pages in use)",
        "SQLite file (MB)",
        "executions retained",
        "RUNNING",
        "tombstones",
        "key sends (guarded)",
        "triggered",
      ],
      r.samples.map((s) => [
        String(s.t),
        MB(s.sizeBytes),
        MB(s.fileBytes),
        String(s.retained),
        String(s.running),
        s.tombstones === null ? "n/a" : String(s.tombstones),
        s.keySends === null ? "n/a" : `${s.keySends} (${s.guardedKeySends})`,
        String(s.accepted),
      ]),
    ),
  );
  lines.push("");
  const t = r.triggers;
  lines.push(
    `Triggers: ${t.accepted} accepted of ${t.sent} sent (${r.achievedRate.toFixed(2)}/s; ${t.skipped} skipped at the in-flight cap, ` +
      `${t.errors} errors${t.firstError ? `, first: ${t.firstError}` : ""}); trigger p50 / p99 ${t.p50} / ${t.p99} ms; ` +
      `execution created → finished p50 / p99 ${r.executionLatency.p50} / ${r.executionLatency.p99} ms.`,
  );
  const removedByCron = r.sweepRuns.filter((s) => s.via === "cron");
  const removedByQueue = r.sweepRuns.filter((s) => s.via === "queue");
  const sum = (list, k) => list.reduce((n, s) => n + (s[k] ?? 0), 0);
  lines.push(
    `Cron ticks: ${r.crons.length} (every ${r.cronEveryS} s from 5 s; each took ` +
      `${r.crons.map((c) => (c.ms / 1000).toFixed(1)).join(", ")} s). ` +
      `Sweep invocations that removed something: ${removedByCron.length} from the cron (${sum(removedByCron, "removed")} removed), ` +
      `${removedByQueue.length} continuations through the queue (${sum(removedByQueue, "removed")} removed); ` +
      `${sum(r.sweepRuns, "held")} held, ${sum(r.sweepRuns, "archiveFailed")} archive failures, ${sum(r.sweepRuns, "archived")} archived.`,
  );
  const v = r.verify;
  lines.push(
    `Verified by GET: ${v.observed} of ${v.chosen} chosen executions (every ${r.verifyEvery === 1 ? "one" : `${r.verifyEvery}th`}) seen ` +
      `COMPLETED before they were swept; lost ${v.lost.length}, FAILED/CANCELLED ${v.failed.length}, ` +
      `never seen finished ${v.unobserved}; ${v.reads} reads (${v.readErrors} failed reads, read again). ` +
      `Re-read once due (every 20th): ${v.sweptChecks.gone404} answered 404 ` +
      `(${
        Object.entries(v.sweptChecks.codes)
          .map(([code, n]) => `${n} ${code}`)
          .join(", ") || "none"
      }), ` +
      `${v.sweptChecks.archived} the archived trace, ` +
      `${v.sweptChecks.stillThere} still there, ${v.sweptChecks.other} other.`,
  );
  const k = r.keyMemory;
  if (k) {
    lines.push(
      `Key memory (KEY_MEMORY_HOT ${k.hot}, key retention ${k.retention}): ` +
        `${k.movedCold} kept key sends moved cold (${k.coldWritten} objects written, ` +
        `${k.coldWriteFailed} failed); the guard read the cold tier ${k.guardColdReads} times for ${k.sends} sends ` +
        `(${((1000 * k.guardColdReads) / Math.max(1, k.sends)).toFixed(2)} per 1,000).`,
    );
  }
  lines.push(
    `After the drain: ${r.runningAtEnd} RUNNING, ${r.failedAtEnd} FAILED; ` +
      `storage ${MB(r.final.sizeBytes)} MB, ${r.final.executionsRetained} retained.`,
  );
  const g = r.growth;
  if (g) {
    const perRow = (bytes) => (bytes ? Math.round(bytes) : "n/a");
    lines.push(
      `Growth from ${BASELINE} to the end (${g.minutes} min): ${MB(g.sizeBytes)} MB (${MB(g.sizeBytes / g.minutes)} MB/min); ` +
        `guarded key sends +${g.guardedKeySends ?? "n/a"} rows (${perRow(g.keySendBytesPerRow)} B/row), ` +
        `tombstones ${g.tombstones === null ? "n/a" : `${g.tombstones >= 0 ? "+" : ""}${g.tombstones}`} rows ` +
        `(${perRow(g.tombstoneBytesPerRow)} B/row): ${MB(g.explained)} MB of it; ` +
        `the rest ${MB(g.sizeBytes - g.explained)} MB.`,
    );
  }
  lines.push("");
  const c = r.checks;
  lines.push(
    `**Verdict:** every execution completed: ${c.completedAll ? "yes" : "NO"}; ` +
      `none lost before its retention ended: ${c.noneLost ? "yes" : "NO"}; ` +
      `plateau (last sample ${MB(c.last)} MB vs ${MB(c.at120)} MB at ${BASELINE}: ${(c.drift * 100).toFixed(1)} %, limit ±10 %): ` +
      `${c.plateau ? "yes" : "NO"} → **${c.completedAll && c.noneLost && c.plateau ? "PASS" : "FAIL"}**` +
      (samePhase(r)
        ? ""
        : ` (the two samples are not at the same phase of the cron: run --minutes=M with M × 60 − 120 a multiple of --cron-every)`),
  );
  if (Number.isFinite(c.driftWithoutFilter)) {
    lines.push(
      `Without the key filter (its pages ${MB(c.filterFrom)} MB at ${BASELINE}, ${MB(c.filterTo)} MB at the end: its first ` +
        `generation written block by block, a growth that stops at about 90 MB per generation — docs/history.md): ` +
        `${(c.driftWithoutFilter * 100).toFixed(1)} %.`,
    );
  }
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------
// Capacity: how fast the sweep removes a backlog

async function capacityRun(dir, archive) {
  const system = await startSystem(dir, `capacity-${archive}`, { HISTORY_ARCHIVE: archive });
  const workflowId = `capacity-${RUN}-${archive}`;
  await saveWorkflow(system, workflowId, { retention: true });
  for (let i = 0; i < 3; i++)
    await api(system.engine.url, "POST", `/v1/workflows/${workflowId}/trigger`, payload("tiny", `warm-${RUN}-${archive}-${i}`, i));
  await waitNoneRunning(system, workflowId, Date.now() + 30_000);
  log(`capacity (archive ${archive}): creating ${BACKLOG} executions at c16…`);
  const load = await runLoad({
    concurrency: 16,
    maxRequests: BACKLOG,
    keepResults: true,
    request: (i) => triggerRequest(system, workflowId, "tiny", `cap-${RUN}-${archive}-${i}`, i),
  });
  const created = load.results.filter((r) => r.status === 202).length;
  const running = await waitNoneRunning(system, workflowId, Date.now() + 180_000);
  const all = await listAll(system, workflowId);
  const backlog = all.filter((e) => Date.parse(e.createdAt) >= load.startedAt);
  const createdTimes = backlog.map((e) => Date.parse(e.createdAt));
  const finishedTimes = backlog.filter((e) => e.finishedAt).map((e) => Date.parse(e.finishedAt));
  const creationSpanS = (Math.max(...finishedTimes) - Math.min(...createdTimes)) / 1000;
  const creation = {
    created,
    completed: backlog.filter((e) => e.status === "COMPLETED").length,
    running,
    triggersPerSecond: created / (load.elapsedMs / 1000),
    completedPerSecond: finishedTimes.length / creationSpanS,
  };
  log(
    `capacity (archive ${archive}): ${creation.completed} completed at ${creation.completedPerSecond.toFixed(1)}/s; ` +
      "waiting until all are due…",
  );
  // Due: retention after finishing, and the identity's window (1m) after creation, plus a margin.
  const dueAt = Math.max(Math.max(...finishedTimes) + RETENTION_MS, Math.max(...createdTimes) + RETENTION_MS) + 3_000;
  await sleep(Math.max(0, dueAt - Date.now()));
  const before = await storage(system);
  const file = system.sqlite();
  const walOk = (await journalMode(file)) === "wal";
  const tablesBefore = walOk ? await bytesByTable(file) : null;
  log(`capacity (archive ${archive}): ${before.executionsRetained} retained, ${MB(before.sizeBytes)} MB; one cron tick…`);
  const t0 = Date.now();
  const sweepsBefore = system.sweeps.length;
  const cron = fireCron(system);
  const progress = [];
  let last = before.executionsRetained;
  let lastChange = Date.now();
  for (;;) {
    await sleep(250);
    const figures = await storage(system);
    progress.push({ t: (Date.now() - t0) / 1000, retained: figures.executionsRetained, sizeBytes: figures.sizeBytes });
    if (figures.executionsRetained !== last) {
      last = figures.executionsRetained;
      lastChange = Date.now();
    }
    if (figures.executionsRetained === 0 || Date.now() - lastChange > 60_000) break;
  }
  const tick = await cron;
  // The first poll that saw the final count (polls are 250 ms apart: up to that late).
  const firstZero = progress.find((p) => p.retained === last);
  const drainedS = firstZero.t;
  const removed = before.executionsRetained - last;
  const after = await storage(system);
  const counts = await fileCounts(file, walOk);
  const tablesAfter = walOk ? await bytesByTable(file) : null;
  const runs = system.sweeps.slice(sweepsBefore).map((s) => ({ ...s, t: (s.at - t0) / 1000 }));
  await stopSystem(system);
  return {
    archive,
    creation,
    before,
    after,
    removed,
    left: last,
    drainedS,
    perMinute: (removed / drainedS) * 60,
    cronTick: tick,
    invocations: runs.map((s) => ({
      t: s.t,
      via: s.via,
      removed: s.removed,
      archived: s.archived,
      passes: s.passes,
      drained: s.drained,
      continued: s.continued,
    })),
    progress,
    tombstones: counts?.tombstones ?? null,
    tombstoneBytes: tablesAfter?.execution_tombstones ?? null,
    keySendsKept: counts?.keySends ?? null,
    keySendBytes: tablesAfter?.destination_key_sends ?? null,
    tablesBefore,
    tablesAfter,
  };
}

function formatCapacity(runs) {
  const rows = runs.map((r) => [
    r.archive,
    `${r.creation.completed} (${r.creation.completedPerSecond.toFixed(1)}/s; triggers ${r.creation.triggersPerSecond.toFixed(1)}/s)`,
    `${r.removed}${r.left ? ` (${r.left} left)` : ""}`,
    r.drainedS.toFixed(0),
    r.perMinute.toFixed(0),
    (r.perMinute / 60).toFixed(1),
    `${r.invocations.filter((s) => s.via === "cron").length} + ${r.invocations.filter((s) => s.via === "queue").length}`,
    `${(r.cronTick.ms / 1000).toFixed(1)} s`,
    `${MB(r.before.sizeBytes)} → ${MB(r.after.sizeBytes)}`,
    r.tombstoneBytes && r.tombstones ? `${Math.round(r.tombstoneBytes / r.tombstones)}` : "n/a",
    r.keySendBytes && r.keySendsKept ? `${r.keySendsKept} (${Math.round(r.keySendBytes / r.keySendsKept)})` : "n/a",
  ]);
  const lines = [
    markdownTable(
      [
        "HISTORY_ARCHIVE",
        "backlog completed (c16 rate)",
        "removed",
        "cron → drained (s)",
        "removed / minute",
        "removed / s",
        "sweep invocations (cron + queue)",
        "the cron tick took",
        "size before → after (MB)",
        "bytes / tombstone (with index)",
        "guarded key sends kept (bytes / row)",
      ],
      rows,
    ),
    "",
  ];
  for (const r of runs) {
    lines.push(
      `- archive ${r.archive}: invocations ` +
        r.invocations
          .map((s) => `${s.via} @${s.t.toFixed(1)}s −${s.removed} (${s.passes} passes${s.continued ? ", continued" : ""})`)
          .join("; "),
    );
  }
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------
// Bytes per execution

async function bytes(dir) {
  const system = await startSystem(dir, "bytes", { HISTORY_ARCHIVE: "off" });
  const workflowId = `bytes-${RUN}`;
  // Retention and dedupe window left at the defaults (7d / 24h): nothing is swept, and no cron is fired.
  await saveWorkflow(system, workflowId, { retention: false });
  for (let i = 0; i < 5; i++)
    await api(system.engine.url, "POST", `/v1/workflows/${workflowId}/trigger`, payload("tiny", `warm-${RUN}-${i}`, i));
  await waitNoneRunning(system, workflowId, Date.now() + 30_000);
  const file = system.sqlite();
  const walOk = (await journalMode(file)) === "wal";
  const results = [];
  for (const kind of ["tiny", "10k"]) {
    const before = await sizeOf(system, file);
    const tablesBefore = walOk ? await bytesByTable(file) : null;
    const fileBefore = fileBytes(file);
    log(`bytes: ${BYTES_N} executions with the ${kind} payload…`);
    const load = await runLoad({
      concurrency: 8,
      maxRequests: BYTES_N,
      keepResults: true,
      request: (i) => triggerRequest(system, workflowId, kind, `bytes-${RUN}-${kind}-${i}`, i),
    });
    const created = load.results.filter((r) => r.status === 202).length;
    const running = await waitNoneRunning(system, workflowId, Date.now() + 120_000);
    await sleep(1_000);
    const after = await sizeOf(system, file);
    const tablesAfter = walOk ? await bytesByTable(file) : null;
    const fileAfter = fileBytes(file);
    const payloadBytes = JSON.stringify(payload(kind, `bytes-${RUN}-${kind}-0`, 0)).length;
    const perTable =
      tablesBefore && tablesAfter
        ? Object.fromEntries(
            Object.keys(tablesAfter)
              .map((name) => [name, (tablesAfter[name] - (tablesBefore[name] ?? 0)) / created])
              .filter(([, b]) => b !== 0)
              .sort((a, b) => b[1] - a[1]),
          )
        : null;
    results.push({
      sizeSource: after.source,
      payload: kind,
      payloadBytes,
      created,
      running,
      before: before.sizeBytes,
      after: after.sizeBytes,
      perExecution: (after.sizeBytes - before.sizeBytes) / created,
      filePerExecution: (fileAfter.db + fileAfter.wal - fileBefore.db - fileBefore.wal) / created,
      perTable,
    });
  }
  await stopSystem(system);
  return { mode: "bytes", n: BYTES_N, workflow: WORKFLOW, results };
}

function formatBytes(r) {
  const lines = [
    markdownTable(
      ["payload", "payload JSON bytes", "executions", "size before → after (MB)", "bytes / execution (pages in use)"],
      r.results.map((x) => [
        x.payload,
        String(x.payloadBytes),
        String(x.created),
        `${MB(x.before)} → ${MB(x.after)}`,
        `**${Math.round(x.perExecution)}**`,
      ]),
    ),
    "",
  ];
  lines.push(`Pages in use read from: ${r.results.map((x) => x.sizeSource).join(", ")}.`, "");
  const names = [...new Set(r.results.flatMap((x) => Object.keys(x.perTable ?? {})))];
  if (names.length > 0) {
    lines.push(
      markdownTable(
        ["table (with its indexes)", ...r.results.map((x) => `${x.payload}: bytes / execution`)],
        names.map((name) => [name, ...r.results.map((x) => String(Math.round(x.perTable?.[name] ?? 0)))]),
      ),
    );
  }
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------

/** The commit the snapshot was bundled from, and whether the working tree differed from it (read only). */
async function gitRevision() {
  try {
    const { stdout: head } = await exec("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT });
    const { stdout: status } = await exec("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: ROOT });
    const changed = status.split("\n").filter(Boolean).length;
    return `commit ${head.trim()}${changed > 0 ? ` + ${changed} changed files in the working tree` : ""}`;
  } catch {
    return "commit unknown";
  }
}

async function main() {
  const info = machine();
  const revision = await gitRevision();
  const header =
    `bench:soak ${MODE} — ${new Date().toISOString()}, ${revision}, ${info.cpus} × ${info.cpuModel}, ${info.memoryGiB} GiB, ` +
    `node ${info.node}, wrangler ${info.wrangler}, load average ${info.loadAverage1m} before`;
  log(header);
  const dir = await mkdtemp(join(tmpdir(), "idemflow-bench-soak-"));
  const hardStop = setTimeout(async () => {
    log(`hard stop after ${HARD_STOP_MS} ms`);
    await stopAll();
    process.exit(1);
  }, HARD_STOP_MS);
  let result;
  let text;
  try {
    if (MODE === "soak") {
      result = await soak(dir);
      text = formatSoak(result);
    } else if (MODE === "capacity") {
      const runs = [];
      for (const archive of ["off", "on"]) runs.push(await capacityRun(dir, archive));
      result = { mode: "capacity", backlog: BACKLOG, workflow: WORKFLOW, runs };
      text = formatCapacity(runs);
    } else {
      result = await bytes(dir);
      text = formatBytes(result);
    }
  } finally {
    clearTimeout(hardStop);
    await stopAll();
  }
  const after = machine().loadAverage1m;
  console.log(`${header} / ${after} after\n\n${text}`);
  const results = join(ROOT, "bench", "results");
  await mkdir(results, { recursive: true });
  const out = join(results, `soak-${MODE}-${RUN}.json`);
  await writeFile(out, JSON.stringify({ machine: info, revision, loadAfter: after, args, ...result }, null, 2));
  log(`raw results: ${out}; logs in ${join(dir, "logs")}`);
  // The Worker state is large and temporary; the logs stay for a look.
  await Promise.all(
    ["soak", "capacity-off", "capacity-on", "bytes"].flatMap((tag) =>
      [`engine-${tag}`, `demo-${tag}`].map((d) => rm(join(dir, d), { recursive: true, force: true })),
    ),
  );
  process.exit(result.checks && !(result.checks.completedAll && result.checks.noneLost && result.checks.plateau) ? 2 : 0);
}

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => void stopAll().then(() => process.exit(130)));
}

main().catch(async (error) => {
  log(error.stack ?? String(error));
  await stopAll();
  process.exit(1);
});
