#!/usr/bin/env node
/**
 * The engine's own JavaScript per duplicate trigger, apart from everything else (issue 47 point 3,
 * docs/ingress.md "What a duplicate costs in JavaScript"):
 *
 *   node bench/dup-js.mjs                      (about 20 s)
 *   node bench/dup-js.mjs --n=4000 --profile   (also writes a .cpuprofile: bench/lib/profile-inclusive.mjs reads it)
 *   node bench/dup-js.mjs --root=/tmp/before    (the same against another copy of the repo: src/, wrangler.toml)
 *
 * src/app.ts is bundled (esbuild, as wrangler does) and run under node with the bench:compare
 * trigger (`POST /v1/workflows/bench-dupcost/trigger`, the bench's order, `fields` identity), the
 * repo's wrangler.toml vars and a D1 stand-in that answers the start batch as D1 answers a
 * duplicate (the claim writes nothing, the execution row counts the duplicate, no step inserted).
 * So everything the engine's JS does for a duplicate runs — the middleware chain, the body read,
 * the identity, the plan, the first key, building the three statements, the answer — and nothing
 * else: no SQLite, no HTTP server, no D1 binding (its serialisation of the batch is workerd's, and
 * is measured by bench:compare's process CPU instead). The figure is process CPU (user + system)
 * per request over `n` sequential requests after a warm-up: stable on a loaded machine, unlike a
 * wall clock. Every answer is checked (200, deduplicated).
 */
import { build } from "esbuild";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Session } from "node:inspector/promises";

const args = process.argv.slice(2);
const option = (name, fallback) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
/** --root=<dir>: another copy of the repo's src/ (e.g. a commit's, from `git archive`) to compare against. */
const ROOT = option("root", join(import.meta.dirname, ".."));
const N = Number(option("n", "3000"));
const WARMUP = Number(option("warmup", "500"));
const PROFILE = args.includes("--profile");
const PAD = Number(option("pad", "0"));

const dir = mkdtempSync(join(tmpdir(), "idemflow-dup-js-"));
const entry = join(dir, "entry.ts");
writeFileSync(
  entry,
  `export { app } from ${JSON.stringify(join(ROOT, "src/app.ts"))};
   export { validateDefinition } from ${JSON.stringify(join(ROOT, "src/definitions/validate.ts"))};
   export { LATEST_MIGRATION } from ${JSON.stringify(join(ROOT, "src/shards/schema.ts"))};`,
);
const out = join(dir, "app.mjs");
await build({
  entryPoints: [entry],
  bundle: true,
  format: "esm",
  platform: "neutral",
  target: "es2022",
  outfile: out,
  sourcemap: "inline",
  mainFields: ["module", "main"],
  conditions: ["workerd", "worker", "import"],
  logLevel: "error",
});
const mod = await import(out);
const { app, validateDefinition, LATEST_MIGRATION } = mod;

// The definition as the bench saves it (validated: the stored form is the normalised one).
const document = JSON.parse(readFileSync(join(ROOT, "bench/compare/order-charge.workflow.json"), "utf8"));
delete document.$schema;
document.id = "bench-dupcost";
const validated = validateDefinition(document, { crons: [] });
if (!validated.ok) throw new Error(`definition: ${JSON.stringify(validated.errors).slice(0, 400)}`);
const definition = validated.definition;
const definitionJson = JSON.stringify(definition);

