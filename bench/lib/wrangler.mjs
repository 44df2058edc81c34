// Starts the idemflow Worker under `wrangler dev` on loopback, on a fresh local D1, for benches.
// Reusable: every bench (ledger, triggers, steps) gets a server from here.
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

function run(args, { log, cwd }) {
  return new Promise((resolve, reject) => {
    const child = spawn("npx", ["wrangler", ...args], { cwd, env: OFFLINE_ENV, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.pipe(log, { end: false });
    child.stderr.pipe(log, { end: false });
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`wrangler ${args[0]} exited with ${code}; see ${log.path}`))));
  });
}

/**
 * Applies the migrations to a fresh `--persist-to` directory, starts `wrangler dev` on a free
 * loopback port and waits until /health answers. Returns { baseUrl, logPath, stop }.
 */
export async function startWranglerDev({ cwd = process.cwd(), timeoutMs = 90_000, vars = {} } = {}) {
  const dir = await mkdtemp(join(tmpdir(), "idemflow-bench-"));
  const persistTo = join(dir, "state");
  const logPath = join(dir, "wrangler.log");
  const log = createWriteStream(logPath);
  await run(["d1", "migrations", "apply", "idemflow", "--local", "--persist-to", persistTo], { log, cwd });

  const port = await freePort();
  const inspectorPort = await freePort();
  // detached: the server gets its own process group, so stop() ends exactly what we started.
  const child = spawn(
    "npx",
    ["wrangler", "dev", "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspectorPort), "--persist-to", persistTo, "--log-level", "warn",
     ...Object.entries(vars).flatMap(([k, v]) => ["--var", `${k}:${v}`])],
    { cwd, env: OFFLINE_ENV, stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  child.stdout.pipe(log, { end: false });
  child.stderr.pipe(log, { end: false });
  let exited = false;
  child.on("exit", () => (exited = true));

  const stop = async () => {
    if (!exited) {
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {}
      await new Promise((resolve) => {
        const timer = setTimeout(() => {
          try {
            process.kill(-child.pid, "SIGKILL");
          } catch {}
          resolve();
        }, 5_000);
        child.once("exit", () => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    log.end();
    await rm(persistTo, { recursive: true, force: true });
  };

  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (exited) throw new Error(`wrangler dev exited early; see ${logPath}`);
    try {
      const res = await fetch(`${baseUrl}/health`);
      if (res.ok) return { baseUrl, logPath, stop };
    } catch {}
    await new Promise((r) => setTimeout(r, 250));
  }
  await stop();
  throw new Error(`wrangler dev did not become healthy within ${timeoutMs} ms; see ${logPath}`);
}
