/**
 * The start/stop scaffolding every bench that runs Workers shares — one call instead of a copy per
 * bench (bench/steps.mjs, chain.mjs, shards.mjs, soak.mjs; a new bench/<name>.mjs starts here too):
 *
 *   import { runBench, startEngineAndDemo } from "./lib/bench-run.mjs";
 *   await runBench({ name: "flow", hardStopMs: 300_000 }, async ({ dir, info, log, keepDir }) => {
 *     const { engine, demo } = await startEngineAndDemo({ dir, name: "flow" });
 *     …                                  // drive engine.url / demo.url, print the tables
 *     return 0;                          // the exit code (a failed check: 2, and keepDir() for the logs)
 *   });
 *
 * `runBench`:
 * - logs the machine (cores, CPU, node, wrangler, the 1-minute load average) before anything starts
 *   (docs/benchmarks.md wants the load beside every figure);
 * - makes a temporary directory `dir` (`idemflow-bench-<name>-…`) for the Workers' state and logs;
 * - stops every Worker and exits 1 after `hardStopMs`, whatever hangs; SIGINT / SIGTERM stop every
 *   Worker and exit 130 / 143;
 * - when the body returns: every Worker stopped (scripts/lib/wrangler-dev.mjs `stopAll`), `dir`
 *   removed — unless the body called `keepDir(remove)`: then only the subdirectories it names go
 *   (the state, large) and the rest (the logs) stays for a look — and the process exits with the
 *   body's return value (0 when it returns nothing);
 * - a thrown error: its stack logged, every Worker stopped, the directory kept, exit 1.
 *
 * `startEngineAndDemo` starts the engine (wrangler.toml, or `engineConfig`/`main`) and the demo
 * destinations on free loopback ports with fresh state under `dir`, both migrated first (in-process, at once), the
 * engine's `OUTBOUND_ALLOWLIST` pointed at the demo, its secrets from a temporary env file (never
 * the user's .dev.vars) and the local tokens; resolves once both answer /health.
 */
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEMO_CONFIG, applyMigrations, startWorker, stopAll, waitForHealth } from "../../scripts/lib/wrangler-dev.mjs";
import { LOCAL_TOKENS } from "../../scripts/lib/local-tokens.mjs";
import { migrateLocalDatabases } from "../../scripts/lib/local-migrate.mjs";
import { migrateShards, readShards } from "../../scripts/lib/shards.mjs";
import { machine } from "./report.mjs";

/** `--name=value` from the command line (`npm run bench:x -- --n=64`), else `fallback`. */
export const flag = (name, fallback) =>
  process.argv
    .slice(2)
    .find((a) => a.startsWith(`--${name}=`))
    ?.slice(name.length + 3) ?? fallback;

/** Run one bench's body with the scaffolding above; never returns (it exits the process). */
export async function runBench({ name, hardStopMs }, body) {
  const log = (line) => console.error(`[bench:${name}] ${line}`);
  const info = machine();
  log(`machine: ${info.cpus} × ${info.cpuModel}, node ${info.node}, wrangler ${info.wrangler}, load average ${info.loadAverage1m}`);
  const dir = await mkdtemp(join(tmpdir(), `idemflow-bench-${name}-`));
  /** null: remove `dir`; else the subdirectories to remove, the rest kept. */
  let kept = null;
  const keepDir = (remove = []) => {
    kept = remove;
  };
  const cleanup = async () => {
    clearTimeout(hardStop);
    await stopAll();
    const gone = kept === null ? [dir] : kept.map((sub) => join(dir, sub));
    await Promise.all(gone.map((path) => rm(path, { recursive: true, force: true })));
    if (kept !== null) log(`kept ${dir}`);
  };
  const hardStop = setTimeout(() => {
    log(`hard stop after ${hardStopMs} ms; ${dir} kept`);
    void stopAll().then(() => process.exit(1));
  }, hardStopMs);
  process.on("SIGINT", () => void cleanup().then(() => process.exit(130)));
  process.on("SIGTERM", () => void cleanup().then(() => process.exit(143)));
  let code;
  try {
    code = (await body({ dir, info, log, keepDir })) ?? 0;
  } catch (error) {
    log(error?.stack ?? String(error));
    kept ??= [];
    code = 1;
  }
  await cleanup();
  process.exit(code);
}

