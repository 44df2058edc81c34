/**
 * Child processes for the comparison bench: `wrangler` commands on loopback, in their own process
 * groups, so that the driver can stop exactly what it started (and nothing else).
 */
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { openSync, readFileSync } from "node:fs";

/** Outside connections off: no metrics, no request.cf fetch, no banner. */
export const WRANGLER_ENV = {
  ...process.env,
  WRANGLER_SEND_METRICS: "false",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_HIDE_BANNER: "true",
  CI: "true", // no interactive prompts
};

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const started = [];

/** Start `npx wrangler <args>` in its own process group; output goes to `logFile`. */
export function startWrangler(args, { cwd, logFile }) {
  const fd = openSync(logFile, "a");
  const child = spawn("npx", ["wrangler", ...args], {
    cwd,
    env: WRANGLER_ENV,
    stdio: ["ignore", fd, fd],
    detached: true,
  });
  started.push(child);
  return child;
}

/** Run `npx wrangler <args>` to completion; throw with the log tail if it fails. */
export function runWrangler(args, { cwd, logFile }) {
  return new Promise((resolve, reject) => {
    const fd = openSync(logFile, "a");
    const child = spawn("npx", ["wrangler", ...args], { cwd, env: WRANGLER_ENV, stdio: ["ignore", fd, fd] });
    child.on("exit", (code) => {
      if (code === 0) resolve();
      else reject(new Error(`npx wrangler ${args.join(" ")} exited ${code}:\n${tail(logFile)}`));
    });
  });
}

export function tail(file, lines = 25) {
  try {
    return readFileSync(file, "utf8").split("\n").slice(-lines).join("\n");
  } catch {
    return "(no log)";
  }
}

/** Poll `url` until it answers below 500, or fail after `timeoutMs` with the log tail. */
export async function waitForHttp(url, { timeoutMs = 90_000, logFile }) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      if (response.status < 500) return;
    } catch {
      // not listening yet
    }
    await sleep(300);
  }
  throw new Error(`${url} did not come up within ${timeoutMs} ms:\n${tail(logFile)}`);
}

/** Stop every process group this driver started: SIGTERM, then SIGKILL after a grace period. */
export async function stopAll() {
  const alive = started.filter((c) => c.exitCode === null && c.signalCode === null);
  for (const child of alive) signalGroup(child, "SIGTERM");
  const deadline = Date.now() + 5_000;
  while (Date.now() < deadline && alive.some((c) => c.exitCode === null && c.signalCode === null)) await sleep(100);
  for (const child of alive) if (child.exitCode === null && child.signalCode === null) signalGroup(child, "SIGKILL");
}

function signalGroup(child, signal) {
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
