#!/usr/bin/env node
/**
 * `npm start`: the whole of idemflow on your laptop.
 *
 *   1. creates .dev.vars (local secrets: the local tokens, demo secrets, a random SECRETS_MASTER_KEY) when it
 *      does not exist, and appends the names an older file lacks (API_TOKENS, OPERATOR_TOKENS, SECRETS_MASTER_KEY):
 *      wrangler.toml holds no token, so a deploy never serves the local ones (scripts/lib/local-tokens.mjs),
 *   2. applies the D1 migrations of the engine to every shard of D1_SHARDS (locally two databases,
 *      each its own SQLite file: workspace `dev` on shard 0, `other` on shard 1) and of the demo
 *      destinations — all three at once, in this process (./lib/local-migrate.mjs), saying how far each
 *      is every few seconds; wrangler's own `d1 migrations apply`, one database after the other, only
 *      if that fails (local state lives in .wrangler/state and survives restarts; `npm run reset` wipes it),
 *   3. starts the engine (`wrangler dev --port 8787 --test-scheduled`: HTTP, queue consumer, cron)
 *      and the demo destinations (`wrangler dev -c demo/wrangler.toml --port 8788`),
 *   4. waits for both /health routes, loads every workflows/*.json into workspace `dev`, and gives `dev`
 *      the demo payments provider's event source (its secret and demo/event-sources/payments.json),
 *   5. prints the URLs, the token, where each workspace lives and the next command. Ctrl-C stops everything it started.
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describeLoadResult, loadWorkflows } from "./lib/load-workflows.mjs";
import { describeSeedResult, seedPaymentsEventSource } from "./lib/demo-event-source.mjs";
import { LOCAL_TOKENS, ensureDevVars } from "./lib/local-tokens.mjs";
import { describeShard, migrateShards, readShards, tokenWorkspaces } from "./lib/shards.mjs";
import { migrateLocalDatabases } from "./lib/local-migrate.mjs";
import { DEMO_CONFIG, ROOT, WRANGLER, applyMigrations, portInUse, startWorker, stopAll, waitForHealth } from "./lib/wrangler-dev.mjs";

const ENGINE_PORT = 8787;
const DEMO_PORT = 8788;
/** Both Workers keep their local D1 here (the engine's default; the demo is pointed at it too). */
const STATE_DIR = join(ROOT, ".wrangler", "state");
const DEV_VARS = join(ROOT, ".dev.vars");
const DEV_VARS_CONTENT = `# Local secrets for \`npm start\` (wrangler dev reads this file). Gitignored; never commit real keys.
# The example workflows send PAYMENTS_KEY to the demo payments API and verify webhooks with WEBHOOK_SECRET
# (granted to workspace \`dev\` by SECRET_GRANTS in wrangler.toml).
PAYMENTS_KEY=sk_local_demo
WEBHOOK_SECRET=whsec_local_demo
`;
/** A fresh random key per laptop: it seals the workspace secrets (PUT /v1/secrets/NAME) in the local D1. */
const masterKeyLine = () =>
  `# Seals workspace secrets stored in D1. Losing it makes them unreadable: PUT them ` +
  `again.\nSECRETS_MASTER_KEY=${randomBytes(32).toString("base64")}\n`;
/** The lines .dev.vars needs, by name: an older file lacking one gets it appended. */
const REQUIRED_LINES = {
  API_TOKENS: () =>
    `# Bearer tokens of the local workspaces (token:workspace). Production sets its own: wrangler secret put API_TOKENS.\n` +
    `API_TOKENS=${LOCAL_TOKENS.API_TOKENS}\n`,
  OPERATOR_TOKENS: () => `# The local operator token (GET /v1/operator/storage).\nOPERATOR_TOKENS=${LOCAL_TOKENS.OPERATOR_TOKENS}\n`,
  SECRETS_MASTER_KEY: masterKeyLine,
};

const say = (line = "") => process.stdout.write(`${line}\n`);
const fail = (message) => {
  process.stderr.write(`\nnpm start: ${message}\n`);
  process.exit(1);
};

if (!existsSync(WRANGLER)) fail("wrangler is not installed. Run `npm install` first.");

