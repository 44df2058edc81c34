/**
 * The business values of a trigger identity, as the search by business id indexes and looks them
 * up (SPEC section 15, docs/ingress.md "Search by business id", migrations/0021).
 *
 * What is indexed: each `idempotencyFields` value of a `fields` identity, and the
 * `clientIdempotencyId` of a `client` one. A `content` identity is the whole payload — no value a
 * person would search for — and a `schedule` or forced one has none: nothing is indexed for them.
 *
 * How a value is kept: as the hex SHA-256 of the RFC 8785 canonical JSON of
 * `["identity-value", workspace, value]`, never as the value. Canonical JSON is what the identity
 * itself hashes, so the index normalises exactly as the identity does: `1001` and `1001.0` are one
 * value, `1001` and `"1001"` two, object members in any order one. The workspace inside the hash
 * keeps one tenant's values from ever meeting another's, even with the workspace column ignored.
 *
 * Bounds: a value whose canonical JSON is over `MAX_INDEXED_VALUE_BYTES` (UTF-8) is not indexed at
 * all (an object or a long text is nobody's business id, and a query could not carry it), and at
 * most `MAX_INDEXED_VALUES` distinct values per execution are, in the order the fields are listed.
 */
import { canonicalJson } from "../lib/canonical-json";
import { sha256Hex, utf8 } from "../lib/crypto";
import { queryReadings } from "../lib/query-readings";
import { ownMember } from "../lib/own-member";
import type { IdentityKind } from "../ledger";

/** The longest value indexed, as canonical JSON in UTF-8 bytes: a 255-character client id fits with its quotes. */
export const MAX_INDEXED_VALUE_BYTES = 512;

/** The most values indexed per execution (an `idempotencyFields` list may be longer). */
export const MAX_INDEXED_VALUES = 16;

/** The hash a value is indexed under in `workspace`. */
export function identityValueHash(workspace: string, value: unknown): Promise<string> {
  return sha256Hex(canonicalJson(["identity-value", workspace, value]));
}

/**
 * The business values of an identity, before hashing: the client id, or each field's value in the
 * order of the material's members (the paths as listed; read as own members, since a path is the
 * tenant's and `__proto__` is a valid one). None for any other kind.
 */
export function businessValuesOf(kind: Exclude<IdentityKind, "forced">, material: unknown): unknown[] {
  if (kind === "client") return typeof material === "string" ? [material] : [];
  if (kind !== "fields" || material === null || typeof material !== "object") return [];
  return Object.keys(material).map((path) => ownMember(material, path));
}

/**
 * The hashes to index for an identity: its business values within the bounds, each once. Empty for
 * a content, schedule or forced identity — and then the start batch has no statement for them.
 */
export async function identityValueHashes(workspace: string, identity: { kind: IdentityKind; material?: unknown }): Promise<string[]> {
  if (identity.kind === "forced") return [];
  const kept = new Map<string, unknown>();
  for (const value of businessValuesOf(identity.kind, identity.material)) {
    if (kept.size >= MAX_INDEXED_VALUES) break;
    const canonical = indexable(value);
    if (canonical !== null && !kept.has(canonical)) kept.set(canonical, value);
  }
  return Promise.all([...kept.values()].map((value) => identityValueHash(workspace, value)));
}

/** The value's canonical JSON when it may be indexed (within the size bound), else null. */
function indexable(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  const canonical = canonicalJson(value);
  return utf8(canonical).byteLength <= MAX_INDEXED_VALUE_BYTES ? canonical : null;
}

/**
 * How the text of `?identity=` is read: the values it may name, hashed for `workspace`.
 *
 * - Always the text as a string: `A-1001` → `"A-1001"`.
 * - When the text is JSON of another type, that value too, normalised like the identity: `1001` →
 *   the string `"1001"` and the number 1001 (so `1001.0` finds the number 1001 as well); `true` →
 *   `"true"` and `true`. A number the identity could never hold (beyond ±(2^53 − 1)) is only the string.
 * - A JSON string (quoted: `"1001"`) means exactly that string: the way to leave the number out.
 *
 * Empty when no reading fits the index's size bound (the route answers 400 naming the parameter).
 */
export async function identitySearchHashes(workspace: string, text: string): Promise<string[]> {
  const readings = queryReadings(text);
  const kept = new Map<string, unknown>();
  for (const value of readings) {
    const canonical = indexable(value);
    if (canonical !== null) kept.set(canonical, value);
  }
  return Promise.all([...kept.values()].map((value) => identityValueHash(workspace, value)));
}
