#!/usr/bin/env node
/**
 * `npm run e2e`: end-to-end tests over HTTP, as a user would drive idemflow.
 *
 * Starts the engine and the demo destinations under `wrangler dev` on free ports with a TEMPORARY
 * --persist-to directory (your `npm start` state is never touched), loads workflows/*.json with
 * their demo URLs pointed at the temporary demo port, then runs the walkthrough's stories and the
 * 50-concurrent-duplicates story, asserting on what the demo destinations recorded.
 * Every answer of the engine is validated against its own OpenAPI document (GET /v1/openapi.json,
 * scripts/lib/openapi-check.mjs): an undocumented status or a body off the document fails the story.
 * So is every request, before it is sent: one the document does not accept fails the story unless it
 * is a deliberate negative test, marked `invalid: "why"` (and then it must be invalid).
 * The engine runs on the shards of wrangler.toml (D1_SHARDS, WORKSPACE_SHARDS: `dev` on shard 0,
 * `other` on shard 1), every one migrated; the last stories, once both workers are stopped, read each
 * shard's local database with `wrangler d1 execute` (one at a time) to check that a workspace's rows
 * are on its shard and on no other.
 * The demo's payments API confirms a charge by a signed webhook to the engine's event source
 * (charge-and-confirm): the demo is told the engine's port (chosen before either starts) and the
 * webhook secret with --var, and the engine gets the same secret and the source as `npm start` does.
 * The start (migrations, both workers healthy) has its own timeout and its own time in the report;
 * each story then runs within its own budget, and the run always ends with `N passed, N failed` alone
 * on a line, exiting non-zero iff anything failed (scripts/lib/e2e-runner.mjs: the budgets and their
 * variables). Nothing is retried. Every wait has a cap.
 */
import { createHash, createHmac, randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as wait } from "node:timers/promises";
import { describeLoadResult, loadWorkflows } from "./lib/load-workflows.mjs";
import {
  DEMO_CONFIG,
  ROOT,
  freePorts,
  queryD1,
  runWrangler,
  startWorker,
  stopAll,
  stopOneShots,
  waitForHealth,
} from "./lib/wrangler-dev.mjs";
import { describeSeedResult, seedPaymentsEventSource } from "./lib/demo-event-source.mjs";
import { describeShard, readShards } from "./lib/shards.mjs";
import { openApiChecker } from "./lib/openapi-check.mjs";
import { LOCAL_TOKENS } from "./lib/local-tokens.mjs";
import { browserStories } from "./lib/browser-stories.mjs";
import { storyRunner } from "./lib/e2e-runner.mjs";
import { migrateLocalDatabases } from "./lib/local-migrate.mjs";
import { orderWorkflow } from "./lib/order-workflow.mjs";
import { loadWalkthrough, rewriteBlock, walkthroughRunner } from "./lib/walkthrough.mjs";

const TOKEN = "dev-token";
const OTHER_TOKEN = "other-token";
/** The shards and placement of wrangler.toml, as the engine under test reads them. */
const SHARDS = readShards();
const PAYMENTS_KEY = "sk_e2e_canary_91c3";
const WEBHOOK_SECRET = "whsec_e2e_canary_5a0e";
/** The demo payments API signs its confirmations with it (Standard Webhooks: `whsec_` + base64). */
const PAYMENTS_WEBHOOK_SECRET = `whsec_${randomBytes(32).toString("base64")}`;
/** Seals workspace secrets (PUT /v1/secrets) in the temporary D1; fresh per run. */
const SECRETS_MASTER_KEY = randomBytes(32).toString("base64");
/** Distinct business ids per run, so a rerun against leftover state can never pass by accident. */
const RUN = Date.now().toString(36);

const log = (line = "") => process.stdout.write(`${line}\n`);
const verbose = process.argv.includes("--verbose");
/** `E2E_ONLY=text`: run only the stories whose name holds it (development; CI runs them all). */
const ONLY = process.env.E2E_ONLY;
/** `--screenshots`: the browser stories also write docs/img/inspector-*.png (the README's pictures). */
const screenshots = process.argv.includes("--screenshots");
/** Every line the engine printed: the browser stories check the token never reaches it. */
const engineLines = [];

let workers = [];
let stateDir;
async function shutdown(code) {
  await Promise.all([stopAll(), stopOneShots()]);
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
  process.exit(code);
}
let workerLogsShown = false;
const { test, start, finish, storySignal } = storyRunner({
  log,
  // The workflows' load runs with E2E_ONLY too: every other story needs it.
  only: (name) => !ONLY || name.includes(ONLY) || name.startsWith("every example") || name.startsWith("the demo payments"),
  onFailure: () => {
    if (verbose || workerLogsShown) return;
    workerLogsShown = true;
    for (const w of workers) if (w.exited()) log(`--- ${w.name} output ---\n${w.recentOutput()}`);
    log("(rerun with `npm run e2e -- --verbose` to see both workers' logs)");
  },
  shutdown,
});
/** A pause within a story: it ends, with the story, when the story overruns its budget. */
const sleep = (ms) => wait(ms, undefined, { signal: storySignal() });
process.on("SIGINT", () => void finish({ interrupted: "SIGINT", code: 130 }));
process.on("SIGTERM", () => void finish({ interrupted: "SIGTERM", code: 143 }));
process.on("uncaughtException", (error) => void finish({ interrupted: `an unexpected exception: ${error?.stack ?? error}` }));
process.on("unhandledRejection", (error) => void finish({ interrupted: `an unhandled rejection: ${error?.stack ?? error}` }));

// ---------------------------------------------------------------------------------------------
// Setup

let engine;
let demo;
let openapi;
await start(async ({ left }) => {
  const [original, copy] = await Promise.all([
    readFile(join(ROOT, "migrations", "0001_idempotency_keys.sql"), "utf8"),
    readFile(join(ROOT, "demo", "migrations", "0001_idempotency_keys.sql"), "utf8"),
  ]);
  if (original !== copy) {
    throw new Error(
      "demo/migrations/0001_idempotency_keys.sql differs from migrations/0001_idempotency_keys.sql: copy the engine's file over it",
    );
  }
  // The shard stories compare two workspaces' databases: they must be two.
  if (SHARDS.placement.shardOf("dev") === SHARDS.placement.shardOf("other")) {
    throw new Error(`wrangler.toml places dev and other on one shard (WORKSPACE_SHARDS "${SHARDS.vars.WORKSPACE_SHARDS ?? ""}")`);
  }
  stateDir = await mkdtemp(join(tmpdir(), "idemflow-e2e-"));
  // The engine's shards and the demo's database, at once in this process (scripts/lib/local-migrate.mjs).
  const demoDb = readShards({ config: DEMO_CONFIG }).shards[0];
  await migrateLocalDatabases({
    persistTo: stateDir,
    databases: [...SHARDS.shards, demoDb].map((db) => ({ label: db.databaseName, ...db })),
  });

  const echo = (tag) => (verbose ? (line) => log(`${tag} ${line}`) : undefined);
  // The demo first: the engine's outbound allowlist names the demo's (free) port. The engine's port is
  // chosen now, so the demo knows where to send its charge confirmations.
  const [enginePort] = await freePorts(1);
  demo = await startWorker({
    name: "demo",
    config: DEMO_CONFIG,
    persistTo: stateDir,
    vars: { ENGINE_URL: `http://127.0.0.1:${enginePort}`, PAYMENTS_WEBHOOK_SECRET },
    onLine: echo("[demo]"),
  });
  workers = [demo];
  engine = await startWorker({
    name: "engine",
    port: enginePort,
    persistTo: stateDir,
    testScheduled: true,
    vars: {
      OUTBOUND_ALLOWLIST: `localhost:${demo.port},127.0.0.1:${demo.port}`,
      PAYMENTS_KEY,
      WEBHOOK_SECRET,
      SECRETS_MASTER_KEY,
      // The local tokens: wrangler.toml holds none, and a CI checkout has no .dev.vars.
      ...LOCAL_TOKENS,
    },
    onLine: (line) => {
      engineLines.push(line);
      if (verbose) log(`[engine] ${line}`);
    },
  });
  workers = [engine, demo];
  log(`e2e: state in ${stateDir}; engine :${engine.port}, demo :${demo.port}`);
  log(
    `e2e: ${SHARDS.shards.length} shards, migrated; dev on ${describeShard(shardOf("dev"))}, other on ${describeShard(shardOf("other"))}`,
  );
  // Both within what is left of the start's timeout: a loaded machine takes minutes here, not a story's budget.
  await Promise.all([waitForHealth(engine, left()), waitForHealth(demo, left())]);
  log("e2e: both workers healthy");

  // The document first (public: no token), validated as OpenAPI 3.1; every later answer is checked against it.
  const described = await fetch(`${engine.url}/v1/openapi.json`, { signal: AbortSignal.timeout(left()) });
  const documentText = await described.text();
  if (described.status !== 200) throw new Error(`GET /v1/openapi.json answered ${described.status}: ${documentText.slice(0, 300)}`);
  openapi = await openApiChecker(JSON.parse(documentText));
  openapi.check("GET", "/v1/openapi.json", described.status, described.headers.get("content-type"), documentText);
  log(`e2e: GET /v1/openapi.json is valid OpenAPI 3.1 (${Object.keys(JSON.parse(documentText).paths).length} paths)`);
});

