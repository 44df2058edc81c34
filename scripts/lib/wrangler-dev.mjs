/**
 * The one way idemflow's scripts run wrangler: `npm start`, `npm run e2e` and every bench that
 * needs a Worker start, health-check, log and stop `wrangler dev` through this module, and run
 * one-shot commands (`d1 migrations apply`, `d1 execute`, `deploy --dry-run`) with `runWrangler` or `queryD1`.
 *
 * Wrangler runs on the same Node as the caller (`process.execPath`): started from an npm script
 * that is the npm-pinned Node, which wrangler needs. Outside connections are switched off.
 */
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

export const ROOT = resolve(import.meta.dirname, "..", "..");
export const WRANGLER = join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");
export const DEMO_CONFIG = join(ROOT, "demo", "wrangler.toml");

/** No metrics, no request.cf fetch, no banner: the same three variables package.json's scripts set. */
export const OFFLINE_ENV = {
  WRANGLER_SEND_METRICS: "false",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_HIDE_BANNER: "true",
};

/** How many of a process's last output lines are kept for error messages. */
const KEPT_LINES = 400;

/**
 * Spawn `wrangler <args>` with its output kept in memory (the last lines), appended to `logFile`
 * when given and passed line by line to `onLine`. No TTY on stdin: wrangler asks nothing (e.g.
 * `d1 migrations apply` skips its confirmation prompt).
 */
function spawnWrangler(args, { detached = false, logFile, onLine }) {
  const child = spawn(process.execPath, [WRANGLER, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...OFFLINE_ENV, FORCE_COLOR: "0" },
    stdio: ["ignore", "pipe", "pipe"],
    detached,
  });
  const log = logFile ? createWriteStream(logFile, { flags: "a" }) : null;
  const lines = [];
  const onData = (chunk) => {
    log?.write(chunk);
    for (const line of String(chunk).split(/\r?\n/)) {
      if (line.trim().length === 0) continue;
      lines.push(line);
      if (lines.length > KEPT_LINES) lines.shift();
      onLine?.(line);
    }
  };
  child.stdout.on("data", onData);
  child.stderr.on("data", onData);
  if (!detached) track(child);
  // "close" comes once every holder of the pipes is gone: wrangler AND the workerd it spawned.
  const closed = new Promise((resolveClose) => child.on("close", resolveClose));
  return {
    child,
    closed,
    /** The last lines it printed, indented, plus where the full log is. */
    recentOutput: (count = 40) => indent(lines.slice(-count).join("\n")) + (logFile ? `\n    (full log: ${logFile})` : ""),
    closeLog: () => (log ? new Promise((resolveEnd) => log.end(resolveEnd)) : Promise.resolve()),
  };
}

/** Run a wrangler command to completion; rejects with its last output lines when it fails. */
export function runWrangler(args, { logFile, onLine } = {}) {
  const { child, recentOutput, closeLog } = spawnWrangler(args, { logFile, onLine });
  return new Promise((resolveRun, reject) => {
    child.on("error", reject);
    child.on("close", async (code) => {
      await closeLog();
      if (code === 0) resolveRun();
      else reject(new Error(`wrangler ${args.join(" ")} exited with ${code}:\n${recentOutput(25)}`));
    });
  });
}

/**
 * `wrangler d1 migrations apply <database> --local` (or `--remote`), for the engine (no config) or
 * another Worker. The engine has one database per shard: `migrateShards` (./shards.mjs) applies them all.
 */
export function applyMigrations({ database, config, env, remote = false, persistTo, logFile, onLine }) {
  const args = ["d1", "migrations", "apply", database, remote ? "--remote" : "--local"];
  if (config) args.push("-c", config);
  if (env) args.push("--env", env);
  if (persistTo && !remote) args.push("--persist-to", persistTo);
  return runWrangler(args, { logFile, onLine });
}

