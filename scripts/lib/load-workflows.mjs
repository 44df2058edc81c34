/**
 * Loading workflows/*.json into a running engine over HTTP (`PUT /v1/workflows/:id`): `npm start`
 * loads the examples into workspace `dev`, the end-to-end tests check every one is accepted. The
 * demo's connectors (connectors/demo-*.json) are saved first (`PUT /v1/connectors/:name`): the
 * examples that go through them are resolved against them when saved. The other connector files
 * (Stripe, PayPal, …) are examples of real APIs, not on the local OUTBOUND_ALLOWLIST: not loaded.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { ROOT } from "./wrangler-dev.mjs";

/**
 * `PUT <path>` of the JSON text `body` with the workspace token: `{ ok, status, answer }` (`answer` the
 * parsed body, null when it is not JSON); throws only when the request itself fails. `onRequest(method,
 * path, { headers, body })` sees the request before it is sent, `onAnswer(method, path, response, text)`
 * the answer (the e2e checks both against the OpenAPI document).
 */
export async function putJson(engineUrl, token, path, body, { onRequest, onAnswer, timeoutMs = 60_000 } = {}) {
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  onRequest?.("PUT", path, { headers, body });
  const res = await fetch(`${engineUrl}${path}`, { method: "PUT", headers, body, signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  onAnswer?.("PUT", path, res, text);
  let answer = null;
  try {
    answer = JSON.parse(text);
  } catch {
    // not JSON: the status says it
  }
  return { ok: res.ok, status: res.status, answer };
}

/**
 * Every `workflows/*.json` as `{ file, text }`, sorted by name — the definitions only: a workflow's
 * scenarios (`workflows/<id>.test.json`, `npm run test:workflows`: docs/testing-workflows.md) are not one.
 */
export async function readWorkflowFiles(dir = join(ROOT, "workflows")) {
  const names = (await readdir(dir)).filter((name) => name.endsWith(".json") && !name.endsWith(".test.json")).sort();
  return Promise.all(names.map(async (name) => ({ file: `workflows/${name}`, text: await readFile(join(dir, name), "utf8") })));
}

/**
 * `PUT /v1/workflows/:id` for every workflow file. Never throws for a rejected definition: each
 * result says what happened, so `npm start` can print it and keep running.
 * `rewrite(text)` lets the e2e tests point the examples at the demo's temporary port;
 * `onAnswer(method, path, response, text)` sees every answer and `onRequest(method, path, { headers, body })` every
 * request before it is sent (the e2e checks both against the OpenAPI document).
 */
export async function loadWorkflows(engineUrl, token, { rewrite = (text) => text, files, onRequest, onAnswer } = {}) {
  const results = [];
  if (!files) results.push(...(await loadDemoConnectors(engineUrl, token, { rewrite, onRequest, onAnswer })));
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
      const answer = await putJson(engineUrl, token, `/v1/workflows/${encodeURIComponent(id)}`, body, { onRequest, onAnswer });
      results.push({ file, id, ...answer });
    } catch (error) {
      results.push({ file, id, ok: false, status: 0, message: error.message });
    }
  }
  return results;
}

/** Every `connectors/demo-*.json` as `{ file, text }`, sorted by name. */
export async function readDemoConnectorFiles(dir = join(ROOT, "connectors")) {
  const names = (await readdir(dir)).filter((name) => name.startsWith("demo-") && name.endsWith(".json")).sort();
  return Promise.all(names.map(async (name) => ({ file: `connectors/${name}`, text: await readFile(join(dir, name), "utf8") })));
}

/** `PUT /v1/connectors/:name` for every demo connector; each result as loadWorkflows' (`id` is the name). */
export async function loadDemoConnectors(engineUrl, token, { rewrite = (text) => text, onRequest, onAnswer } = {}) {
  const results = [];
  for (const { file, text } of await readDemoConnectorFiles()) {
    const parsed = JSON.parse(rewrite(text));
    const path = `/v1/connectors/${encodeURIComponent(parsed.name)}`;
    try {
      results.push({ file, id: parsed.name, ...(await putJson(engineUrl, token, path, JSON.stringify(parsed), { onRequest, onAnswer })) });
    } catch (error) {
      results.push({ file, id: parsed.name, ok: false, status: 0, message: error.message });
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
    (
      `  ✗ ${result.file}${result.id ? ` → ${result.id}` : ""}: ` +
      `${result.status ? `HTTP ${result.status}` : ""} ${result.message ?? result.answer?.title ?? ""}`
    ).trimEnd(),
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