// The first two stories set up what every later one needs: when either fails, the rest are not run.
await test(
  "every example in workflows/ is accepted by PUT /v1/workflows/:id",
  async () => {
    await checkedFetch("GET", "/health", { headers: {} });
    const loaded = await loadWorkflows(engine.url, TOKEN, {
      rewrite: (text) => text.replaceAll("localhost:8788", `localhost:${demo.port}`),
      onRequest: (method, path, request) => openapi.checkRequest(method, path, request),
      onAnswer: (method, path, res, text) => openapi.check(method, path, res.status, res.headers.get("content-type"), text),
    });
    const rejected = loaded.filter((r) => !r.ok);
    if (rejected.length > 0) throw new Error(`rejected:\n${rejected.map(describeLoadResult).join("\n")}`);
  },
  { essential: true },
);
await test(
  "the demo payments provider's event source and its secret are saved in workspace dev, as npm start does",
  async () => {
    const seeded = await seedPaymentsEventSource(engine.url, TOKEN, {
      secret: PAYMENTS_WEBHOOK_SECRET,
      onRequest: (method, path, request) => openapi.checkRequest(method, path, request),
      onAnswer: (method, path, res, text) => openapi.check(method, path, res.status, res.headers.get("content-type"), text),
    });
    if (seeded.length !== 2 || seeded.some((r) => !r.ok)) {
      throw new Error(`the payments event source:\n${seeded.map(describeSeedResult).join("\n")}`);
    }
  },
  { essential: true },
);

// ---------------------------------------------------------------------------------------------
// HTTP helpers (the only way these tests touch idemflow)

/**
 * One request to the engine, checked against the OpenAPI document before it is sent (a request the
 * document does not accept fails the story) and its answer after. `invalid`: why this request is
 * deliberately outside the document (a negative test); it must then be invalid.
 */
async function api(method, path, { body, headers = {}, raw, invalid } = {}) {
  const sent = { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { "content-type": "application/json" } : {}), ...headers };
  const payload = raw ?? (body === undefined ? undefined : JSON.stringify(body));
  openapi.checkRequest(method, path, { headers: sent, body: payload, invalid });
  const res = await fetch(`${engine.url}${path}`, { method, headers: sent, body: payload, signal: storySignal(40_000) });
  const text = await res.text();
  openapi.check(method, path, res.status, res.headers.get("content-type"), text);
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON (e.g. an event stream)
  }
  return { status: res.status, headers: res.headers, json, text };
}

/**
 * A request `api()` cannot make (no token, a stream): the request and the answer are checked against the
 * document all the same. `invalid` as api()'s.
 */
async function checkedFetch(method, path, init, { invalid } = {}) {
  openapi.checkRequest(method, path, { headers: init.headers ?? {}, body: init.body, invalid });
  const res = await fetch(`${engine.url}${path}`, { method, signal: storySignal(30_000), ...init });
  openapi.check(method, path, res.status, res.headers.get("content-type"), await res.clone().text());
  return res;
}

async function demoGet(path) {
  const res = await fetch(`${demo.url}${path}`, { signal: storySignal(10_000) });
  if (!res.ok) throw new Error(`GET ${path} on the demo answered ${res.status}: ${await res.text()}`);
  return res.json();
}

const trigger = (workflowId, payload, query = "") => api("POST", `/v1/workflows/${workflowId}/trigger${query}`, { body: payload });

// Shards: each shard's local database, read beside the running engine (the e2e's state directory).

/** The shard (an entry of SHARDS.shards) wrangler.toml places a workspace on. */
function shardOf(workspace) {
  return SHARDS.shards[SHARDS.placement.shardOf(workspace)];
}
/**
 * The e2e's `wrangler d1 execute` runs, one at a time: two wrangler processes (or a late one of a story
 * that overran) never open one local database together. The reads run once both workers are stopped
 * (the last stories), so they never share a database with a running worker either: a `wrangler d1
 * execute` beside an engine that is writing fails now and then with "Failed to get session commit
 * token: internal error" (2 of 12 reads beside a stream of PUTs and triggers, 7 Dec 2026), and so
 * does a write of the engine's. Only bigExecution's one write runs beside the engine, before any story has run.
 */
let d1Queue = Promise.resolve();
function oneAtATime(fn) {
  // A story that overran queues no more: its calls still waiting are dropped, not run.
  const signal = storySignal();
  const run = d1Queue.then(() => {
    signal?.throwIfAborted();
    return fn();
  });
  d1Queue = run.catch(() => {});
  return run;
}
/** Run SQL on one shard's local database: one array of rows per statement. */
const onShard = (shard, sql) => oneAtATime(() => queryD1({ database: shard.databaseName, sql, persistTo: stateDir }));
const sqlText = (value) => `'${String(value).replaceAll("'", "''")}'`;

/** Poll the trace until the execution is finished (COMPLETED, FAILED or CANCELLED) or the cap passes. */
async function waitForExecution(executionId, capMs = 45_000, token = TOKEN) {
  const deadline = Date.now() + capMs;
  let last;
  while (Date.now() < deadline) {
    last = await api("GET", `/v1/executions/${executionId}`, { headers: { authorization: `Bearer ${token}` } });
    if (last.status === 200 && ["COMPLETED", "FAILED", "CANCELLED"].includes(last.json?.status)) return last.json;
    await sleep(300);
  }
  throw new Error(
    `execution ${executionId} did not finish within ${capMs / 1000}s; last answer ${last?.status}: ${last?.text?.slice(0, 600)}`,
  );
}

const stepOf = (trace, vertexId) => trace.steps?.find((s) => s.vertexId === vertexId);

/**
 * A public route tells an anonymous caller nothing (docs/ingress.md: every refusal is one 401
 * delivery-rejected); the engine's log names the reason, `public.refused` with its `code`.
 */
async function expectRefusalLogged(code) {
  const logged = () => engineLines.some((line) => line.includes('"public.refused"') && line.includes(`"${code}"`));
  for (const deadline = Date.now() + 5_000; !logged() && Date.now() < deadline;) await sleep(100);
  expect(logged(), `the engine's log names the refusal's reason: public.refused with code ${code}`);
}

