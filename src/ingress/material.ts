/**
 * The identity material of a trigger, by precedence (SPEC section 3):
 *
 * 1. `clientIdempotencyId` — kind `client`, material: the id string;
 * 2. `idempotencyFields` — kind `fields`, material: `{ "<path>": <value>, … }` (JCS sorts the
 *    keys, so the order the paths are listed in does not matter; the paths are part of the
 *    material, so two configurations selecting equal values from different fields stay apart);
 * 3. the payload — kind `content`, material `["json", <value>]` (canonicalised by JCS with the
 *    rest of the tuple: key order and whitespace do not split identities) or
 *    `["bytes", <sha256 hex of the raw body>]` for non-JSON bodies. The tags keep a JSON string
 *    body from ever meeting a raw body with the same text.
 */
import { sha256Hex } from "../lib/crypto";
import type { TriggerBody } from "./payload";
import { ingressProblems } from "./problems";
import { DEFAULT_KEY_CONSTRAINTS, validateKey } from "../lib/key-constraints";
import { ownMember, setOwnMember } from "../lib/own-member";

export type MaterialKind = "client" | "fields" | "content";

/** A client idempotency id follows the same rule as an Idempotency-Key (1–255 printable ASCII). */
export function validateClientIdempotencyId(value: string): string {
  if (!validateKey(value, DEFAULT_KEY_CONSTRAINTS).ok) throw ingressProblems.clientIdInvalid();
  return value;
}

export function fieldPaths(idempotencyFields: string | string[] | undefined): string[] {
  if (idempotencyFields === undefined) return [];
  return typeof idempotencyFields === "string" ? [idempotencyFields] : idempotencyFields;
}

/**
 * The value at a dot path (`order.id`, `items.0.sku`: a numeric segment indexes an array).
 * `undefined` when any segment is absent.
 */
export function valueAtPath(payload: unknown, path: string): unknown {
  let current: unknown = payload;
  for (const segment of path.split(".")) {
    if (Array.isArray(current)) {
      if (!/^\d+$/.test(segment)) return undefined;
      current = current[Number(segment)];
    } else if (current !== null && typeof current === "object") {
      current = Object.prototype.hasOwnProperty.call(current, segment) ? (current as Record<string, unknown>)[segment] : undefined;
    } else {
      return undefined;
    }
    if (current === undefined) return undefined;
  }
  return current;
}

/**
 * Select every configured field. A field that is absent — or null, which would make every
 * delivery without a real value share one identity — is a 422 naming each such field; so is an
 * empty one (`isEmptyIdentityValue`).
 */
export function selectFields(body: TriggerBody, paths: string[]): Record<string, unknown> {
  if (!body.isJson) throw ingressProblems.fieldsNeedJson(paths);
  const selected: Record<string, unknown> = {};
  const missing: string[] = [];
  for (const path of paths) {
    const value = valueAtPath(body.payload, path);
    if (value === undefined || value === null) missing.push(path);
    else setOwnMember(selected, path, value); // a path is the tenant's: `__proto__` is a valid one
  }
  if (missing.length > 0) throw ingressProblems.fieldMissing(missing);
  // An empty value is no identity: every delivery with `"id": ""` would be one execution. (Numbers
  // a float cannot carry were already refused with the body, see payload.ts.)
  const empty = paths.filter((p) => isEmptyIdentityValue(ownMember(selected, p)));
  if (empty.length > 0) throw ingressProblems.fieldEmpty(empty);
  return selected;
}

/**
 * `""`, a string of only whitespace (a blank form field or template), `[]` and `{}` identify
 * nothing. Only the selected value itself is judged: `{"id": ""}` is a non-empty object, and
 * `0` and `false` are values.
 */
export function isEmptyIdentityValue(value: unknown): boolean {
  if (typeof value === "string") return value.trim() === "";
  if (Array.isArray(value)) return value.length === 0;
  if (value !== null && typeof value === "object") return Object.keys(value).length === 0;
  return false;
}

export async function identityMaterial(input: {
  clientIdempotencyId: string | undefined;
  idempotencyFields: string | string[] | undefined;
  body: TriggerBody;
}): Promise<{ kind: MaterialKind; material: unknown }> {
  if (input.clientIdempotencyId !== undefined) {
    return { kind: "client", material: validateClientIdempotencyId(input.clientIdempotencyId) };
  }
  const paths = fieldPaths(input.idempotencyFields);
  if (paths.length > 0) return { kind: "fields", material: selectFields(input.body, paths) };
  if (input.body.isJson) return { kind: "content", material: ["json", input.body.payload] };
  return { kind: "content", material: ["bytes", await sha256Hex(input.body.raw as Uint8Array<ArrayBuffer>)] };
}