/** wrangler.toml's [vars]: its `NAME = "value"` lines (the file has no other kind there). */
function tomlVars(text) {
  const section = text.split(/^\[vars\]\s*$/m)[1]?.split(/^\[/m)[0] ?? "";
  return Object.fromEntries([...section.matchAll(/^([A-Z_0-9]+)\s*=\s*"([^"]*)"/gm)].map((m) => [m[1], m[2]]));
}
const vars = tomlVars(readFileSync(join(ROOT, "wrangler.toml"), "utf8"));
const executionId = "e".repeat(64);
let duplicates = 0;
/** The SQL texts of the last batch (`--dump-sql=<file>` writes them: what SQLite compiles per duplicate). */
let lastBatch = [];

/** A D1 stand-in: the reads a warm isolate makes once, and the start batch answered as a duplicate. */
function stubD1() {
  const answer = (sql) => {
    if (sql.includes("d1_migrations")) return [{ name: LATEST_MIGRATION }];
    if (sql.includes("FROM workspace_placements")) return [{ shard: 0 }];
    if (sql.includes("FROM workflows w JOIN workflow_versions v"))
      return [{ workspace: "dev", workflow_id: "bench-dupcost", version: "v-bench", definition: definitionJson, created_at: 0 }];
    if (sql.startsWith("INSERT INTO executions")) {
      duplicates++;
      return [{ id: executionId, status: "COMPLETED", duplicate_deliveries: duplicates, last_duplicate_at: Date.now(), sealed: null }];
    }
    return [];
  };
  const result = (sql) => ({ results: answer(sql), success: true, meta: { rows_written: 0, rows_read: 0, duration: 0 } });
  const statement = (sql) => ({
    sql,
    bind: (...values) => ({ ...statement(sql), values }),
    first: async (column) => {
      const row = answer(sql)[0] ?? null;
      return column === undefined || row === null ? row : row[column];
    },
    all: async () => result(sql),
    run: async () => result(sql),
    raw: async () => answer(sql).map((row) => Object.values(row)),
  });
  return {
    prepare: (sql) => statement(sql),
    batch: async (statements) => {
      lastBatch = statements.map((s) => s.sql);
      return statements.map((s) => result(s.sql));
    },
    exec: async () => ({ count: 0, duration: 0 }),
  };
}

const db = stubD1();
const env = {
  ...vars,
  API_TOKENS: "dev-token:dev,other-token:other",
  OPERATOR_TOKENS: "operator-token",
  PAYMENTS_KEY: "sk_bench_local",
  DB: db,
  DB_1: stubD1(),
  QUEUE: { send: async () => {}, sendBatch: async () => {} },
};
const waited = [];
const ctx = { waitUntil: (p) => waited.push(p), passThroughOnException: () => {}, props: {} };

const body = JSON.stringify({ order: { id: "if-dupcost-0", total: 42 }, ...(PAD > 0 ? { pad: "x".repeat(PAD) } : {}) });
const request = () =>
  new Request("http://127.0.0.1:9240/v1/workflows/bench-dupcost/trigger", {
    method: "POST",
    headers: { authorization: "Bearer dev-token", "content-type": "application/json" },
    body,
  });

async function once() {
  const response = await app.fetch(request(), env, ctx);
  const text = await response.text();
  if (response.status !== 200 || !text.includes('"deduplicated":true')) throw new Error(`answer ${response.status} ${text.slice(0, 300)}`);
}

for (let i = 0; i < WARMUP; i++) await once();
await Promise.all(waited.splice(0));

// The request objects are built outside the measured loop's figure: the driver's, not the engine's.
const measure = async (n) => {
  let buildUs = 0;
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const b = process.cpuUsage();
    const r = request();
    buildUs += process.cpuUsage(b).user + process.cpuUsage(b).system;
    const response = await app.fetch(r, env, ctx);
    const text = await response.text();
    if (response.status !== 200 || !text.includes('"deduplicated":true')) throw new Error(`answer ${response.status}`);
    if (waited.length > 64) await Promise.all(waited.splice(0));
  }
  const used = process.cpuUsage(start);
  return (used.user + used.system - buildUs) / n / 1000;
};

let session;
if (PROFILE) {
  session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 100 });
  await session.post("Profiler.start");
}
const runs = [];
for (let r = 0; r < 3; r++) runs.push(await measure(N));
if (session) {
  const { profile } = await session.post("Profiler.stop");
  const file = join(dir, "dup-js.cpuprofile");
  writeFileSync(file, JSON.stringify(profile));
  console.error(`profile: ${file} (node bench/lib/profile-inclusive.mjs ${file} --per=${3 * N})`);
}
const dump = option("dump-sql", undefined);
if (dump) writeFileSync(dump, JSON.stringify(Object.fromEntries(lastBatch.map((sql, i) => [`statement ${i + 1}`, sql])), null, 2));
const sorted = [...runs].sort((a, b) => a - b);
console.log(
  `dup-js: ${N} duplicates × 3, pad ${PAD} B: ${runs.map((ms) => ms.toFixed(3)).join(", ")} ms CPU per duplicate ` +
    `(median ${sorted[1].toFixed(3)} ms; ${cpus().length} CPUs, load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}, node ${process.version})`,
);
if (!PROFILE) rmSync(dir, { recursive: true, force: true });