for (const [port, what] of [
  [ENGINE_PORT, "engine"],
  [DEMO_PORT, "demo destinations"],
]) {
  if (await portInUse(port)) {
    fail(
      `port ${port} (for the ${what}) is already in use. Is another \`npm start\` running? Stop it (Ctrl-C in its terminal) and try again.`,
    );
  }
}

const devVarsResult = await ensureDevVars(DEV_VARS, { content: DEV_VARS_CONTENT, required: REQUIRED_LINES });
if (devVarsResult.created) {
  say(
    `created .dev.vars with the local tokens (API_TOKENS=${LOCAL_TOKENS.API_TOKENS}, OPERATOR_TOKENS=${LOCAL_TOKENS.OPERATOR_TOKENS}), ` +
      "local demo secrets PAYMENTS_KEY=sk_local_demo and WEBHOOK_SECRET=whsec_local_demo, and a random SECRETS_MASTER_KEY",
  );
} else if (devVarsResult.added.length > 0) {
  say(`added ${devVarsResult.added.join(", ")} to .dev.vars (local values; wrangler.toml holds no token)`);
}
const devVars = devVarsResult.vars;
const TOKEN = tokenWorkspaces(devVars).find(({ workspace }) => workspace === "dev")?.token;
if (!TOKEN)
  fail("API_TOKENS in .dev.vars gives no token for workspace `dev`: add `dev-token:dev` to it (or delete .dev.vars to start afresh).");

let config;
try {
  config = readShards();
} catch (error) {
  fail(error.message);
}
try {
  await migrateAll();
} catch (error) {
  fail(`migrations failed.\n${error.message}\nIf the local state is from an older build, \`npm run reset\` wipes it.`);
}
/**
 * The engine's shards and the demo's database, migrated at once in this process, with a progress line every
 * few seconds while it runs (a first start applies every migration three times); wrangler's one-by-one
 * `d1 migrations apply` if that path fails for another reason than a migration.
 */
async function migrateAll() {
  const demoDb = readShards({ config: DEMO_CONFIG }).shards[0];
  const databases = [
    ...config.shards.map((shard) => ({ label: describeShard(shard), ...shard })),
    { label: `the demo destinations (${demoDb.databaseName})`, ...demoDb },
  ];
  const what = `the engine's ${config.shards.length} shards, the demo's`;
  say(`applying D1 migrations to ${databases.length} local databases at once (${what})…`);
  const progress = new Map(databases.map((d) => [d.label, "checking"]));
  const began = Date.now();
  const ticker = setInterval(() => {
    const seconds = Math.round((Date.now() - began) / 1000);
    say(`  … ${seconds}s: ${[...progress].map(([label, state]) => `${label.replace(/ \(.*\)$/, "")} ${state}`).join(", ")}`);
  }, 3_000);
  try {
    await migrateLocalDatabases({
      persistTo: STATE_DIR,
      databases,
      onMigration: (database, name, index, count) => progress.set(database.label, `${index}/${count} (${name})`),
      onDone: (database, applied) => {
        progress.set(database.label, "done");
        const summary = applied.length === 0 ? "up to date" : `applied ${applied.length} (${applied[0]} … ${applied.at(-1)})`;
        say(`  ${database.label}: ${summary}`);
      },
    });
    say(`  migrated in ${((Date.now() - began) / 1000).toFixed(1)}s`);
  } catch (error) {
    if (/ failed: /.test(error.message) && error.cause) throw error;
    say(`  could not migrate in this process (${error.message}); applying with wrangler, one database after the other…`);
    await migrateShards({
      onMigrated: (shard, applied) =>
        say(`  ${describeShard(shard)}: ${applied.length === 0 ? "up to date" : `applied ${applied.length}`}`),
    });
    await applyMigrations({ database: "idemflow-demo", config: DEMO_CONFIG, persistTo: STATE_DIR });
  } finally {
    clearInterval(ticker);
  }
}

/** Where each workspace of the local API_TOKENS lives: "dev (dev-token) on shard 0 (DB → idemflow)". */
const placements = tokenWorkspaces(devVars).map(
  ({ token, workspace }) => `${workspace} (${token}) on ${describeShard(config.shards[config.placement.shardOf(workspace)])}`,
);

