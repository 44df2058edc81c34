/**
 * The demo payments provider's event source, put into a running engine over HTTP: `npm start` seeds
 * it into workspace `dev` (so workflows/charge-and-confirm.json runs as loaded), the e2e into its own.
 *
 *   PUT /v1/secrets/PAYMENTS_WEBHOOK_SECRET   the Standard Webhooks secret the demo signs with
 *   PUT /v1/event-sources/payments            demo/event-sources/payments.json
 *
 * The secret is the demo's own var (demo/wrangler.toml [vars] PAYMENTS_WEBHOOK_SECRET), so both
 * sides hold one value; it is a local demo value, never a credential. The source then answers at
 * POST /events/dev/payments, where the demo posts its confirmations (demo/src/confirmations.ts).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DEMO_CONFIG, ROOT } from "./wrangler-dev.mjs";
import { putJson } from "./load-workflows.mjs";

export const PAYMENTS_SOURCE = "payments";
export const PAYMENTS_SECRET_NAME = "PAYMENTS_WEBHOOK_SECRET";
const SOURCE_FILE = join(ROOT, "demo", "event-sources", "payments.json");

/** The demo's PAYMENTS_WEBHOOK_SECRET var, as demo/wrangler.toml sets it. */
export function demoWebhookSecret(config = DEMO_CONFIG) {
  const match = /^\s*PAYMENTS_WEBHOOK_SECRET\s*=\s*"([^"]+)"/m.exec(readFileSync(config, "utf8"));
  if (!match) throw new Error(`${config} sets no PAYMENTS_WEBHOOK_SECRET in [vars]`);
  return match[1];
}

/** The event source's definition (demo/event-sources/payments.json). */
export function paymentsSourceDefinition() {
  return JSON.parse(readFileSync(SOURCE_FILE, "utf8"));
}

/**
 * PUT the secret, then the source. Never throws for a refusal: each result says what happened
 * (`{ what, ok, status, detail }`). `onAnswer(method, path, response, text)` sees every answer, and
 * `onRequest(method, path, { headers, body })` every request before it is sent.
 */
export async function seedPaymentsEventSource(engineUrl, token, { secret = demoWebhookSecret(), onRequest, onAnswer } = {}) {
  const put = async (what, path, value) => {
    try {
      return { what, ...(await putJson(engineUrl, token, path, JSON.stringify(value), { onRequest, onAnswer })) };
    } catch (error) {
      return { what, ok: false, status: 0, answer: { detail: error.message } };
    }
  };
  const results = [await put(`secret ${PAYMENTS_SECRET_NAME}`, `/v1/secrets/${PAYMENTS_SECRET_NAME}`, { value: secret })];
  if (results[0].ok)
    results.push(await put(`event source ${PAYMENTS_SOURCE}`, `/v1/event-sources/${PAYMENTS_SOURCE}`, paymentsSourceDefinition()));
  return results;
}

/** One line per result, with the refusal's errors or detail. */
export function describeSeedResult(result) {
  if (result.ok) {
    const where = result.answer?.url ? ` → POST ${result.answer.url}` : "";
    return `  ✓ ${result.what}${where}`;
  }
  const lines = [`  ✗ ${result.what}: ${result.status ? `HTTP ${result.status} ` : ""}${result.answer?.title ?? ""}`.trimEnd()];
  for (const error of result.answer?.errors ?? []) lines.push(`      ${error.pointer ?? ""} ${error.message ?? JSON.stringify(error)}`);
  if (result.answer?.detail) lines.push(`      ${result.answer.detail}`);
  return lines.join("\n");
}
