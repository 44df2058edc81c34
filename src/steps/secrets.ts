/**
 * `{{ secrets.NAME }}` in Gateway header values: resolved for the execution's workspace at send
 * time (src/secrets/resolve.ts: its own sealed secret, else a Worker secret granted to it), and
 * replaced by `[redacted]` in everything that is recorded. Resolved values are also scrubbed
 * from anything stored from the response (a destination that echoes a header must not leak it).
 */

import { ownRecord } from "../lib/own-member";
import type { SecretLookup } from "../secrets/resolve";

export const REDACTED = "[redacted]";
const PLACEHOLDER = /\{\{\s*secrets\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

export { MissingSecretError, RESERVED_SECRETS } from "../secrets/resolve";

export interface ResolvedHeaders {
  /** What is sent. Never stored, logged or returned. */
  send: Record<string, string>;
  /** What is recorded. */
  redacted: Record<string, string>;
  /** The secret values used, to scrub them from anything recorded afterwards. */
  values: string[];
}

/** The secret names a configured header value references (its text as written in the definition). */
export function secretNamesIn(configured: string): Set<string> {
  return new Set([...configured.matchAll(PLACEHOLDER)].map((m) => m[1]!));
}

/**
 * Resolve placeholders in the (evaluated) header values. Only the secrets the header's CONFIGURED
 * text names are resolved (`allowed`): an expression's result is data — often the trigger payload
 * — and a payload carrying `{{ secrets.PAYMENTS_KEY }}` must not make idemflow send that secret.
 * A placeholder that is not allowed stays literal text, in what is sent and in what is recorded.
 */
export async function resolveSecrets(
  headers: Record<string, string>,
  lookup: SecretLookup,
  allowed: (headerName: string) => ReadonlySet<string>,
): Promise<ResolvedHeaders> {
  // Look every named secret up first (the lookup is async; String.replace is not).
  const resolvedByName = new Map<string, string>();
  for (const [name, value] of Object.entries(headers)) {
    const names = allowed(name);
    for (const m of value.matchAll(PLACEHOLDER)) {
      const secretName = m[1]!;
      if (names.has(secretName) && !resolvedByName.has(secretName)) resolvedByName.set(secretName, await lookup(secretName));
    }
  }
  // Without a prototype: a header's name is the tenant's, and `send["__proto__"] = …` would drop it.
  const send: Record<string, string> = ownRecord();
  const redacted: Record<string, string> = ownRecord();
  for (const [name, value] of Object.entries(headers)) {
    const names = allowed(name);
    send[name] = value.replace(PLACEHOLDER, (match, secretName: string) =>
      names.has(secretName) ? resolvedByName.get(secretName)! : match,
    );
    redacted[name] = value.replace(PLACEHOLDER, (match, secretName: string) => (names.has(secretName) ? REDACTED : match));
  }
  return { send, redacted, values: [...resolvedByName.values()] };
}

/** Replace every occurrence of the given secret values in `text`. */
export function scrubSecrets(text: string, values: readonly string[]): string {
  let out = text;
  for (const value of values) if (value.length > 0) out = out.split(value).join(REDACTED);
  return out;
}

/**
 * Scrub secret values from a JSON-like value: every string and every object key, recursively.
 * Done on the values, not on serialized JSON text, so a secret that JSON would escape (a quote,
 * a backslash) is still found, and a replacement can never break the JSON around it.
 */
export function scrubDeep(value: unknown, values: readonly string[]): unknown {
  if (values.length === 0) return value;
  if (typeof value === "string") return scrubSecrets(value, values);
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, values));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [scrubSecrets(k, values), scrubDeep(v, values)]));
  }
  return value;
}