/**
 * `wrangler d1 execute <database> --local --json --command <sql>`: resolves to one `results` array
 * per statement of `sql` (wrangler runs them in order); rejects with D1's error text. Its own config
 * (`config`) and state directory (`persistTo`) as `applyMigrations`.
 */
export function queryD1({ database, sql, config, persistTo }) {
  const args = ["d1", "execute", database, "--local", "--json", "--command", sql];
  if (config) args.push("-c", config);
  if (persistTo) args.push("--persist-to", persistTo);
  const child = spawn(process.execPath, [WRANGLER, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...OFFLINE_ENV, FORCE_COLOR: "0" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  track(child);
  const out = [];
  const err = [];
  child.stdout.on("data", (chunk) => out.push(chunk));
  child.stderr.on("data", (chunk) => err.push(chunk));
  return new Promise((resolveQuery, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      const stdout = Buffer.concat(out).toString("utf8");
      let parsed;
      try {
        parsed = JSON.parse(stdout);
      } catch {
        parsed = undefined;
      }
      if (code === 0 && Array.isArray(parsed)) return resolveQuery(parsed.map((statement) => statement.results ?? []));
      const why = parsed?.error?.text ?? `${stdout}${Buffer.concat(err).toString("utf8")}`.trim().slice(-2_000);
      reject(new Error(`wrangler d1 execute ${database} exited with ${code}: ${why}\n    (the SQL: ${sql.slice(0, 500)})`));
    });
  });
}

/** Every `wrangler dev` started here and not stopped yet. */
const running = new Set();
/** Every one-shot wrangler (`d1 migrations apply`, `d1 execute`) still running. */
const oneShots = new Set();
function track(child) {
  oneShots.add(child);
  child.on("close", () => oneShots.delete(child));
}

/**
 * Start `wrangler dev` on 127.0.0.1 as the leader of its own process group, so that `stop()` ends
 * wrangler AND the workerd processes it spawned (a kill of the wrangler pid alone would orphan
 * them). `port` and `inspectorPort` default to free ports; give the inspector one anyway, since
 * two `wrangler dev` would both want 9229. `envFile` replaces .dev.vars (a bench never reads the
 * user's secrets). `main` serves another entry with the config's bindings (a bench's instrumented
 * wrapper of src/index.ts), so the production Worker carries no bench code. Returns a handle: { name, pid, port, inspectorPort, url,
 * logFile, recentOutput, exited,
 * exitPromise, stop }.
 */
