/** Shared by the event source tests: requests to the real Worker, and deliveries signed as a provider signs them. */
import { SELF } from "cloudflare:test";
import { hmacSha256, toHex } from "../../src/lib/crypto";

export const BASE = "http://idemflow.test";

let counter = 0;
/** A fresh name per call: storage is shared by every test of a file. Letters, digits and `-` only (a source name). */
export function unique(prefix: string): string {
  counter += 1;
  return `${prefix}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}

/** A bearer request to the Worker; `body` as JSON unless a string. */
export function api(method: string, path: string, body?: unknown, token = "dev-token"): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  return SELF.fetch(`${BASE}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** A Standard Webhooks secret made of `text`'s bytes. */
export const whsec = (text: string) => `whsec_${btoa(text)}`;

/**
 * The Standard Webhooks headers, written out from the recipe (not taken from src): `v1,` +
 * base64(HMAC-SHA256(base64-decoded secret, "<id>.<timestamp>.<body>")).
 */
export async function standardHeaders(secret: string, id: string, timestampSeconds: number, body: string): Promise<Record<string, string>> {
  const bytes = Uint8Array.from(atob(secret.replace(/^whsec_/, "")), (c) => c.charCodeAt(0));
  const key = await crypto.subtle.importKey("raw", bytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const timestamp = String(timestampSeconds);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${id}.${timestamp}.${body}`)));
  return { "webhook-id": id, "webhook-timestamp": timestamp, "webhook-signature": `v1,${btoa(String.fromCharCode(...mac))}` };
}

/** The v1 headers for an event source, written out: target `<workspace>:events/<source>` in the hooks' recipe. */
export async function v1Headers(secret: string, workspace: string, source: string, timestampSeconds: number, body: string) {
  const timestamp = String(timestampSeconds);
  const mac = toHex(await hmacSha256(secret, `v1:${timestamp}:${workspace}:events/${source}:${body}`));
  return { "x-idemflow-timestamp": timestamp, "x-idemflow-signature": `v1=${mac}` };
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);
