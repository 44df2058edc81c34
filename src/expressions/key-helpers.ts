/**
 * Functions for building destination keys inside expressions.
 *
 * `$idempotencyKey(prefix, part1, part2, …)` → `prefix-<base64url(SHA-256(JCS([part1, part2, …])))>`:
 * stable across runs and deployments (it depends only on the business values), scoped per
 * operation by its prefix, and bounded in length (prefix + 44 characters).
 * `$sha256(value)` → lowercase hex SHA-256 of a string (or of the canonical JSON of any other value).
 */
import type jsonata from "jsonata";
import { canonicalJson } from "../lib/canonical-json";
import { sha256, sha256Hex, toBase64Url } from "../lib/crypto";

export const KEY_PREFIX_MAX = 64;

export async function idempotencyKey(prefix: unknown, ...parts: unknown[]): Promise<string> {
  if (typeof prefix !== "string" || !/^[A-Za-z0-9._:-]{1,64}$/.test(prefix)) {
    throw new Error("$idempotencyKey: the prefix must be 1-64 characters of letters, digits, '.', '_', ':' or '-'");
  }
  if (parts.length === 0) throw new Error("$idempotencyKey: pass at least one business value after the prefix");
  parts.forEach((part, i) => {
    if (part === undefined) throw new Error(`$idempotencyKey: value ${i + 1} is missing (undefined); keys must not collapse on absent data`);
  });
  return `${prefix}-${toBase64Url(await sha256(canonicalJson(parts)))}`;
}

export async function sha256Of(value: unknown): Promise<string> {
  if (value === undefined) throw new Error("$sha256: the value is missing (undefined)");
  return sha256Hex(typeof value === "string" ? value : canonicalJson(value));
}

/** The functions idemflow adds to every expression (validation treats them as known). */
export const KEY_HELPER_NAMES: ReadonlySet<string> = new Set(["idempotencyKey", "sha256"]);

export function registerKeyHelpers(expression: jsonata.Expression): void {
  expression.registerFunction("idempotencyKey", (prefix: unknown, ...parts: unknown[]) => idempotencyKey(prefix, ...parts));
  expression.registerFunction("sha256", (value: unknown) => sha256Of(value));
}