function expect(condition, message) {
  if (!condition) throw new Error(message);
}
function expectEqual(actual, expected, what) {
  if (JSON.stringify(actual) !== JSON.stringify(expected)) {
    throw new Error(`${what}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Stories

/**
 * The inspector's big execution (bigExecution, below) is grown first, while the engine is idle
 * (nothing but the workflows' load has run): its one `wrangler d1 execute` write shares the database
 * with no write of the engine's. The browser story renders it later.
 */
let big;
await test("inspector (prepared first, the engine idle): an execution grown to 200 steps and 1,000 events in the local D1", async () => {
  big = await bigExecution();
});

await test("the same webhook twice: 202 then 200 with deduplicated: true, one execution, one charge", async () => {
  const orderId = `W-${RUN}`;
  const payload = { order: { id: orderId, total: 42 } };
  const first = await trigger("order-fulfilment", payload);
  expectEqual(first.status, 202, `first trigger status (${first.text.slice(0, 300)})`);
  expectEqual(first.json?.deduplicated, false, "first deduplicated");
  expectEqual(first.json?.identity, "fields", "identity");
  // Same order, different key order and an extra field: idempotencyFields: "order.id" decides.
  const second = await trigger("order-fulfilment", { order: { total: 42, id: orderId, note: "retried by the sender" } });
  expectEqual(second.status, 200, `second trigger status (${second.text.slice(0, 300)})`);
  expectEqual(second.json?.deduplicated, true, "second deduplicated");
  expectEqual(second.json?.executionId, first.json.executionId, "executionId of the duplicate");

  const trace = await waitForExecution(first.json.executionId);
  expectEqual(trace.status, "COMPLETED", `execution status (steps: ${JSON.stringify(trace.steps)})`);
  expectEqual(trace.duplicateDeliveries, 1, "duplicateDeliveries");
  expectEqual(trace.duplicatesStopped?.triggers, 1, "duplicatesStopped.triggers");
  const listed = await api("GET", `/v1/executions?workflowId=order-fulfilment&hadDuplicates=true&limit=100`);
  expect(
    listed.json.items.some((i) => i.executionId === first.json.executionId),
    "the list filter hadDuplicates finds it",
  );
  const charges = await demoGet(`/payments/charges?order=${orderId}`);
  expectEqual(charges.items.length, 1, "charges for the order");
  expectEqual(charges.items[0].idempotencyKey, `charge-${orderId}`, "the charge's key");
  const labels = await demoGet(`/shipping/labels?order=${orderId}`);
  expectEqual(labels.items.length, 1, "shipping labels for the order");
});

await test("a lost response (fault after commit) is retried with the same key: one charge, the retry is a replay", async () => {
  const orderId = `L-${RUN}`;
  const armed = await fetch(`${demo.url}/faults`, {
    method: "POST",
    body: JSON.stringify({ path: "/payments/charges", mode: "after-commit", count: 1 }),
  });
  expectEqual(armed.status, 201, "POST /faults status");
  const { fault } = await armed.json();

  const started = await trigger("order-fulfilment", { order: { id: orderId, total: 99 } });
  expectEqual(started.status, 202, `trigger status (${started.text.slice(0, 300)})`);
  const trace = await waitForExecution(started.json.executionId, 60_000);
  expectEqual(trace.status, "COMPLETED", `execution status (steps: ${JSON.stringify(trace.steps)})`);
  const charge = stepOf(trace, "charge");
  expect(charge && charge.attempt >= 2, `the charge step should have needed a second attempt; it shows ${JSON.stringify(charge)}`);
  expectEqual(charge.idempotencyKey, `charge-${orderId}`, "the persisted key");
  expectEqual(charge.output?.status, 201, "the charge step's final status (the replayed 201)");
  expectEqual(charge.output?.headers?.["idempotent-replayed"], "true", "the second attempt was answered by the destination's ledger");
  expectEqual(trace.duplicatesStopped?.destinationReplays, 1, "duplicatesStopped.destinationReplays");
  const stats = await api("GET", `/v1/stats?since=${new Date(Date.now() - 600_000).toISOString()}`);
  const fulfilment = stats.json.workflows.find((w) => w.workflowId === "order-fulfilment");
  expect(fulfilment?.destinationReplays >= 1, `GET /v1/stats counts the replay (${JSON.stringify(stats.json)})`);
  // Every attempt on record, each with the one key: the first saw the 502 and waited the backoff.
  const attempts = charge.attempts ?? [];
  expectEqual(attempts.length, charge.attempt, `attempts on record (${JSON.stringify(attempts)})`);
  expectEqual([...new Set(attempts.map((a) => a.idempotencyKey))].join(), `charge-${orderId}`, "the key of every attempt");
  expectEqual(attempts[0].outcome, "retried", "the first attempt's outcome");
  expectEqual(attempts[0].response?.status, 502, "the first attempt's answer");
  expectEqual(attempts[0].retryDelay?.reason, "backoff", "why the first attempt's retry waited");
  expectEqual(attempts.at(-1).outcome, "completed", "the last attempt's outcome");

  const faults = await demoGet("/faults");
  expectEqual(faults.items.find((f) => f.id === fault.id)?.fired, 1, "times the fault fired");
  const charges = await demoGet(`/payments/charges?order=${orderId}`);
  expectEqual(charges.items.length, 1, "charges after the lost response and its retry");
});

await test("cancel, then start over: the cancel stops a retrying charge, the start over re-sends its key, one charge", async () => {
  const orderId = `X-${RUN}`;
  // The charge commits, then its answer is lost, again and again: the step keeps retrying.
  const armed = await fetch(`${demo.url}/faults`, {
    method: "POST",
    body: JSON.stringify({ path: "/payments/charges", mode: "after-commit", count: 4 }),
  });
  expectEqual(armed.status, 201, "POST /faults status");
  const started = await trigger("order-fulfilment", { order: { id: orderId, total: 15 } });
  expectEqual(started.status, 202, `trigger status (${started.text.slice(0, 300)})`);
  const id = started.json.executionId;
  const deadline = Date.now() + 20_000;
  let charge;
  do {
    await sleep(150);
    charge = stepOf((await api("GET", `/v1/executions/${id}`)).json, "charge");
  } while (!(charge?.attempt >= 1 && charge.state === "DISPATCHED") && Date.now() < deadline);
  expectEqual(charge?.state, "DISPATCHED", `the charge waiting for its retry (${JSON.stringify(charge)})`);

  const cancelKey = `cancel-${RUN}`;
  const cancelled = await api("POST", `/v1/executions/${id}/cancel`, { headers: { "idempotency-key": cancelKey } });
  expectEqual(cancelled.status, 200, `cancel status (${cancelled.text.slice(0, 300)})`);
  expectEqual(cancelled.json.status, "CANCELLED", "cancel answer status");
  expectEqual(
    cancelled.json.cancelledSteps,
    [{ vertexId: "charge", state: "DISPATCHED", idempotencyKey: `charge-${orderId}` }],
    "in flight",
  );
  const replay = await api("POST", `/v1/executions/${id}/cancel`, { headers: { "idempotency-key": cancelKey } });
  expectEqual(replay.headers.get("idempotent-replayed"), "true", "a repeated cancel replays");
  const trace = (await api("GET", `/v1/executions/${id}`)).json;
  expectEqual(trace.status, "CANCELLED", "the cancelled execution");
  expectEqual(stepOf(trace, "charge").state, "CANCELLED", "the charge step");
  expectEqual(stepOf(trace, "ship"), undefined, "no shipping step");

  await fetch(`${demo.url}/faults`, { method: "DELETE" });
  const again = await api("POST", `/v1/executions/${id}/start-over`, { headers: { "idempotency-key": `restart-${RUN}` } });
  expectEqual(again.status, 202, `start over status (${again.text.slice(0, 300)})`);
  const restarted = await waitForExecution(again.json.executionId);
  expectEqual(restarted.status, "COMPLETED", `the start over (steps: ${JSON.stringify(restarted.steps)})`);
  expectEqual(stepOf(restarted, "charge").idempotencyKey, `charge-${orderId}`, "the start over's key");
  expectEqual(stepOf(restarted, "charge").output?.headers?.["idempotent-replayed"], "true", "the destination replayed the first charge");
  expectEqual((await demoGet(`/payments/charges?order=${orderId}`)).items.length, 1, "charges for the order");
  const late = await api("POST", `/v1/executions/${again.json.executionId}/cancel`, { headers: { "idempotency-key": `late-${RUN}` } });
  expectEqual(late.json?.code, "execution-not-cancellable", "cancel of a COMPLETED execution");
});

await test("failed, fixed, re-sent (reusePolicy after-failure): the re-send starts a new linked execution, one charge", async () => {
  const workflowId = `refund-${RUN}`;
  const charge = (headers) => ({
    id: workflowId,
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: { idempotencyFields: "order.id", reusePolicy: "after-failure" } },
      {
        id: "charge",
        type: "GATEWAY",
        config: {
          method: "POST",
          url: `${demo.url}/payments/charges`,
          headers: { "Idempotency-Key": "= 'refund-' & payload.order.id", ...headers },
          body: { order: "= payload.order.id", amount: "= payload.order.total" },
        },
      },
    ],
    edges: [{ from: "received", to: "charge" }],
  });
  // Version 1 forgets the API key: the payments API answers 401, the step fails for good.
  expectEqual((await api("PUT", `/v1/workflows/${workflowId}`, { body: charge({}) })).status, 201, "PUT version 1");
  const payload = { order: { id: `F-${RUN}`, total: 7 } };
  const first = await trigger(workflowId, payload);
  const failed = await waitForExecution(first.json.executionId);
  expectEqual(failed.status, "FAILED", "the first execution");
  // Fixed, and re-sent by the sender: the same identity, a new execution on the new version.
  const fixed = await api("PUT", `/v1/workflows/${workflowId}`, { body: charge({ Authorization: "Bearer {{ secrets.PAYMENTS_KEY }}" }) });
  expectEqual(fixed.status, 201, "PUT version 2");
  const again = await trigger(workflowId, payload);
  expectEqual(again.status, 202, `the re-sent trigger (${again.text.slice(0, 300)})`);
  expectEqual(again.json.deduplicated, false, "deduplicated");
  const done = await waitForExecution(again.json.executionId);
  expectEqual(done.status, "COMPLETED", `the new execution (steps: ${JSON.stringify(done.steps)})`);
  expectEqual(done.previousExecutionId, first.json.executionId, "previousExecutionId");
  expectEqual((await api("GET", `/v1/executions/${first.json.executionId}`)).json.supersededBy, again.json.executionId, "supersededBy");
  expectEqual((await demoGet(`/payments/charges?order=${payload.order.id}`)).items.length, 1, "charges for the order");
  expectEqual((await trigger(workflowId, payload)).json.deduplicated, true, "a third send is a duplicate of the completed one");
});

await test("legacy sync run twice (two test runs): one legacy order; the second run reads it and skips the write", async () => {
  const orderId = `LEG-${RUN}`;
  const runOnce = async () => {
    const res = await api("POST", "/v1/workflows/legacy-sync/test-runs", {
      body: { order: { id: orderId, total: 7 } },
      headers: { prefer: "wait=30" },
    });
    expect(res.status === 200 || res.status === 201 || res.status === 202, `test run status ${res.status}: ${res.text.slice(0, 300)}`);
    const id = res.json?.executionId;
    expect(typeof id === "string", `test run answered no executionId: ${res.text.slice(0, 300)}`);
    return waitForExecution(id);
  };
  const first = await runOnce();
  const second = await runOnce();
  expect(first.executionId !== second.executionId, "two test runs must be two executions");
  expectEqual(first.status, "COMPLETED", `first run (steps: ${JSON.stringify(first.steps)})`);
  expectEqual(second.status, "COMPLETED", `second run (steps: ${JSON.stringify(second.steps)})`);
  expectEqual(stepOf(first, "create")?.state, "COMPLETED", "first run's create step");
  expectEqual(stepOf(second, "create")?.state, "SKIPPED", "second run's create step");
  const orders = await demoGet(`/legacy/orders?external_id=${orderId}`);
  expectEqual(orders.items.length, 1, "legacy orders with the external_id");
});

await test("legacy sync whose write loses its response: the retry verifies first, finds the order and writes nothing", async () => {
  const orderId = `LOST-LEG-${RUN}`;
  // The legacy POST commits the order, then its answer is lost (502). The retry cannot carry a
  // key the legacy system understands; its verify probe (a GET of the order) runs first, finds
  // the order, and the step completes with the probe's answer instead of writing again.
  const armed = await fetch(`${demo.url}/faults`, {
    method: "POST",
    body: JSON.stringify({ path: "/legacy/orders", method: "POST", mode: "after-commit", count: 1 }),
  });
  expectEqual(armed.status, 201, "POST /faults status");
  const started = await api("POST", "/v1/workflows/legacy-sync/test-runs", { body: { order: { id: orderId, total: 3 } } });
  const trace = await waitForExecution(started.json?.executionId, 60_000);
  expectEqual(trace.status, "COMPLETED", `execution status (steps: ${JSON.stringify(trace.steps)})`);
  const create = stepOf(trace, "create");
  expectEqual(create?.state, "COMPLETED", "create step");
  expect(create.attempt >= 2, `create should have needed a second attempt: ${JSON.stringify(create)}`);
  expectEqual(create.output?.verified, "existing", "the create step's output marker (verified by the probe)");
  expectEqual(create.output?.status, 200, "the create step's final status (the probe's GET)");
  const orders = await demoGet(`/legacy/orders?external_id=${orderId}`);
  expectEqual(orders.items.length, 1, "legacy orders with the external_id");
});

await test("legacy sync racing itself (3 concurrent test runs): every run completes, one legacy order", async () => {
  const orderId = `RACE-${RUN}`;
  // The runs may all read "absent" before any writes: the unique external_id plus
  // conflictAsProcessed is what closes that window.
  const runs = await Promise.all(
    [1, 2, 3].map(() => api("POST", "/v1/workflows/legacy-sync/test-runs", { body: { order: { id: orderId, total: 1 } } })),
  );
  const traces = await Promise.all(runs.map((r) => waitForExecution(r.json?.executionId)));
  for (const trace of traces) expectEqual(trace.status, "COMPLETED", `a racing run (steps: ${JSON.stringify(trace.steps)})`);
  const orders = await demoGet(`/legacy/orders?external_id=${orderId}`);
  expectEqual(orders.items.length, 1, "legacy orders with the external_id");
});

await test("a streaming test run sends execution and step events until the execution finishes", async () => {
  const res = await checkedFetch("POST", "/v1/workflows/hello-transform/stream", {
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify({ name: `stream-${RUN}` }),
    signal: storySignal(30_000),
  });
  // A new execution answers 202 like a trigger does (200 would mean a deduplicated stream).
  expect(res.status === 202 || res.status === 200, `stream status ${res.status}`);
  expect((res.headers.get("content-type") ?? "").startsWith("text/event-stream"), `content-type ${res.headers.get("content-type")}`);
  const text = await res.text(); // the server ends the stream when the execution finishes
  const events = [...text.matchAll(/^event:\s*(.+)$/gm)].map((m) => m[1].trim());
  expect(events.includes("execution.started"), `events: ${events.join(", ")}`);
  expect(events.includes("step.completed"), `events: ${events.join(", ")}`);
  expectEqual(events.at(-1), "execution.finished", `last event (all: ${events.join(", ")})`);
});

await test("the event stream of a finished execution, resumed from a middle id: exactly the rest, then execution.finished", async () => {
  const started = await api("POST", "/v1/workflows/hello-transform/test-runs", { body: { name: `events-${RUN}` } });
  const id = started.json?.executionId;
  expect(id, `test run answered ${started.status}: ${started.text.slice(0, 300)}`);
  await waitForExecution(id);
  // Read with fetch and the token (EventSource cannot send Authorization).
  const read = async (headers = {}) => {
    const res = await checkedFetch("GET", `/v1/executions/${id}/events`, { headers: { authorization: `Bearer ${TOKEN}`, ...headers } });
    expectEqual(res.status, 200, "events status");
    const blocks = (await res.text()).split("\n\n").filter((b) => /^event:/m.test(b));
    return blocks.map((b) => ({ id: /^id: (.+)$/m.exec(b)?.[1], event: /^event: (.+)$/m.exec(b)[1] }));
  };
  const all = await read();
  expectEqual(all.at(-1)?.event, "execution.finished", `last event (all: ${all.map((e) => e.event).join(", ")})`);
  expect(
    all.some((e) => e.event === "attempt"),
    `no attempt event: ${all.map((e) => e.event).join(", ")}`,
  );
  const cut = Math.floor((all.length - 1) / 2);
  const resumed = await read({ "last-event-id": all[cut].id });
  expectEqual(resumed, all.slice(cut + 1), "the resumed stream");
});

await test("a signed webhook (v1, hook-bound) starts one execution, a resend dedupes; forged, unversioned, re-targeted: 401", async () => {
  const body = JSON.stringify({ event: { id: `evt-${RUN}`, type: "order.paid" } });
  // The documented scheme (docs/ingress.md): v1= hex(HMAC-SHA256(secret, "v1:<ts>:<workspace>:<workflow>:" + body)).
  const sign = (timestamp, { secret = WEBHOOK_SECRET, workspace = "dev", workflow = "signed-webhook" } = {}) =>
    `v1=${createHmac("sha256", secret).update(`v1:${timestamp}:${workspace}:${workflow}:${body}`).digest("hex")}`;
  const send = (headers, workspace = "dev") =>
    checkedFetch("POST", `/hooks/${workspace}/signed-webhook`, {
      headers: { "content-type": "application/json", ...headers },
      body,
    });
  const ts = String(Math.floor(Date.now() / 1000));
  const good = await send({ "x-idemflow-timestamp": ts, "x-idemflow-signature": sign(ts) });
  expectEqual(good.status, 202, `signed delivery (${await good.clone().text()})`);
  const { executionId } = await good.json();
  const again = await send({ "x-idemflow-timestamp": ts, "x-idemflow-signature": sign(ts) });
  expectEqual(again.status, 200, "resent delivery");
  expectEqual((await again.json()).deduplicated, true, "resent delivery deduplicated");
  const forged = await send({ "x-idemflow-timestamp": ts, "x-idemflow-signature": sign(ts, { secret: "not-the-secret" }) });
  expectEqual(forged.status, 401, "forged delivery");
  const unversioned = await send({ "x-idemflow-timestamp": ts, "x-idemflow-signature": sign(ts).slice(3) });
  expectEqual(unversioned.status, 401, "unversioned signature");
  expectEqual((await unversioned.json()).code, "delivery-rejected", "unversioned signature's code");
  await expectRefusalLogged("webhook-signature-version-unsupported");

  // Workspace `other` gets the same workflow and, as its OWN secret (PUT /v1/secrets), the same
  // signing secret value: the dev delivery still does not verify there, because it names dev.
  const asOther = { authorization: "Bearer other-token" };
  const definition = await readFile(join(ROOT, "workflows", "signed-webhook.json"), "utf8");
  const saved = await api("PUT", "/v1/workflows/signed-webhook", {
    raw: definition,
    headers: { ...asOther, "content-type": "application/json" },
  });
  expect(saved.status === 201 || saved.status === 200, `PUT the workflow into other: ${saved.status} ${saved.text.slice(0, 300)}`);
  const put = await api("PUT", "/v1/secrets/WEBHOOK_SECRET", { body: { value: WEBHOOK_SECRET }, headers: asOther });
  expectEqual(put.status, 200, `PUT /v1/secrets/WEBHOOK_SECRET as other (${put.text.slice(0, 300)})`);
  const listed = await api("GET", "/v1/secrets", { headers: asOther });
  expectEqual(
    listed.json?.items?.map((i) => i.name),
    ["WEBHOOK_SECRET"],
    "other's secret names",
  );
  expect(!listed.text.includes(WEBHOOK_SECRET), "GET /v1/secrets returned a value");
  const retargeted = await send({ "x-idemflow-timestamp": ts, "x-idemflow-signature": sign(ts) }, "other");
  expectEqual(retargeted.status, 401, "dev's delivery replayed at /hooks/other/signed-webhook");
  const ownDelivery = await send({ "x-idemflow-timestamp": ts, "x-idemflow-signature": sign(ts, { workspace: "other" }) }, "other");
  expectEqual(ownDelivery.status, 202, `a delivery signed for other (${await ownDelivery.clone().text()})`);

  const trace = await waitForExecution(executionId);
  expectEqual(trace.status, "COMPLETED", "signed execution");
});

await test("charge, then the signed confirmation delivered twice: one event (1 duplicate), the wait resumed once, shipped", async () => {
  const orderId = `CC-${RUN}`;
  const started = await trigger("charge-and-confirm", { order: { id: orderId, total: 42 } });
  expectEqual(started.status, 202, `trigger status (${started.text.slice(0, 300)})`);
  const id = started.json.executionId;
  // The demo answers the charge, then two seconds later posts its Standard-Webhooks-signed
  // confirmation to /events/dev/payments, twice with one webhook-id; the wait parks until then.
  const trace = await waitForExecution(id, 30_000);
  expectEqual(trace.status, "COMPLETED", `execution status (steps: ${JSON.stringify(trace.steps)})`);
  let deliveries = [];
  for (const deadline = Date.now() + 15_000; deliveries.length < 2 && Date.now() < deadline; await sleep(200)) {
    deliveries = (await demoGet(`/payments/webhooks?order=${orderId}`)).items;
  }
  expectEqual(
    deliveries.map((d) => d.status),
    [202, 200],
    `the demo's two deliveries (${JSON.stringify(deliveries)})`,
  );
  // The engine's answers, as the demo received them, match the OpenAPI document too.
  for (const d of deliveries) openapi.check("POST", "/events/dev/payments", d.status, "application/json", JSON.stringify(d.answer));
  const [first, second] = deliveries;
  expectEqual(second.webhookId, first.webhookId, "one webhook-id on both deliveries");
  expectEqual(first.answer.resumed, [id], "the first delivery resumed the wait");
  expectEqual([second.answer.deduplicated, second.answer.duplicates], [true, 1], "the second: a duplicate of the one event");
  expectEqual(second.answer.eventId, first.answer.eventId, "one event");
  const confirmed = stepOf(trace, "confirmed");
  expectEqual(confirmed?.output?.id, first.webhookId, "the wait's output is the event");
  expectEqual(confirmed?.output?.name, "payment.confirmed", "the event's name (the source's expression)");
  const charges = await demoGet(`/payments/charges?order=${orderId}`);
  expectEqual(charges.items.length, 1, "charges for the order");
  expectEqual(confirmed.output.data?.charge, charges.items[0].id, "the event's data names the charge");
  expectEqual((await demoGet(`/shipping/labels?order=${orderId}`)).items.length, 1, "shipping labels for the order");
  const waits = await api("GET", `/v1/waits?event=payment.confirmed&match=${orderId}`);
  expectEqual(waits.json?.waits, [], "no wait left open");
  // The public route refuses an unsigned delivery, recording nothing.
  const unsigned = await checkedFetch("POST", "/events/dev/payments", {
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ type: "charge.succeeded", data: { order: orderId } }),
  });
  expectEqual([unsigned.status, (await unsigned.json()).code], [401, "delivery-rejected"], "an unsigned delivery");
  await expectRefusalLogged("event-signature-missing");
});

