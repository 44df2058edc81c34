/**
 * Running the two local Workers (the engine and the demo destinations) under `wrangler dev`:
 * shared by `npm start` (scripts/start.mjs) and the end-to-end tests (scripts/e2e.mjs).
 *
 * Wrangler runs on the same Node as this script (`process.execPath`): started from an npm script
 * that is the npm-pinned Node, which wrangler needs. Outside connections are switched off.
 */
import { spawn } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join, resolve } from "node:path";

export const ROOT = resolve(import.meta.dirname, "..", "..");
export const WRANGLER = join(ROOT, "node_modules", "wrangler", "bin", "wrangler.js");
export const DEMO_CONFIG = join(ROOT, "demo", "wrangler.toml");

export const WRANGLER_ENV = {
  WRANGLER_SEND_METRICS: "false",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_HIDE_BANNER: "true",
};

const wranglerEnv = () => ({ ...process.env, ...WRANGLER_ENV, FORCE_COLOR: "0" });

/** Run a wrangler command to completion; resolves with its output, rejects with it on failure. */
export function runWrangler(args, { quiet = false } = {}) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [WRANGLER, ...args], {
      cwd: ROOT,
      env: wranglerEnv(),
      // No TTY on stdin: `d1 migrations apply` skips its confirmation prompt.
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code === 0) {
        if (!quiet) process.stdout.write(indent(output));
        resolvePromise(output);
      } else {
        reject(new Error(`wrangler ${args.join(" ")} exited with ${code}:\n${indent(output)}`));
      }
    });
  });
}

/** Apply D1 migrations to the local database of one Worker (engine by default, or the demo). */
export function applyMigrations({ database, config, persistTo, quiet }) {
  const args = ["d1", "migrations", "apply", database, "--local"];
  if (config) args.push("-c", config);
  if (persistTo) args.push("--persist-to", persistTo);
  return runWrangler(args, { quiet });
}

/**
 * Start `wrangler dev` as the leader of its own process group, so `stop()` ends wrangler AND the
 * workerd processes it spawned (a plain kill of the wrangler pid would orphan them).
 */
export function startWorker({ name, config, port, inspectorPort, persistTo, vars = {}, testScheduled = false, onOutput }) {
  const args = ["dev", "--port", String(port), "--ip", "127.0.0.1", "--show-interactive-dev-session=false"];
  if (config) args.push("-c", config);
  if (inspectorPort) args.push("--inspector-port", String(inspectorPort));
  if (persistTo) args.push("--persist-to", persistTo);
  if (testScheduled) args.push("--test-scheduled");
  for (const [key, value] of Object.entries(vars)) args.push("--var", `${key}:${value}`);

  const child = spawn(process.execPath, [WRANGLER, ...args], {
    cwd: ROOT,
    env: wranglerEnv(),
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const lines = [];
  const onData = (chunk) => {
    for (const line of String(chunk).split(/\r?\n/)) {
      if (line.trim().length === 0) continue;
      lines.push(line);
      if (lines.length > 400) lines.shift();
      onOutput?.(line);
    }
  };
  child.stdout.on("data", onData);
  child.stderr.on("data", onData);
  let exited = null;
  const exitPromise = new Promise((resolveExit) =>
    child.on("exit", (code, signal) => {
      exited = { code, signal };
      resolveExit(exited);
    }),
  );

  return {
    name,
    child,
    url: `http://localhost:${port}`,
    /** The last lines wrangler printed (for error messages). */
    recentOutput: () => lines.slice(-40).join("\n"),
    exited: () => exited,
    exitPromise,
    /** Stop the whole process group: SIGTERM, then SIGKILL if it lingers. */
    async stop(graceMs = 3000) {
      if (exited) return;
      signalGroup(child.pid, "SIGTERM");
      const timer = setTimeout(() => signalGroup(child.pid, "SIGKILL"), graceMs);
      await exitPromise;
      clearTimeout(timer);
      // workerd children may outlive wrangler for a moment; make sure the group is gone.
      signalGroup(child.pid, "SIGKILL");
    },
  };
}

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

/** Poll `GET /health` until it answers 200; fail early if the worker process exits. */
export async function waitForHealth(worker, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (worker.exited()) {
      throw new Error(
        `${worker.name} exited (${JSON.stringify(worker.exited())}) before it was healthy. Its output:\n${indent(worker.recentOutput())}`,
      );
    }
    try {
      const res = await fetch(`${worker.url}/health`, { signal: AbortSignal.timeout(2000) });
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    await sleep(250);
  }
  throw new Error(
    `${worker.name} did not answer ${worker.url}/health within ${timeoutMs / 1000}s. Its output:\n${indent(worker.recentOutput())}`,
  );
}

/** A TCP port that is free right now on 127.0.0.1. */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

/** `n` distinct free ports: all are held open together, so no two answers can be the same port. */
export async function freePorts(n) {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise((resolveServer, reject) => {
          const server = createServer();
          server.on("error", reject);
          server.listen(0, "127.0.0.1", () => resolveServer(server));
        }),
    ),
  );
  const ports = servers.map((server) => server.address().port);
  await Promise.all(servers.map((server) => new Promise((r) => server.close(r))));
  return ports;
}

