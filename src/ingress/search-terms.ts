/**
 * The search parameters of `GET /v1/executions` turned into what the ledger looks up (SPEC section
 * 15, docs/ingress.md "Search by business id"): one search at a time.
 *
 * - `identity`: a business value a trigger identity was built from → its hashes, read as
 *   ./identity-values.ts says (`1001` is the number and the string).
 * - `destinationKey`: a key a step sent, as sent.
 * - `keyPrefix` with `keyValues`: a key made by `$idempotencyKey(prefix, …values)` — a hash no one
 *   types — computed here by that very helper, in every shape a destination's constraints can cut
 *   it to (a step with a profile or `maxLength` sends a shorter digest: src/expressions/key-shape.ts),
 *   so the search finds it whatever the step declared.
 *
 * A refusal is the list's 400 `invalid-query`, naming the parameter.
 */
import { KEY_ALPHABETS } from "../definitions/key-profiles";
import { idempotencyKey, shapedIdempotencyKey } from "../expressions/key-helpers";
import { keyShape } from "../expressions/key-shape";
import { errorMessage } from "../lib/log";
import type { SearchTerm } from "../ledger";
import { executionProblems } from "../steps/problems";
import { identitySearchHashes, MAX_INDEXED_VALUE_BYTES } from "./identity-values";

export interface SearchParams {
  identity?: string | undefined;
  destinationKey?: string | undefined;
  keyPrefix?: string | undefined;
  keyValues?: string | undefined;
}

const ONE_SEARCH = "search by one of identity, destinationKey, or keyPrefix with keyValues at a time";

/** The search the parameters ask for; null when they ask for none (the plain list). */
export async function searchTermOf(workspace: string, q: SearchParams): Promise<SearchTerm | null> {
  if (q.keyValues !== undefined && q.keyPrefix === undefined) throw refuse("keyPrefix", "required with keyValues");
  if (q.keyPrefix !== undefined && q.keyValues === undefined) throw refuse("keyValues", "required with keyPrefix");
  const given = (["identity", "destinationKey", "keyPrefix"] as const).filter((name) => q[name] !== undefined);
  if (given.length > 1) throw refuse(given[1]!, ONE_SEARCH);
  if (q.identity !== undefined) {
    const hashes = await identitySearchHashes(workspace, q.identity);
    if (hashes.length === 0) throw refuse("identity", `longer than any indexed value (${MAX_INDEXED_VALUE_BYTES} bytes as canonical JSON)`);
    return { by: "identity", hashes };
  }
  if (q.destinationKey !== undefined) return { by: "key", keys: [q.destinationKey] };
  if (q.keyPrefix !== undefined) return { by: "key", keys: await helperKeys(q.keyPrefix, parseKeyValues(q.keyValues!)) };
  return null;
}

/** `keyValues`: a JSON array of at least one value (JSON keeps the types: `[1001]` and `["1001"]` are two keys). */
function parseKeyValues(text: string): unknown[] {
  let values: unknown;
  try {
    values = JSON.parse(text);
  } catch {
    values = undefined;
  }
  if (!Array.isArray(values) || values.length === 0) throw refuse("keyValues", 'a JSON array of the business values, e.g. ["A-1001"]');
  return values;
}

/**
 * Every key `$idempotencyKey(prefix, …values)` can be: unshaped (what it makes outside a key
 * expression with constraints), and shaped for each alphabet a step may declare and each length
 * from the shortest a safe digest allows to the longest that changes anything — each distinct
 * shape once (about 70 keys, one index probe each).
 */
export async function helperKeys(prefix: string, values: unknown[]): Promise<string[]> {
  let plain: string;
  try {
    plain = await idempotencyKey(prefix, ...values);
  } catch (error) {
    throw refuse("keyValues", errorMessage(error));
  }
  const keys = new Set([plain]);
  const shapes = new Set<string>();
  for (const alphabet of Object.values(KEY_ALPHABETS)) {
    // The longest digest is 64 hex characters; past prefix + separator + 64 no shape changes.
    for (let maxLength = prefix.length + 1; maxLength <= prefix.length + 1 + 64; maxLength++) {
      const constraints = { minLength: 1, maxLength, alphabet };
      const shaped = keyShape(prefix, constraints);
      if ("error" in shaped) continue;
      const shape = JSON.stringify(shaped.shape);
      if (shapes.has(shape)) continue;
      shapes.add(shape);
      keys.add(await shapedIdempotencyKey(constraints, prefix, ...values));
    }
  }
  return [...keys];
}

const refuse = (name: string, message: string) => executionProblems.invalidParameter(name, message);
