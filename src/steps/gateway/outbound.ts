/**
 * Phase 3 of a Gateway attempt: what may leave. `{{ secrets.NAME }}` resolved in header values
 * for the execution's workspace, and the host checked against the outbound allowlist. Both
 * failures are final (not retried): a person must set the secret or widen the allowlist first.
 */
import { isExpression } from "../../definitions/schema";
import { MasterKeyError, SecretUnreadableError } from "../../secrets/crypto";
import type { SecretLookup } from "../../secrets/resolve";
import { isAllowed } from "../../lib/allowlist";
import { MissingSecretError, resolveSecrets, secretNamesIn, type ResolvedHeaders } from "../secrets";

/**
 * Secrets only where the definition's own literal header text names them (the rule the
 * definition validator enforces): never in the key (it is persisted and shown in the trace),
 * never in what an expression produced (data, e.g. the payload, could carry a template).
 */
export async function resolveHeaderSecrets(
  headers: Record<string, string>,
  configured: Record<string, string>,
  keyHeaderName: string | undefined,
  secret: SecretLookup,
): Promise<{ resolved: ResolvedHeaders } | { error: string }> {
  const none: ReadonlySet<string> = new Set();
  try {
    const resolved = await resolveSecrets(headers, secret, (name) => {
      const text = configured[name];
      return name === keyHeaderName || text === undefined || isExpression(text) ? none : secretNamesIn(text);
    });
    return { resolved };
  } catch (error) {
    if (error instanceof MissingSecretError || error instanceof SecretUnreadableError || error instanceof MasterKeyError) {
      return { error: error.message };
    }
    throw error;
  }
}

/** Why the URL may not be called, or null when its host is on `OUTBOUND_ALLOWLIST`. */
export function allowlistRefusal(url: URL, allowlist: string | undefined): string | null {
  if (isAllowed(url, allowlist)) return null;
  return (
    `${url.host} is not in OUTBOUND_ALLOWLIST; add "${url.hostname}:${url.port || (url.protocol === "https:" ? 443 : 80)}" ` +
    `to the var in wrangler.toml to allow it`
  );
}