/** Is something already listening on this local port? */
export function portInUse(port) {
  return new Promise((resolveUse) => {
    const server = createServer();
    server.once("error", () => resolveUse(true));
    server.listen(port, "127.0.0.1", () => server.close(() => resolveUse(false)));
  });
}

/** Every `workflows/*.json` as `{ file, text }`, sorted by name. */
export async function readWorkflowFiles(dir = join(ROOT, "workflows")) {
  const names = (await readdir(dir)).filter((name) => name.endsWith(".json")).sort();
  return Promise.all(names.map(async (name) => ({ file: `workflows/${name}`, text: await readFile(join(dir, name), "utf8") })));
}

/**
 * `PUT /v1/workflows/:id` for every workflow file. Never throws for a rejected definition: each
 * result says what happened, so `npm start` can print it and keep running.
 * `rewrite(text)` lets the e2e tests point the examples at the demo's temporary port.
 */
export async function loadWorkflows(engineUrl, token, { rewrite = (text) => text, files } = {}) {
  const results = [];
  for (const { file, text } of files ?? (await readWorkflowFiles())) {
    let id;
    let body;
    try {
      const parsed = JSON.parse(rewrite(text));
      id = parsed.id;
      body = JSON.stringify(parsed);
    } catch (error) {
      results.push({ file, ok: false, status: 0, message: `not valid JSON: ${error.message}` });
      continue;
    }
    if (typeof id !== "string" || id.length === 0) {
      results.push({ file, ok: false, status: 0, message: "has no string `id`" });
      continue;
    }
    try {
      const res = await fetch(`${engineUrl}/v1/workflows/${encodeURIComponent(id)}`, {
        method: "PUT",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body,
      });
      const answer = await res.json().catch(() => null);
      results.push({ file, id, ok: res.ok, status: res.status, answer });
    } catch (error) {
      results.push({ file, id, ok: false, status: 0, message: error.message });
    }
  }
  return results;
}

/** One line per workflow, with every validation error's pointer on its own line. */
export function describeLoadResult(result) {
  if (result.ok) {
    const version = result.answer?.version ? ` version ${String(result.answer.version).slice(0, 12)}…` : "";
    return `  ✓ ${result.file} → ${result.id} (${result.status === 201 ? "saved" : "unchanged"}${version})`;
  }
  const lines = [
    `  ✗ ${result.file}${result.id ? ` → ${result.id}` : ""}: ${result.status ? `HTTP ${result.status}` : ""} ${result.message ?? result.answer?.title ?? ""}`.trimEnd(),
  ];
  if (result.status === 404 && result.answer?.code === "route-not-found") {
    lines.push("      the engine does not serve PUT /v1/workflows/:id yet (is this build complete?)");
  }
  for (const error of result.answer?.errors ?? []) {
    lines.push(`      ${error.pointer ?? ""} ${error.message ?? JSON.stringify(error)}`);
  }
  if (result.answer?.detail && !(result.answer?.errors?.length > 0)) lines.push(`      ${result.answer.detail}`);
  return lines.join("\n");
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function indent(text) {
  return (
    text
      .split("\n")
      .filter((line) => line.trim().length > 0)
      .map((line) => `    ${line}`)
      .join("\n") + "\n"
  );
}