let stopping = false;
async function shutdown(exitCode) {
  // A second caller (Ctrl-C during shutdown, a failed wait) must not resume the startup flow.
  if (stopping) return new Promise(() => {});
  stopping = true;
  say("\nstopping the engine and the demo destinations…");
  await stopAll();
  say("stopped. Local state is kept in .wrangler/state (`npm run reset` wipes it).");
  process.exit(exitCode);
}
process.on("SIGINT", () => void shutdown(0));
process.on("SIGTERM", () => void shutdown(0));
process.on("SIGHUP", () => void shutdown(0));

let ready = false;
const prefixed = (tag) => (line) => {
  // wrangler prints its binding tables and hints on start; the request log lines are what matter.
  if (!ready && !/error|warn|✘|▲/i.test(line)) return;
  say(`${tag} ${line}`);
};

say("starting the engine on :8787 and the demo destinations on :8788 (the first start takes a while)…");
const engine = await startWorker({ name: "engine", port: ENGINE_PORT, testScheduled: true, onLine: prefixed("[engine]") });
const demo = await startWorker({ name: "demo", config: DEMO_CONFIG, port: DEMO_PORT, persistTo: STATE_DIR, onLine: prefixed("[demo]  ") });
for (const worker of [engine, demo]) {
  void worker.exitPromise.then((how) => {
    if (stopping) return;
    process.stderr.write(`\n${worker.name} exited unexpectedly (${JSON.stringify(how)}). Its last output:\n${worker.recentOutput()}\n`);
    void shutdown(1);
  });
}

try {
  await Promise.all([waitForHealth(engine), waitForHealth(demo)]);
} catch (error) {
  process.stderr.write(`\n${error.message}\n`);
  await shutdown(1);
}

say("loading workflows/*.json into workspace `dev`…");
const results = await loadWorkflows(engine.url, TOKEN);
for (const result of results) say(describeLoadResult(result));
const rejected = results.filter((r) => !r.ok).length;
if (rejected > 0) say(`  ${rejected} workflow(s) were not loaded (see above); the rest of idemflow keeps running.`);

// The demo payments API confirms charges with signed webhooks (charge-and-confirm): the event source
// that turns them into `payment.confirmed`, with the secret the demo signs with (demo/wrangler.toml).
say("creating the event source `payments` in workspace `dev` (the demo's payment confirmations)…");
for (const result of await seedPaymentsEventSource(engine.url, TOKEN)) say(describeSeedResult(result));

// Miniflare never fires Cron Triggers by itself. Deliver the every-minute tick (reaper, ledger and
// identity sweeps) through --test-scheduled, so a local engine heals lost messages and expired
// leases as a deployed one does. Other crons (workflow schedules) are delivered by hand.
const MINUTE_TICK = `${engine.url}/__scheduled?cron=${encodeURIComponent("* * * * *")}`;
const minuteTick = setInterval(() => {
  if (!stopping) fetch(MINUTE_TICK).catch(() => undefined);
}, 60_000);
minuteTick.unref();

ready = true;
say(`
idemflow is running.
  engine              http://localhost:${ENGINE_PORT}    token: ${TOKEN} (workspace dev)
  demo destinations   http://localhost:${DEMO_PORT}    payments, shipping, legacy orders, faults
  inspector           http://localhost:${ENGINE_PORT}/ui/    sign in with ${TOKEN}: where every duplicate was stopped
  shards              ${placements.join("\n                      ")}
                      one local database each (D1_SHARDS, WORKSPACE_SHARDS in wrangler.toml; docs/shards.md)

Try it (then see docs/walkthrough.md):
  curl -s -X POST http://localhost:${ENGINE_PORT}/v1/workflows/order-fulfilment/trigger \\
    -H 'Authorization: Bearer ${TOKEN}' -H 'Content-Type: application/json' \\
    -d '{"order":{"id":"A-1001","total":42}}'
  curl -s http://localhost:${DEMO_PORT}/payments/charges

The every-minute cron (reaper and sweeps) is ticked for you; deliver other crons by hand:
  curl -s 'http://localhost:${ENGINE_PORT}/__scheduled?cron=0+9+*+*+*'

Ctrl-C stops both Workers. Request logs follow.
`);
