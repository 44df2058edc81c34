/**
 * `{{ secrets.NAME }}` in Gateway header values: resolved from the Worker env at send time, and
 * replaced by `[redacted]` in everything that is recorded. Resolved values are also scrubbed
 * from anything stored from the response (a destination that echoes a header must not leak it).
 */

export const REDACTED = "[redacted]";
const PLACEHOLDER = /\{\{\s*secrets\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

export class MissingSecretError extends Error {
  constructor(readonly secretName: string) {
    super(
      `the secret ${secretName} referenced as {{ secrets.${secretName} }} is not set on the Worker; ` +
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

export function resolveSecrets(headers: Record<string, string>, env: Record<string, unknown>): ResolvedHeaders {
  const send: Record<string, string> = {};
  const redacted: Record<string, string> = {};
  const values: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    send[name] = value.replace(PLACEHOLDER, (_match, secretName: string) => {
      const secret = env[secretName];
      if (typeof secret !== "string" || secret.length === 0) throw new MissingSecretError(secretName);
      values.push(secret);
      return secret;
    });
    redacted[name] = value.replace(PLACEHOLDER, REDACTED);
  }
  return { send, redacted, values };
}

/** Replace every occurrence of the given secret values in `text`. */
export function scrubSecrets(text: string, values: readonly string[]): string {
  let out = text;
  for (const value of values) if (value.length > 0) out = out.split(value).join(REDACTED);
  return out;
}
