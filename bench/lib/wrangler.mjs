// Starts Workers under `wrangler dev` on loopback, on fresh local D1 state, for benches.
// Reusable: every bench (ledger, triggers, steps) gets its servers from here.
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createWriteStream } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./ports.mjs";

/** Environment that switches wrangler's outside connections off. */
export const OFFLINE_ENV = {
  ...process.env,
  WRANGLER_SEND_METRICS: "false",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_HIDE_BANNER: "true",
  CI: "true",
};

function wrangler(args, { log, cwd, detached = false }) {
  const child = spawn("npx", ["wrangler", ...args], { cwd, env: OFFLINE_ENV, stdio: ["ignore", "pipe", "pipe"], detached });
  child.stdout.pipe(log, { end: false });
  child.stderr.pipe(log, { end: false });
  return child;
}

const configArgs = (config) => (config ? ["-c", config] : []);

/** `wrangler d1 migrations apply <database> --local` into `persistTo`. */
export function applyMigrations({ database = "idemflow", config, persistTo, log, cwd = process.cwd() }) {
  return new Promise((resolve, reject) => {
    const child = wrangler(["d1", "migrations", "apply", database, "--local", ...configArgs(config), "--persist-to", persistTo], {
      log,
      cwd,
    });
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`migrations for ${database} exited with ${code}; see ${log.path}`)),
    );
  });
}

/**
 * `wrangler dev` on a free loopback port, as the leader of its own process group so that stop()
 * ends exactly what it started (workerd included). `envFile` replaces .dev.vars, so a bench never
 * reads the user's secrets. Returns { name, port, baseUrl, logPath, stop, exited }.
 */
export async function startDev({
  name = "wrangler",
  config,
  persistTo,
  envFile,
  vars = {},
  logPath,
  logLevel = "warn",
  cwd = process.cwd(),
}) {
  const port = await freePort();
  const inspectorPort = await freePort();
  const log = createWriteStream(logPath);
  const child = wrangler(
    [
      "dev",
      ...configArgs(config),
      "--ip",
      "127.0.0.1",
      "--port",
      String(port),
      "--inspector-port",
      String(inspectorPort),
      "--persist-to",
      persistTo,
      ...(envFile ? ["--env-file", envFile] : []),
      "--show-interactive-dev-session=false",
      "--log-level",
      logLevel,
      ...Object.entries(vars).flatMap(([k, v]) => ["--var", `${k}:${v}`]),
    ],
    { log, cwd, detached: true },
  );
  let exited = false;
  let stopped = false;
  child.on("exit", () => (exited = true));
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    if (!exited) {
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {
        // already gone
      }
      await new Promise((resolve) => {
        const timer = setTimeout(() => {
          try {
            process.kill(-child.pid, "SIGKILL");
          } catch {
            // already gone
          }
          resolve();
        }, 5_000);
        child.once("exit", () => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    log.end();
  };
  return { name, port, baseUrl: `http://127.0.0.1:${port}`, logPath, stop, exited: () => exited };
}

/** Wait until `server`'s /health answers; throws (naming its log) if it exits or times out. */
export async function waitHealthy(server, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (server.exited()) throw new Error(`${server.name} exited early; see ${server.logPath}`);
    try {
      const res = await fetch(`${server.baseUrl}/health`);
      if (res.ok) return;
    } catch {
      // already gone
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${server.name} did not become healthy within ${timeoutMs} ms; see ${server.logPath}`);
}

/**
 * The engine alone: migrations applied to a fresh `--persist-to` directory, `wrangler dev`
 * started and healthy. Returns { baseUrl, logPath, stop } (stop also deletes the state).
 */
export async function startWranglerDev({ cwd = process.cwd(), timeoutMs = 90_000, vars = {} } = {}) {
  const dir = await mkdtemp(join(tmpdir(), "idemflow-bench-"));
  const persistTo = join(dir, "state");
  const logPath = join(dir, "wrangler.log");
  const setupLog = createWriteStream(join(dir, "setup.log"));
  await applyMigrations({ persistTo, log: setupLog, cwd });
  setupLog.end();
  const server = await startDev({ persistTo, vars, logPath, cwd });
  const stop = async () => {
    await server.stop();
    await rm(persistTo, { recursive: true, force: true });
  };
  try {
    await waitHealthy(server, timeoutMs);
  } catch (error) {
    await stop();
    throw error;
  }
  return { baseUrl: server.baseUrl, logPath, stop };
}