await test("the typed client (clients/typescript): a refund waits, is listed, and one decision sent twice with one key", async () => {
  const { idemflowClient, newIdempotencyKey } = await import("../clients/typescript/index.js");
  // Every answer the client receives is checked against the OpenAPI document like api()'s.
  const checking = async (request) => {
    const path = new URL(request.url).pathname + new URL(request.url).search;
    const body = request.body === null ? undefined : await request.clone().text();
    openapi.checkRequest(request.method, path, { headers: Object.fromEntries(request.headers), body });
    const res = await fetch(request);
    openapi.check(request.method, path, res.status, res.headers.get("content-type"), await res.clone().text());
    return res;
  };
  const idemflow = idemflowClient({ baseUrl: engine.url, token: TOKEN, fetch: checking });
  const refundId = `RF-client-${RUN}`;
  const started = await idemflow.POST("/v1/workflows/{workflowId}/trigger", {
    params: { path: { workflowId: "refund-approval" } },
    body: { refund: { id: refundId, amount: 12 } },
  });
  expectEqual(started.response.status, 202, `trigger (${JSON.stringify(started.error ?? started.data)})`);
  let waits = [];
  for (const deadline = Date.now() + 15_000; waits.length === 0 && Date.now() < deadline; await sleep(200)) {
    const listed = await idemflow.GET("/v1/waits", { params: { query: { event: "refund.decided", match: refundId } } });
    waits = listed.data?.waits ?? [];
  }
  expectEqual(
    waits.map((w) => [w.executionId, w.vertexId]),
    [[started.data.executionId, "decision"]],
    "the open wait",
  );
  const key = newIdempotencyKey();
  const send = () =>
    idemflow.POST("/v1/events", {
      headers: { "Idempotency-Key": key },
      body: { name: "refund.decided", match: refundId, id: `client-${RUN}`, data: { decision: "approve" } },
    });
  const first = await send();
  const again = await send();
  expectEqual([first.response.status, first.data?.resumed], [202, [started.data.executionId]], "the decision resumed the wait");
  expectEqual([again.response.status, again.response.headers.get("idempotent-replayed")], [202, "true"], "the same key: a replay");
  const trace = await waitForExecution(started.data.executionId, 30_000);
  expectEqual(stepOf(trace, "refund")?.state, "COMPLETED", "approved: the refund route ran");
  const read = await idemflow.GET("/v1/executions/{executionId}", { params: { path: { executionId: started.data.executionId } } });
  expectEqual(read.data?.status, "COMPLETED", "the trace through the client");
});