/**
 * The engine's shards and the demo's database migrated in this process, both state directories at once
 * (scripts/lib/local-migrate.mjs, as `npm start` and the e2e); wrangler's `d1 migrations apply` when that
 * path fails for another reason than a migration.
 */
async function migrateBoth({ engineConfig, demoConfig, enginePersist, demoPersist, setupLog }) {
  const database = (shard) => ({ label: shard.databaseName, ...shard });
  try {
    await Promise.all([
      migrateLocalDatabases({ persistTo: enginePersist, databases: readShards({ config: engineConfig }).shards.map(database) }),
      migrateLocalDatabases({ persistTo: demoPersist, databases: [database(readShards({ config: demoConfig }).shards[0])] }),
    ]);
  } catch (error) {
    if (/ failed: /.test(error.message) && error.cause) throw error;
    await Promise.all([
      migrateShards({ config: engineConfig, persistTo: enginePersist, logFile: setupLog }),
      applyMigrations({ database: "idemflow-demo", config: demoConfig, persistTo: demoPersist, logFile: setupLog }),
    ]);
  }
}

/**
 * The demo destinations and the engine, migrated and healthy. Options: `name` (the bench's, in the
 * secrets' dummy values), `engineConfig` / `demoConfig` (default: the repo's configs; a bench's
 * snapshot config), `main` (another entry for the engine, e.g. an instrumented wrapper),
 * `enginePersist` / `demoPersist` (default `<dir>/engine-state`, `<dir>/demo-state`), `logsDir`
 * (default `dir`), `tag` (suffix of the log files), `vars` (more engine vars), `engineLogLevel` /
 * `demoLogLevel` (default "warn"), `onEngineLine`. Returns `{ engine, demo, enginePersist, demoPersist }`.
 */
export async function startEngineAndDemo({
  dir,
  name = "bench",
  engineConfig,
  demoConfig = DEMO_CONFIG,
  main,
  enginePersist = join(dir, "engine-state"),
  demoPersist = join(dir, "demo-state"),
  logsDir = dir,
  tag = "",
  vars = {},
  engineLogLevel = "warn",
  demoLogLevel = "warn",
  onEngineLine,
  healthMs = 120_000,
}) {
  await mkdir(logsDir, { recursive: true });
  const suffix = tag ? `-${tag}` : "";
  const setupLog = join(logsDir, `setup${suffix}.log`);
  await migrateBoth({ engineConfig, demoConfig, enginePersist, demoPersist, setupLog });
  // With --env-file, wrangler dev reads no .dev.vars: dummy secrets (the demo accepts any bearer).
  const engineEnv = join(dir, `engine${suffix}.env`);
  const demoEnv = join(dir, `demo${suffix}.env`);
  const masterKey = randomBytes(32).toString("base64");
  await writeFile(
    engineEnv,
    `SECRETS_MASTER_KEY=${masterKey}\nPAYMENTS_KEY=sk_bench_${name}_local\nWEBHOOK_SECRET=whsec_bench_${name}_local\n`,
  );
  await writeFile(demoEnv, "");
  const demo = await startWorker({
    name: `demo${suffix}`,
    config: demoConfig,
    persistTo: demoPersist,
    envFile: demoEnv,
    logLevel: demoLogLevel,
    logFile: join(logsDir, `demo${suffix}.log`),
  });
  const engine = await startWorker({
    name: `engine${suffix}`,
    config: engineConfig,
    main,
    persistTo: enginePersist,
    envFile: engineEnv,
    vars: { ...LOCAL_TOKENS, OUTBOUND_ALLOWLIST: `127.0.0.1:${demo.port}`, ...vars },
    logLevel: engineLogLevel,
    logFile: join(logsDir, `engine${suffix}.log`),
    onLine: onEngineLine,
  });
  await Promise.all([waitForHealth(demo, healthMs), waitForHealth(engine, healthMs)]);
  return { engine, demo, enginePersist, demoPersist };
}
