/**
 * `{{ secrets.NAME }}` in Gateway header values: resolved from the Worker env at send time, and
 * replaced by `[redacted]` in everything that is recorded. Resolved values are also scrubbed
 * from anything stored from the response (a destination that echoes a header must not leak it).
 */

export const REDACTED = "[redacted]";
const PLACEHOLDER = /\{\{\s*secrets\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

export class MissingSecretError extends Error {
  constructor(
    readonly secretName: string,
    reserved = false,
  ) {
    super(
      reserved
        ? `{{ secrets.${secretName} }} names idemflow's own credential, which is never sent to a destination; ` +
            "store the destination's credential under its own secret name and reference that"
        : `the secret ${secretName} referenced as {{ secrets.${secretName} }} is not set on the Worker; ` +
            `set it with \`wrangler secret put ${secretName}\` (locally: .dev.vars) and retry the step`,
    );
    this.name = "MissingSecretError";
  }
}

export interface ResolvedHeaders {
  /** What is sent. Never stored, logged or returned. */
  send: Record<string, string>;
  /** What is recorded. */
  redacted: Record<string, string>;
  /** The secret values used, to scrub them from anything recorded afterwards. */
  values: string[];
}

/**
 * Secrets that are idemflow's own credentials, not the workflows': a definition that names one
 * fails like a missing secret. `API_TOKENS` maps every workspace's bearer token — sending it to a
 * destination would hand one workspace the keys to all the others.
 */
export const RESERVED_SECRETS: ReadonlySet<string> = new Set(["API_TOKENS"]);

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
export function resolveSecrets(
  headers: Record<string, string>,
  env: Record<string, unknown>,
  allowed: (headerName: string) => ReadonlySet<string>,
): ResolvedHeaders {
  const send: Record<string, string> = {};
  const redacted: Record<string, string> = {};
  const values: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    const names = allowed(name);
    send[name] = value.replace(PLACEHOLDER, (match, secretName: string) => {
      if (!names.has(secretName)) return match;
      if (RESERVED_SECRETS.has(secretName)) throw new MissingSecretError(secretName, true);
      const secret = env[secretName];
      if (typeof secret !== "string" || secret.length === 0) throw new MissingSecretError(secretName);
      values.push(secret);
      return secret;
    });
    redacted[name] = value.replace(PLACEHOLDER, (match, secretName: string) => (names.has(secretName) ? REDACTED : match));
  }
  return { send, redacted, values };
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