/** The shards story's two executions, whose rows the last stories read in each shard's database. */
const shardRuns = [];
await test("shards: other's workflow runs on its shard (a queued retry, a duplicate, a replayed key), dev's on its own", async () => {
  const workflowId = `shards-${RUN}`;
  const definition = orderWorkflow({
    id: workflowId,
    gatewayId: "label",
    gateway: {
      method: "POST",
      url: `${demo.url}/shipping/labels`,
      headers: { "Idempotency-Key": "= $idempotencyKey('shard-label', payload.order.id)", "Content-Type": "application/json" },
      body: "= { 'order': payload.order.id }",
      retry: { maxAttempts: 5, backoff: "exponential", initialDelayMs: 1000 },
    },
    then: { id: "done", output: { label: "= steps.label.body.id" } },
  });
  const runs = [];
  for (const [workspace, token] of [
    ["other", OTHER_TOKEN],
    ["dev", TOKEN],
  ]) {
    const as = { authorization: `Bearer ${token}` };
    const saved = await api("PUT", `/v1/workflows/${workflowId}`, { body: definition, headers: as });
    expectEqual(saved.status, 201, `PUT the workflow as ${workspace} (${saved.text.slice(0, 300)})`);
    // The label's first answer is lost after it committed: the retry waits its backoff as a queue
    // message, which must bring it back to the workspace's shard.
    const armed = await fetch(`${demo.url}/faults`, {
      method: "POST",
      body: JSON.stringify({ path: "/shipping/labels", mode: "after-commit", count: 1 }),
    });
    expectEqual(armed.status, 201, "POST /faults status");
    const key = `shards-${workspace}-${RUN}`;
    const payload = { order: { id: `SH-${workspace}-${RUN}` } };
    const path = `/v1/workflows/${workflowId}/trigger`;
    const first = await api("POST", path, { body: payload, headers: { ...as, "idempotency-key": key } });
    expectEqual(first.status, 202, `${workspace}'s trigger (${first.text.slice(0, 300)})`);
    const duplicate = await api("POST", path, { body: payload, headers: as });
    expectEqual([duplicate.status, duplicate.json?.executionId], [200, first.json.executionId], `${workspace}'s duplicate trigger`);
    const replayed = await api("POST", path, { body: payload, headers: { ...as, "idempotency-key": key } });
    expectEqual(replayed.headers.get("idempotent-replayed"), "true", `${workspace}'s trigger with the same Idempotency-Key replays`);
    const trace = await waitForExecution(first.json.executionId, 60_000, token);
    expectEqual(trace.status, "COMPLETED", `${workspace}'s execution (steps: ${JSON.stringify(trace.steps)})`);
    const label = stepOf(trace, "label");
    expect(label?.attempt >= 2, `${workspace}'s label step should have needed a second attempt: ${JSON.stringify(label)}`);
    expectEqual(label.output?.headers?.["idempotent-replayed"], "true", `${workspace}'s retry was answered by the destination's ledger`);
    runs.push({ workspace, executionId: first.json.executionId, key });
  }
  const [other, dev] = runs;
  expectEqual((await api("GET", `/v1/executions/${other.executionId}`)).status, 404, "other's execution read with dev's token");
  const asOther = { authorization: `Bearer ${OTHER_TOKEN}` };
  expectEqual((await api("GET", `/v1/executions/${dev.executionId}`, { headers: asOther })).status, 404, "dev's execution read as other");

  // Their rows in each shard's database are read by the last stories, once the workers are stopped.
  shardRuns.push(...runs);
});

