/**
 * Which value `{{ secrets.NAME }}` means for a workspace (SPEC section 3: secrets are scoped per
 * workspace). In order:
 * 1. the workspace's own secret NAME (D1, sealed; PUT /v1/secrets/NAME);
 * 2. the Worker secret NAME, only if the deployment grants it to this workspace in `SECRET_GRANTS`;
 * 3. otherwise the secret is missing — and the error names only this workspace's options, never
 *    another workspace nor whether an ungranted Worker secret exists.
 * A stored row that does not open fails closed (SecretUnreadableError): it never falls back to a
 * granted Worker secret, which would silently send a different credential.
 */
import { keyringFrom, MasterKeyError, openSecret, SecretUnreadableError, type Keyring } from "./crypto";
import type { StoredSecret } from "./store";

/**
 * Names that are idemflow's own credentials, never a workflow's: `API_TOKENS` maps every
 * workspace's bearer token, `OPERATOR_TOKENS` the operator's, the master keys open every
 * workspace's secrets. Not resolvable, not grantable, not storable.
 */
export const RESERVED_SECRETS: ReadonlySet<string> = new Set([
  "API_TOKENS",
  "OPERATOR_TOKENS",
  "SECRETS_MASTER_KEY",
  "SECRETS_MASTER_KEY_PREVIOUS",
]);

export class MissingSecretError extends Error {
  constructor(
    readonly secretName: string,
    reserved = false,
  ) {
    super(
      reserved
        ? `{{ secrets.${secretName} }} names idemflow's own credential, which is never sent to a destination; ` +
            "store the destination's credential under its own secret name and reference that"
        : `the secret ${secretName} referenced as {{ secrets.${secretName} }} is not set for this workspace; ` +
            `set it with \`PUT /v1/secrets/${secretName}\` (or have the deployment grant this workspace the Worker secret: ` +
            `\`wrangler secret put ${secretName}\` and SECRET_GRANTS in wrangler.toml) and retry the step`,
    );
    this.name = "MissingSecretError";
  }
}

/**
 * `SECRET_GRANTS`: `workspace:NAME,NAME;workspace:NAME` (entries separated by `;` or newlines).
 * Malformed entries grant nothing: a typo fails closed, as a missing secret.
 */
export function parseGrants(spec: unknown): Map<string, Set<string>> {
  const grants = new Map<string, Set<string>>();
  if (typeof spec !== "string") return grants;
  for (const entry of spec.split(/[;\n]/)) {
    const at = entry.indexOf(":");
    if (at <= 0) continue;
    const workspace = entry.slice(0, at).trim();
    const names = entry
      .slice(at + 1)
      .split(",")
      .map((n) => n.trim())
      .filter((n) => n.length > 0 && !RESERVED_SECRETS.has(n));
    if (workspace === "" || names.length === 0) continue;
    const set = grants.get(workspace) ?? new Set<string>();
    for (const n of names) set.add(n);
    grants.set(workspace, set);
  }
  return grants;
}

export function isGranted(env: Record<string, unknown>, workspace: string, name: string): boolean {
  return parseGrants(env.SECRET_GRANTS).get(workspace)?.has(name) ?? false;
}

export interface SecretScope {
  workspace: string;
  /** The workspace's sealed rows that the caller loaded (at least every name it will ask for). */
  stored: readonly StoredSecret[];
  env: Record<string, unknown>;
}

export type SecretLookup = (name: string) => Promise<string>;

/**
 * A lookup for one workspace. Throws `MissingSecretError`, `SecretUnreadableError` or
 * `MasterKeyError` (a stored row while the master key is unset or malformed).
 */
export function secretLookup(scope: SecretScope): SecretLookup {
  let keyring: Promise<Keyring> | undefined;
  return async (name) => {
    if (RESERVED_SECRETS.has(name)) throw new MissingSecretError(name, true);
    const row = scope.stored.find((s) => s.name === name);
    if (row) {
      keyring ??= keyringFrom(scope.env);
      return openSecret(await keyring, scope.workspace, name, row);
    }
    const worker = scope.env[name];
    if (isGranted(scope.env, scope.workspace, name) && typeof worker === "string" && worker.length > 0) return worker;
    throw new MissingSecretError(name);
  };
}

/**
 * A secret's value, or why it cannot be had (missing, unreadable, no master key) for a caller that
 * answers the reason itself — a public route's signing secret, whose reason goes only to the
 * operator's log. Any other failure is thrown.
 */
export async function lookupOrReason(lookup: SecretLookup, name: string): Promise<{ value: string } | { reason: string }> {
  try {
    return { value: await lookup(name) };
  } catch (error) {
    if (!(error instanceof MissingSecretError || error instanceof SecretUnreadableError || error instanceof MasterKeyError)) throw error;
    return { reason: error.message };
  }
}
