/**
 * What every crash run shares (bench/map-crash.mjs, flow-crash.mjs, compensation-crash.mjs): the
 * engine and the demo started from snapshots on fresh state, the demo connectors saved pointing at
 * this demo, the engine's process group SIGKILLed and restarted on the same state, the cron ticked as
 * production's would (`wrangler dev` fires none), and the paged reads the checks need.
 *
 *   const rig = await startCrashRig({ dir, name: "map-crash", log });
 *   await putExampleWorkflow(rig, "refund-lines.json", `refund-lines-crash-${RUN}`);
 *   …
 *   await killEngine(rig);
 *   await restartEngine(rig);
 *   await tickCron(rig.engine);
 *
 * `rig.engine` is replaced by `restartEngine`: read it from the rig after a restart.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { api } from "./api.mjs";
import { snapshotConfig } from "./snapshot.mjs";
import { startEngineAndDemo } from "./bench-run.mjs";
import { DEMO_CONFIG, ROOT, startWorker, waitForHealth } from "../../scripts/lib/wrangler-dev.mjs";
import { LOCAL_TOKENS } from "../../scripts/lib/local-tokens.mjs";
import { loadDemoConnectors } from "../../scripts/lib/load-workflows.mjs";

/** Bundles both Workers once (edits to the tree cannot reload them mid-run), starts them, saves the demo connectors. */
export async function startCrashRig({ dir, name, log }) {
  const loadBefore = readFileSync("/proc/loadavg", "utf8").trim();
  const logs = join(dir, "logs");
  log("bundling snapshots (engine, demo)…");
  const [engineConfig, demoConfig] = await Promise.all([
    snapshotConfig({ dir, logFile: join(dir, "engine-build.log"), name: "engine", config: join(ROOT, "wrangler.toml") }),
    snapshotConfig({ dir, logFile: join(dir, "demo-build.log"), name: "demo", config: DEMO_CONFIG }),
  ]);
  const started = await startEngineAndDemo({ dir, name, engineConfig, demoConfig, logsDir: logs });
  const rig = { dir, logs, loadBefore, engineConfig, ...started };
  // The shipped connectors and workflows name the demo at its default port; this one has its own.
  rig.rewrite = (text) => text.replaceAll("http://localhost:8788", rig.demo.url);
  const token = LOCAL_TOKENS.API_TOKENS.split(",")[0].split(":")[0];
  for (const r of await loadDemoConnectors(rig.engine.url, token, { rewrite: rig.rewrite })) {
    if (!r.ok) throw new Error(`connector ${r.id}: ${r.status} ${JSON.stringify(r.answer)}`);
  }
  return rig;
}

/** workflows/<file>, pointed at this demo, saved under `id` (changed first by `edit`, when given). */
export async function putExampleWorkflow(rig, file, id, edit = () => {}) {
  const workflow = JSON.parse(rig.rewrite(readFileSync(join(ROOT, "workflows", file), "utf8")));
  delete workflow.$schema;
  workflow.id = id;
  edit(workflow);
  await api(rig.engine.url, "PUT", `/v1/workflows/${id}`, workflow);
  return workflow;
}

/** SIGKILL to the engine's whole process group (wrangler and workerd: the local queue's messages go with it). */
export async function killEngine(rig) {
  process.kill(-rig.engine.pid, "SIGKILL");
  const at = Date.now();
  await rig.engine.exitPromise;
  await rig.engine.stop();
  return at;
}

/** The engine again, on the same port and state directory; `rig.engine` is the new one. */
export async function restartEngine(rig) {
  rig.engine = await startWorker({
    name: "engine-restarted",
    config: rig.engineConfig,
    port: rig.engine.port,
    persistTo: rig.enginePersist,
    envFile: join(rig.dir, "engine.env"),
    vars: { ...LOCAL_TOKENS, OUTBOUND_ALLOWLIST: `127.0.0.1:${rig.demo.port}` },
    logLevel: "warn",
    logFile: join(rig.logs, "engine-restarted.log"),
  });
  await waitForHealth(rig.engine, 120_000);
  return rig.engine;
}

/** One minute tick of the engine's cron (the reaper heals steps whose lease expired or message was lost). */
export const tickCron = (engine) => fetch(`${engine.url}/cdn-cgi/local/scheduled?cron=*+*+*+*+*`).catch(() => undefined);

/** Every item of a paged engine listing (`items` and `nextCursor`), `path` with or without a query. */
export async function listAll(engineUrl, path) {
  const items = [];
  let cursor = null;
  do {
    const page = await api(engineUrl, "GET", cursor ? `${path}${path.includes("?") ? "&" : "?"}cursor=${cursor}` : path);
    items.push(...page.items);
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

/** `{ value: count }` of `items[key]`, in a null-prototype object (a status or outcome is user-facing text). */
export function countBy(items, key) {
  const counts = Object.create(null);
  for (const item of items) counts[item[key]] = (counts[item[key]] ?? 0) + 1;
  return counts;
}