await test("50 concurrent identical triggers: one 202, 49 deduplicated 200s, one execution, exactly one charge", async () => {
  const orderId = `C50-${RUN}`;
  const body = { order: { id: orderId, total: 50 } };
  const answers = await Promise.all(Array.from({ length: 50 }, () => trigger("order-fulfilment", body)));
  const statuses = answers.map((a) => a.status);
  expectEqual(statuses.filter((s) => s === 202).length, 1, `202 answers (statuses: ${JSON.stringify(statuses)})`);
  expectEqual(statuses.filter((s) => s === 200).length, 49, "200 answers");
  expectEqual(answers.filter((a) => a.json?.deduplicated === true).length, 49, "deduplicated: true answers");
  const ids = new Set(answers.map((a) => a.json?.executionId));
  expectEqual(ids.size, 1, "distinct execution ids");
  const trace = await waitForExecution([...ids][0]);
  expectEqual(trace.status, "COMPLETED", `execution status (steps: ${JSON.stringify(trace.steps)})`);
  expectEqual(trace.duplicateDeliveries, 49, "duplicateDeliveries");
  const list = await api("GET", "/v1/executions?workflowId=order-fulfilment");
  const mine = (list.json?.items ?? []).filter((e) => e.executionId === [...ids][0]);
  expect(list.status !== 200 || mine.length <= 1, "the execution list shows the execution once");
  const charges = await demoGet(`/payments/charges?idempotencyKey=charge-${orderId}`);
  expectEqual(charges.items.length, 1, "charges under the order's key");
  const labels = await demoGet(`/shipping/labels?order=${orderId}`);
  expectEqual(labels.items.length, 1, "labels for the order");
});

await test("a schedule tick (wrangler dev --test-scheduled) runs the scheduled report", async () => {
  const tick = await fetch(`${engine.url}/__scheduled?cron=${encodeURIComponent("0 9 * * *")}`, { signal: storySignal(20_000) });
  expect(tick.status < 300, `/__scheduled answered ${tick.status}`);
  const deadline = Date.now() + 30_000;
  let finished;
  while (Date.now() < deadline && !finished) {
    const list = await api("GET", "/v1/executions?workflowId=scheduled-report");
    finished = (list.json?.items ?? []).find((e) => e.status === "COMPLETED");
    if (!finished) await sleep(400);
  }
  expect(finished, "no COMPLETED scheduled-report execution appeared within 30s");
  const trace = await waitForExecution(finished.executionId ?? finished.id);
  expectEqual(trace.identity, "schedule", "identity of a scheduled execution");
  expect(typeof stepOf(trace, "summary")?.output?.charges === "number", `summary output: ${JSON.stringify(stepOf(trace, "summary"))}`);

  // Replaying one tick (docs/ingress.md): two deliveries of 2026-01-05 09:00 carrying different
  // times (09:00:05, 09:04:00) are one scheduled minute, so one execution.
  const before = (await api("GET", "/v1/executions?workflowId=scheduled-report&limit=100")).json.items.length;
  for (const time of [Date.UTC(2026, 0, 5, 9, 0, 5), Date.UTC(2026, 0, 5, 9, 4, 0)]) {
    const replay = await fetch(`${engine.url}/cdn-cgi/local/scheduled?cron=${encodeURIComponent("0 9 * * *")}&time=${time}`, {
      signal: storySignal(20_000),
    });
    expect(replay.status < 300, `/cdn-cgi/local/scheduled answered ${replay.status}`);
  }
  const read = await api("GET", "/v1/workflows/scheduled-report");
  const runs = (read.json?.scheduleRuns ?? []).filter((r) => r.scheduledTime === "2026-01-05T09:00:00.000Z");
  expectEqual(runs.length, 1, `scheduled runs of the replayed minute: ${JSON.stringify(read.json?.scheduleRuns)}`);
  expectEqual(runs[0].status, "STARTED", "status of the replayed minute's run");
  const after = (await api("GET", "/v1/executions?workflowId=scheduled-report&limit=100")).json.items.length;
  expectEqual(after - before, 1, "executions started by two deliveries of one tick");
});

