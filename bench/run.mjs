// `npm run bench [-- --duration=5000] [-- ledger]`: starts idemflow under `wrangler dev` on a
// fresh local D1 (loopback, outside connections off), runs the named benches, prints markdown
// tables to paste into docs/benchmarks.md and writes the raw figures to bench/results/.
// A bench is a module exporting run + format functions; register new ones in BENCHES.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startWorker, stopAll, waitForHealth } from "../scripts/lib/wrangler-dev.mjs";
import { LOCAL_TOKENS } from "../scripts/lib/local-tokens.mjs";
import { migrateShards } from "../scripts/lib/shards.mjs";
import { benchLedger, formatLedger } from "./ledger.mjs";
import { benchTriggers, formatTriggers } from "./triggers.mjs";
import { machine } from "./lib/report.mjs";

const BENCHES = {
  ledger: { title: "Idempotency-Key middleware", run: benchLedger, format: formatLedger },
  triggers: { title: "Triggers (ingress dedupe)", run: benchTriggers, format: formatTriggers },
};

const args = process.argv.slice(2);
const durationMs = Number(args.find((a) => a.startsWith("--duration="))?.split("=")[1] ?? 5_000);
const names = args.filter((a) => !a.startsWith("--"));
const selected = names.length > 0 ? names : Object.keys(BENCHES);
for (const name of selected) if (!BENCHES[name]) throw new Error(`unknown bench "${name}"; known: ${Object.keys(BENCHES).join(", ")}`);

const info = machine();
console.log(
  `machine: ${info.cpus} × ${info.cpuModel}, ${info.memoryGiB} GiB, ${info.platform}, node ${info.node}, wrangler ` +
    `${info.wrangler}, load average ${info.loadAverage1m}`,
);
// The engine alone, on a fresh local D1 in a temporary directory (its state is deleted at the end,
// the logs are kept), served through bench/baseline-worker.ts: src/index.ts plus the bench-only
// plain-INSERT trigger baseline, which the production Worker does not carry.
const dir = await mkdtemp(join(tmpdir(), "idemflow-bench-"));
const persistTo = join(dir, "state");
const cleanup = async () => {
  await stopAll();
  await rm(persistTo, { recursive: true, force: true });
};
process.on("SIGINT", () => void cleanup().then(() => process.exit(130)));
process.on("SIGTERM", () => void cleanup().then(() => process.exit(143)));
const raw = { machine: info, durationMs, at: new Date().toISOString(), results: {} };
try {
  await migrateShards({ persistTo, logFile: join(dir, "setup.log") });
  const server = await startWorker({
    name: "engine",
    persistTo,
    main: "bench/baseline-worker.ts",
    // The local tokens (wrangler.toml holds none): not the user's .dev.vars, which may not exist.
    vars: { ...LOCAL_TOKENS },
    logLevel: "warn",
    logFile: join(dir, "wrangler.log"),
  });
  await waitForHealth(server);
  console.log(`wrangler dev on ${server.url} (log: ${server.logFile}); ${durationMs} ms per measurement`);
  for (const name of selected) {
    const bench = BENCHES[name];
    const results = await bench.run({ baseUrl: server.url, durationMs });
    raw.results[name] = results;
    console.log(`\n## ${bench.title}\n\n${bench.format(results)}\n`);
  }
} finally {
  await cleanup();
}
raw.loadAverageAfter1m = machine().loadAverage1m;
console.log(`load average after: ${raw.loadAverageAfter1m}`);
await mkdir(new URL("./results/", import.meta.url), { recursive: true });
const file = new URL(`./results/${selected.join("-")}-latest.json`, import.meta.url);
await writeFile(file, JSON.stringify(raw, null, 2));
console.log(`raw figures: ${file.pathname}`);