export async function startWorker({
  name,
  config,
  main,
  port,
  inspectorPort,
  persistTo,
  envFile,
  vars = {},
  testScheduled = false,
  logLevel,
  logFile,
  onLine,
}) {
  const missing = await freePorts((port ? 0 : 1) + (inspectorPort ? 0 : 1));
  port ??= missing.shift();
  inspectorPort ??= missing.shift();
  const args = ["dev", ...(main ? [main] : []), "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspectorPort)];
  args.push("--show-interactive-dev-session=false");
  if (config) args.push("-c", config);
  if (persistTo) args.push("--persist-to", persistTo);
  if (envFile) args.push("--env-file", envFile);
  if (testScheduled) args.push("--test-scheduled");
  if (logLevel) args.push("--log-level", logLevel);
  for (const [key, value] of Object.entries(vars)) args.push("--var", `${key}:${value}`);

  const { child, closed, recentOutput, closeLog } = spawnWrangler(args, { detached: true, logFile, onLine });
  let exited = null;
  const exitPromise = new Promise((resolveExit) => {
    child.on("exit", (code, signal) => resolveExit((exited = { code, signal })));
    child.on("error", (error) => resolveExit((exited ??= { error: error.message })));
  });
  let stopping;
  const worker = {
    name,
    pid: child.pid,
    port,
    inspectorPort,
    url: `http://127.0.0.1:${port}`,
    logFile,
    recentOutput,
    /** `{ code, signal }` once wrangler has exited (`{ error }` if it could not start), else null. */
    exited: () => exited,
    exitPromise,
    /** Stop the whole process group: SIGTERM, SIGKILL after `graceMs`; resolves when it is gone. */
    stop(graceMs = 5_000) {
      stopping ??= (async () => {
        if (!exited) {
          signalGroup(child.pid, "SIGTERM");
          const timer = setTimeout(() => signalGroup(child.pid, "SIGKILL"), graceMs);
          await exitPromise;
          clearTimeout(timer);
        }
        // workerd may outlive wrangler for a moment (or wrangler died and left it): end the group,
        // then wait (bounded) until the last holder of its output pipes is gone.
        signalGroup(child.pid, "SIGKILL");
        await Promise.race([closed, sleep(graceMs)]);
        await closeLog();
        running.delete(worker);
      })();
      return stopping;
    },
  };
  running.add(worker);
  return worker;
}

/**
 * End every one-shot wrangler still running (a `d1 execute` of a story that overran): SIGKILL, then
 * wait (bounded) until each is gone, so that its caller may remove the state directory it writes in.
 */
export async function stopOneShots(graceMs = 5_000) {
  const children = [...oneShots];
  const gone = children.map(
    (child) => new Promise((resolveGone) => (oneShots.has(child) ? child.once("close", resolveGone) : resolveGone())),
  );
  for (const child of children) child.kill("SIGKILL");
  await Promise.race([Promise.all(gone), sleep(graceMs)]);
}

/** Stop every `wrangler dev` this process started (in parallel). */
export function stopAll() {
  return Promise.all([...running].map((worker) => worker.stop()));
}

// Whatever way this process ends (an uncaught error, a process.exit() before stopAll), never leave
// a `wrangler dev` group behind: they are detached, so nothing else would end them.
// Nor a one-shot wrangler still writing into a state directory its caller is about to remove.
process.on("exit", () => {
  for (const worker of running) signalGroup(worker.pid, "SIGKILL");
  for (const child of oneShots) child.kill("SIGKILL");
});

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

/** Poll `GET /health` until it answers 200; fail early, with its output, if wrangler exits. */
export async function waitForHealth(worker, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (worker.exited()) {
      throw new Error(
        `${worker.name} exited (${JSON.stringify(worker.exited())}) before it was healthy. Its output:\n${worker.recentOutput()}`,
      );
    }
    try {
      const res = await fetch(`${worker.url}/health`, { signal: AbortSignal.timeout(2_000) });
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await sleep(250);
  }
  throw new Error(`${worker.name} did not answer ${worker.url}/health within ${timeoutMs / 1000}s. Its output:\n${worker.recentOutput()}`);
}

/** Ports this process has handed out: wrangler binds them seconds later, so the OS may offer them again. */
const handedOut = new Set();

/** `n` distinct loopback ports that are free now and were not handed out before by this process. */
export async function freePorts(n) {
  const servers = [];
  const ports = [];
  try {
    while (ports.length < n) {
      // Each probe stays open until the end, so the OS cannot offer the same port twice.
      const server = await new Promise((resolveServer, reject) => {
        const probe = createServer();
        probe.on("error", reject);
        probe.listen(0, "127.0.0.1", () => resolveServer(probe));
      });
      servers.push(server);
      const { port } = server.address();
      if (!handedOut.has(port)) {
        handedOut.add(port);
        ports.push(port);
      }
    }
  } finally {
    await Promise.all(servers.map((server) => new Promise((closed) => server.close(closed))));
  }
  return ports;
}

/** Is something already listening on this local port? (`npm start` and `npm run reset` use fixed ones.) */
export function portInUse(port) {
  return new Promise((resolveUse) => {
    const server = createServer();
    server.once("error", () => resolveUse(true));
    server.listen(port, "127.0.0.1", () => server.close(() => resolveUse(false)));
  });
}

function indent(text) {
  return text
    .split("\n")
    .filter((line) => line.trim().length > 0)
    .map((line) => `    ${line}`)
    .join("\n");
}