await test("erasure: DELETE a finished execution; GET says it was erased; the webhook resent in its window stays a duplicate", async () => {
  const orderId = `E-${RUN}`;
  const payload = { order: { id: orderId, total: 9 } };
  const first = await trigger("order-fulfilment", payload);
  expectEqual(first.status, 202, `first trigger status (${first.text.slice(0, 300)})`);
  const trace = await waitForExecution(first.json.executionId);
  expectEqual(trace.status, "COMPLETED", "execution status");
  const key = `erase-${RUN}`;
  const erased = await api("DELETE", `/v1/executions/${first.json.executionId}`, { headers: { "idempotency-key": key } });
  expectEqual(erased.status, 200, `DELETE status (${erased.text.slice(0, 300)})`);
  expectEqual(JSON.stringify(erased.json?.erased), JSON.stringify([first.json.executionId]), "erased ids");
  const replayed = await api("DELETE", `/v1/executions/${first.json.executionId}`, { headers: { "idempotency-key": key } });
  expectEqual(replayed.text, erased.text, "the same Idempotency-Key replays the erasure's answer");
  const gone = await api("GET", `/v1/executions/${first.json.executionId}`);
  expectEqual(gone.status, 404, "GET of the erased execution");
  expectEqual(gone.json?.code, "execution-not-retained", "its problem code");
  const again = await trigger("order-fulfilment", payload);
  expectEqual(again.status, 200, `the resent webhook (${again.text.slice(0, 300)})`);
  expectEqual(again.json?.deduplicated, true, "the resent webhook is a duplicate");
  const charges = await demoGet(`/payments/charges?order=${orderId}`);
  expectEqual(charges.items.length, 1, "charges for the order");
});

// docs/walkthrough.md, every command in page order, one story per section (scripts/lib/walkthrough.mjs):
// the page's ports, tokens and secrets rewritten to this run's; its `<!-- e2e: … -->` comments say
// where to wait and what each answer must say.
{
  const walkthrough = await loadWalkthrough(ROOT);
  const tmpDir = join(stateDir ?? tmpdir(), "walkthrough");
  await mkdir(tmpDir, { recursive: true });
  const runner = walkthroughRunner({
    root: ROOT,
    tmpDir,
    variables: walkthrough.variables,
    rewrite: (code) =>
      rewriteBlock(code, {
        enginePort: engine?.port,
        demoPort: demo?.port,
        webhookSecret: WEBHOOK_SECRET,
        paymentsWebhookSecret: PAYMENTS_WEBHOOK_SECRET,
        tmpDir,
      }),
  });
  for (const section of walkthrough.sections) {
    await test(`walkthrough §${section.number}: ${section.title}`, () => runner.runSection(section, { signal: storySignal() }), {
      budgetMs: 240_000,
    });
  }
}

await test("the storage figures answer an operator token only", async () => {
  const figures = await api("GET", "/v1/operator/storage", { headers: { authorization: "Bearer operator-token" } });
  expectEqual(figures.status, 200, `operator token (${figures.text.slice(0, 300)})`);
  expect(figures.json?.sizeBytes > 0, "sizeBytes");
  expect(figures.json?.executionsRetained > 0, "executionsRetained");
  // Each shard is its own database with its own limit: one entry per shard, never a sum.
  expectEqual(
    figures.json?.shards?.map((shard) => shard.binding),
    SHARDS.shards.map((shard) => shard.binding),
    "the shards of the storage figures",
  );
  expect(
    figures.json.shards.every((shard) => shard.executionsRetained > 0),
    `executions retained per shard: ${figures.json.shards.map((shard) => shard.executionsRetained).join(", ")}`,
  );
  const workspace = await api("GET", "/v1/operator/storage");
  expectEqual(workspace.status, 403, "a workspace token");
});

