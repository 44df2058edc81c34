/**
 * Standard Webhooks (https://www.standardwebhooks.com, the scheme Svix sends): a delivery carries
 *
 *     webhook-id:        the message's id, the same on every retry of it
 *     webhook-timestamp: Unix seconds, when this attempt was signed
 *     webhook-signature: space-separated `v1,<base64>` entries (several while a secret rotates)
 *
 * where `<base64>` = base64(HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>." + raw body)) and
 * the key is the base64-decoded part of the `whsec_…` secret. A delivery verifies when any `v1`
 * entry matches (other versions, e.g. `v1a` asymmetric signatures, are skipped) and its timestamp
 * is within the tolerance of now, both ways: signing the id and the timestamp makes the tolerance
 * a replay defence, and a replay inside it carries the same id, which deduplicates.
 *
 * Pure functions over WebCrypto, no problem+json: src/events/source-signature.ts answers for the
 * route, and the demo payments destination signs with `signStandardWebhook`.
 */
import { concatBytes, timingSafeEqualStrings, utf8, type Bytes } from "../lib/crypto";

export const WEBHOOK_ID_HEADER = "webhook-id";
export const WEBHOOK_TIMESTAMP_HEADER = "webhook-timestamp";
export const WEBHOOK_SIGNATURE_HEADER = "webhook-signature";

const SECRET_PREFIX = "whsec_";
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The HMAC key of a secret: the base64 after `whsec_` (the prefix is optional), or null when it is not base64. */
export function webhookSecretKey(secret: string): Bytes | null {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  if (encoded.length % 4 !== 0 || !BASE64.test(encoded)) return null;
  let binary: string;
  try {
    binary = atob(encoded);
  } catch {
    return null;
  }
  if (binary.length === 0) return null;
  return Uint8Array.from(binary, (c) => c.charCodeAt(0)) as Bytes;
}

/** The exact bytes signed: `<id>.<timestamp>.` followed by the raw body. */
export function signedContent(id: string, timestamp: string, raw: Uint8Array): Bytes {
  return concatBytes([utf8(`${id}.${timestamp}.`), raw]);
}

/** The signature's base64 (without the `v1,` label). */
export async function standardWebhookSignature(key: Bytes, id: string, timestamp: string, raw: Uint8Array): Promise<string> {
  const hmac = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", hmac, signedContent(id, timestamp, raw)));
  let binary = "";
  for (const b of mac) binary += String.fromCharCode(b);
  return btoa(binary);
}

/** The three headers of a signed delivery, as a sender sends them. Throws when the secret is not a `whsec_…` base64 secret. */
export async function signStandardWebhook(
  secret: string,
  id: string,
  timestampSeconds: number,
  raw: Uint8Array,
): Promise<Record<string, string>> {
  const key = webhookSecretKey(secret);
  if (!key) throw new Error("a Standard Webhooks secret is `whsec_` followed by base64");
  const timestamp = String(Math.floor(timestampSeconds));
  return {
    [WEBHOOK_ID_HEADER]: id,
    [WEBHOOK_TIMESTAMP_HEADER]: timestamp,
    [WEBHOOK_SIGNATURE_HEADER]: `v1,${await standardWebhookSignature(key, id, timestamp, raw)}`,
  };
}

/**
 * The base64 of every `v1,` entry of a signature header, in order — every one, as the reference
 * library reads them (the header's size is the runtime's bound; one comparison each). Several
 * `webhook-signature` lines arrive joined by ", " (Fetch's `Headers.get`), so an entry's trailing
 * comma is the join, never part of base64: either line order gives the same answer.
 */
export function presentedSignatures(header: string): string[] {
  const out: string[] = [];
  for (const raw of header.trim().split(/\s+/)) {
    const entry = raw.endsWith(",") ? raw.slice(0, -1) : raw;
    const comma = entry.indexOf(",");
    if (comma > 0 && entry.slice(0, comma) === "v1") out.push(entry.slice(comma + 1));
  }
  return out;
}

export type StandardWebhookVerdict =
  | { ok: true; id: string; timestamp: string }
  | { ok: false; reason: "missing" }
  | { ok: false; reason: "stale"; timestamp: string }
  | { ok: false; reason: "invalid" };

/**
 * Checks in the order a sender can act on: the three headers are there, the timestamp is Unix
 * seconds within `toleranceSeconds` of now, a `v1` entry matches (each compared in constant time).
 */
export async function verifyStandardWebhook(input: {
  key: Bytes;
  headers: Headers;
  raw: Uint8Array;
  nowMs: number;
  toleranceSeconds: number;
}): Promise<StandardWebhookVerdict> {
  const id = input.headers.get(WEBHOOK_ID_HEADER);
  const timestamp = input.headers.get(WEBHOOK_TIMESTAMP_HEADER);
  const signature = input.headers.get(WEBHOOK_SIGNATURE_HEADER);
  if (id === null || id === "" || timestamp === null || signature === null) return { ok: false, reason: "missing" };
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(input.nowMs / 1000 - Number(timestamp)) > input.toleranceSeconds) {
    return { ok: false, reason: "stale", timestamp };
  }
  const expected = await standardWebhookSignature(input.key, id, timestamp, input.raw);
  let matched = false;
  // Every entry is compared, so the time taken does not say which one matched.
  for (const presented of presentedSignatures(signature)) matched = (await timingSafeEqualStrings(presented, expected)) || matched;
  return matched ? { ok: true, id, timestamp } : { ok: false, reason: "invalid" };
}