await test("the /v1 surface refuses what the document does not: a misspelt filter, a bad Idempotency-Key, an unserved method", async () => {
  const misspelt = await api("GET", "/v1/executions?staus=FAILED", { invalid: "`staus` is not a parameter of the list" });
  expectEqual([misspelt.status, misspelt.json?.code, misspelt.json?.unknown], [400, "query-parameter-unknown", ["staus"]], "?staus=");
  expect(misspelt.json?.known?.includes("status"), `the known parameters: ${JSON.stringify(misspelt.json?.known)}`);
  const listed = await api("GET", "/v1/executions?status=FAILED&limit=1");
  expectEqual(listed.status, 200, "?status= spelt right");
  const badKey = await api("POST", "/v1/events", {
    body: { name: "surface.check", match: `surface-${RUN}` },
    headers: { "idempotency-key": "a,b" },
    invalid: "a bare Idempotency-Key holds no comma",
  });
  expectEqual([badKey.status, badKey.json?.code], [400, "idempotency-key-invalid"], "Idempotency-Key: a,b");
  // A method no operation has is outside the document altogether: fetched raw, its answer read here.
  const unserved = await fetch(`${engine.url}/v1/workflows/order-fulfilment`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  expectEqual(
    [unserved.status, unserved.headers.get("allow"), (await unserved.json()).code],
    [405, "PUT, GET, HEAD", "method-not-allowed"],
    "DELETE /v1/workflows/{id}",
  );
});

await test("no secret value appears in any API answer (traces of every execution)", async () => {
  // The --var values win over .dev.vars (the signed-webhook story verifies with the e2e secret);
  // scan for the local .dev.vars values too, in case a build ever picked those up instead.
  const localSecrets = await readFile(join(ROOT, ".dev.vars"), "utf8")
    // Not the local tokens (API_TOKENS, OPERATOR_TOKENS): their public local values are in the docs and problem details.
    .then((text) => [...text.matchAll(/^\s*([A-Z_][A-Z0-9_]*)\s*=\s*(\S+)\s*$/gm)].filter((m) => !(m[1] in LOCAL_TOKENS)).map((m) => m[2]))
    .catch(() => []);
  const canaries = [PAYMENTS_KEY, WEBHOOK_SECRET, PAYMENTS_WEBHOOK_SECRET, SECRETS_MASTER_KEY, ...localSecrets];
  const sources = await api("GET", "/v1/event-sources");
  expectEqual(sources.status, 200, "GET /v1/event-sources");
  expect(
    canaries.every((secret) => !sources.text.includes(secret)),
    "a secret leaked into GET /v1/event-sources",
  );
  const list = await api("GET", "/v1/executions");
  expectEqual(list.status, 200, "GET /v1/executions");
  expect((list.json?.items ?? []).length > 0, "the execution list is empty");
  for (const item of list.json?.items ?? []) {
    const trace = await api("GET", `/v1/executions/${item.executionId ?? item.id}`);
    const leaked = canaries.filter((secret) => trace.text.includes(secret));
    expect(leaked.length === 0, `a secret leaked into the trace of ${item.executionId ?? item.id}`);
  }
});

// ---------------------------------------------------------------------------------------------
// The inspector, in a real browser (scripts/lib/browser-stories.mjs)

const arm = async (path, count) => {
  const armed = await fetch(`${demo.url}/faults`, { method: "POST", body: JSON.stringify({ path, mode: "after-commit", count }) });
  expectEqual(armed.status, 201, "POST /faults status");
};

/**
 * An execution of 200 steps and 1,000 events, for the inspector's render time. A definition is
 * capped at 50 vertices (src/definitions/vertex-rules.ts) and no real run produces 1,000
 * fenced-out writes, so a real one-step execution is grown in the e2e's own local D1 with
 * `wrangler d1 execute`: its version is pointed at a 201-vertex definition, and its one step row
 * and attempt row are copied to 199 more vertices, beside 1,000 step events.
 */
async function bigExecution() {
  const workflowId = `big-${RUN}`;
  const small = {
    id: workflowId,
    vertices: [
      { id: "received", type: "ENTRY_POINT", config: {} },
      { id: "t", type: "TRANSFORM", config: { output: { n: 1 } } },
    ],
    edges: [{ from: "received", to: "t" }],
  };
  const put = await api("PUT", `/v1/workflows/${workflowId}`, { body: small });
  expectEqual(put.status, 201, `PUT the workflow (${put.text.slice(0, 300)})`);
  const started = await trigger(workflowId, { run: RUN });
  const done = await waitForExecution(started.json.executionId);
  expectEqual(done.status, "COMPLETED", "the one-step execution");
  const id = started.json.executionId;
  const big = { ...small, vertices: [...small.vertices], edges: [...small.edges] };
  for (let i = 1; i < 200; i++) {
    big.vertices.push({ id: `c${i}`, type: "TRANSFORM", config: { output: { n: i } } });
    big.edges.push({ from: i % 10 === 1 ? "t" : `c${i - 1}`, to: `c${i}` });
  }
  const text = JSON.stringify(big);
  const version = createHash("sha256").update(text).digest("hex");
  const q = (v) => `'${String(v).replaceAll("'", "''")}'`;
  // 1..1000 (D1 refuses temporary tables: each statement numbers its own rows).
  const nums = "WITH RECURSIVE nums(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM nums WHERE i < 1000)";
  const sql = [
    `INSERT INTO workflow_versions (workspace, workflow_id, version, definition, schedule, created_at, step_inputs)
       SELECT workspace, workflow_id, ${q(version)}, ${q(text)}, NULL, created_at, NULL FROM workflow_versions
       WHERE workflow_id = ${q(workflowId)} LIMIT 1;`,
    `UPDATE executions SET version = ${q(version)} WHERE id = ${q(id)};`,
    `${nums} INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, retry_base, available_at, lease_until,
       idempotency_key, request, output, next_vertices, error, created_at, created_seq, updated_at, finished_at, resends, next_resend_at)
       SELECT execution_id, 'c' || i, workspace, state, epoch, attempt, retry_base, available_at, lease_until, idempotency_key,
       request, output, next_vertices, error, created_at + i, created_seq + i, updated_at + i, finished_at + i, resends, next_resend_at
       FROM steps, nums WHERE execution_id = ${q(id)} AND vertex_id = 't' AND i < 200;`,
    `${nums} INSERT INTO step_attempt_rows (execution_id, vertex_id, epoch, attempt, outcome, started_at, finished_at, idempotency_key,
       request, response_status, response, error, delay_ms, delay_reason)
       SELECT execution_id, 'c' || i, epoch, attempt, outcome, started_at + i, finished_at + i, idempotency_key, request,
       response_status, response, error, delay_ms, delay_reason
       FROM step_attempts, nums WHERE execution_id = ${q(id)} AND vertex_id = 't' AND i < 200;`,
    `${nums} INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
       SELECT ${q(id)}, 'c' || (1 + i % 199), CASE i % 2 WHEN 0 THEN 'fenced_out' ELSE 'redelivery_dropped' END, 1,
       ${Date.now()} + i, 'synthetic event ' || i FROM nums;`,
  ].join("\n");
  const file = join(stateDir, "big-execution.sql");
  await writeFile(file, sql);
  await oneAtATime(() => runWrangler(["d1", "execute", shardOf("dev").databaseName, "--local", "--persist-to", stateDir, "--file", file]));
  return { executionId: id, steps: 200 };
}

await browserStories({
  test,
  log,
  expect,
  expectEqual,
  api,
  trigger,
  waitForExecution,
  demoGet,
  arm,
  disarm: () => fetch(`${demo.url}/faults`, { method: "DELETE" }),
  bigExecution: async () => {
    if (!big) throw new Error("the big execution was not prepared: its story (the first after the workflows' load) failed or did not run");
    return big;
  },
  engineUrl: engine.url,
  demoUrl: demo.url,
  token: TOKEN,
  otherToken: OTHER_TOKEN,
  paymentsKey: PAYMENTS_KEY,
  run: RUN,
  screenshots,
  engineLog: () => engineLines,
});

await test("every answer of the engine matched its OpenAPI document", async () => {
  log(`      ${openapi.count()} answers validated against GET /v1/openapi.json`);
  const { requests, expectedInvalid } = openapi.requestCount();
  log(`      ${requests} requests validated against it before they were sent (${expectedInvalid} deliberately invalid, marked so)`);
  expect(openapi.count() > 100, `only ${openapi.count()} answers were validated`);
});

// ---------------------------------------------------------------------------------------------
// The shards' databases, read once both workers are stopped: no wrangler process shares a local
// database with a running worker (nor, oneAtATime, with another wrangler).

await stopAll();
workers = [];
log("e2e: both workers stopped; the shards' databases are read now");

await test("shards: each of the shards story's executions has its rows on its workspace's shard, none on any other", async () => {
  expectEqual(
    shardRuns.map((run) => run.workspace),
    ["other", "dev"],
    "the executions the shards story recorded",
  );
  const workflowId = `shards-${RUN}`;
  for (const { workspace, executionId, key } of shardRuns) {
    const id = sqlText(executionId);
    const scope = `workspace = ${sqlText(workspace)} AND workflow_id = ${sqlText(workflowId)}`;
    const sql = Object.entries({
      executions: `executions WHERE id = ${id}`,
      execution_identities: `execution_identities WHERE execution_id = ${id}`,
      steps: `steps WHERE execution_id = ${id}`,
      step_attempts: `step_attempts WHERE execution_id = ${id}`,
      step_events: `step_events WHERE execution_id = ${id}`,
      duplicates_logged: `executions, json_each(executions.duplicate_log) WHERE executions.id = ${id}`,
      workflows: `workflows WHERE ${scope}`,
      workflow_versions: `workflow_versions WHERE ${scope}`,
      idempotency_keys: `idempotency_keys WHERE principal = ${sqlText(workspace)} AND idem_key = ${sqlText(key)}`,
    })
      .map(([table, from]) => `SELECT '${table}' AS tbl, count(*) AS n FROM ${from};`)
      .join("\n"); // one statement each: D1 allows only a few terms in a compound SELECT
    for (const shard of SHARDS.shards) {
      const counts = Object.fromEntries((await onShard(shard, sql)).flat().map((row) => [row.tbl, row.n]));
      const where = `${workspace}'s rows on ${describeShard(shard)}: ${JSON.stringify(counts)}`;
      if (shard === shardOf(workspace)) {
        const one = ["executions", "execution_identities", "workflows", "workflow_versions", "idempotency_keys"];
        expect(
          one.every((table) => counts[table] === 1),
          `${where} (expected 1 each of ${one.join(", ")})`,
        );
        expect(counts.steps >= 2 && counts.step_attempts >= 2 && counts.duplicates_logged >= 1, where);
      } else {
        expect(
          Object.values(counts).every((n) => n === 0),
          `${where} (expected none: the workspace is on ${describeShard(shardOf(workspace))})`,
        );
      }
    }
  }
});

await test("shards: after the whole run, every workspace's rows are on its shard only, and shard 0 records where each lives", async () => {
  // Every table with a workspace column (the Idempotency-Key ledger: its principal, the workspace),
  // read from the schema, so a table a later migration adds is checked too. workspace_placements
  // is the placement record itself: on shard 0, naming every workspace.
  const [tables] = await onShard(SHARDS.shards[0], "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name");
  const has = (sql, column) => new RegExp(`(?:^|[(,])\\s*${column}\\s+TEXT\\b`, "im").test(sql ?? "");
  const scoped = tables
    .filter(({ name }) => name !== "workspace_placements")
    .flatMap(({ name, sql }) => (has(sql, "workspace") ? [[name, "workspace"]] : has(sql, "principal") ? [[name, "principal"]] : []));
  const names = scoped.map(([name]) => name);
  expect(
    ["workflows", "executions", "steps", "workspace_secrets", "idempotency_keys"].every((name) => names.includes(name)),
    `tables with a workspace column: ${names.join(", ")}`,
  );
  const sql = scoped
    .map(([name, column]) => `SELECT '${name}' AS tbl, ${column} AS workspace, count(*) AS n FROM ${name} GROUP BY ${column};`)
    .join("\n");
  const seen = new Map();
  for (const shard of SHARDS.shards) {
    const rows = (await onShard(shard, sql)).flat();
    const misplaced = rows.filter((row) => shardOf(row.workspace) !== shard);
    expect(misplaced.length === 0, `rows on ${describeShard(shard)} of a workspace placed elsewhere: ${JSON.stringify(misplaced)}`);
    for (const row of rows) seen.set(row.workspace, (seen.get(row.workspace) ?? 0) + row.n);
  }
  expect(seen.get("dev") > 0 && seen.get("other") > 0, `rows per workspace: ${JSON.stringify(Object.fromEntries(seen))}`);
  const [placed] = await onShard(
    SHARDS.shards[0],
    "SELECT workspace, shard FROM workspace_placements WHERE workspace IN ('dev', 'other') ORDER BY workspace",
  );
  expectEqual(
    placed,
    ["dev", "other"].map((workspace) => ({ workspace, shard: shardOf(workspace).index })),
    "shard 0's placement record",
  );
});

// ---------------------------------------------------------------------------------------------

await finish();
