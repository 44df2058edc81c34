/**
 * Phase 2 of a Gateway attempt: the destination key.
 *
 * The key an earlier attempt persisted wins; otherwise the key expression is evaluated, checked
 * against the destination's constraints (by default 1–255 printable ASCII: src/lib/key-constraints.ts)
 * and persisted — fenced, only-if-absent — BEFORE the first send, so every retry, takeover and
 * operator retry sends the same value. A key that fails the check fails the step, nothing sent:
 * the same expression would produce it again.
 */
import { evaluateValue } from "../../expressions/evaluate";
import { DEFAULT_KEY_CONSTRAINTS, validateKey, type KeyConstraints } from "../../lib/key-constraints";
import { errorMessage } from "../../lib/log";
import type { ExpressionContext } from "../plan";

/** Which header carries a destination's key, and what the destination accepts in it. */
export interface DestinationKeyRule {
  /** Matched in any letter case against the configured headers; named as written in errors. */
  readonly headerName: string;
  readonly constraints: KeyConstraints;
}

export const DEFAULT_DESTINATION_KEY: DestinationKeyRule = Object.freeze({
  headerName: "Idempotency-Key",
  constraints: DEFAULT_KEY_CONSTRAINTS,
});

export function isKeyHeader(name: string, rule: DestinationKeyRule): boolean {
  return name.toLowerCase() === rule.headerName.toLowerCase();
}

/**
 * What the key expression produced, as a key, or why it is not one. A finite number is taken as
 * its decimal text (an order number is a fine key); anything else that is not a string is refused.
 */
export function checkDestinationKey(value: unknown, rule: DestinationKeyRule): { key: string } | { error: string } {
  const { headerName, constraints } = rule;
  if (typeof value === "number" && Number.isFinite(value)) value = String(value);
  if (typeof value !== "string") {
    return { error: `the ${headerName} expression produced ${value === undefined ? "nothing" : typeof value}, not a string` };
  }
  const check = validateKey(value, constraints);
  if (check.ok) return { key: value };
  // The length first: of a key that breaks both rules, the length is the part to fix.
  if (check.problems[0].reason !== "bad_character") {
    return {
      error:
        `the ${headerName} must be ${constraints.minLength}-${constraints.maxLength} characters, got ${value.length}; use ` +
        `$idempotencyKey(prefix, …) to bound it`,
    };
  }
  return {
    error: `the ${headerName} must be ${constraints.alphabet.name} only; use $idempotencyKey(prefix, …) to encode other values`,
  };
}

export interface KeyStore {
  /** The key an earlier attempt persisted, from the claim. */
  persistedKey: string | null;
  /** Fenced, only-if-absent persist; returns the stored key, or null when fenced out. */
  persistKey: (key: string) => Promise<string | null>;
}

/** The key to send: the persisted one, else evaluated, checked and persisted now. */
export async function resolveDestinationKey(
  vertexId: string,
  expression: string,
  context: ExpressionContext,
  store: KeyStore,
  rule: DestinationKeyRule,
): Promise<{ key: string } | { error: string }> {
  if (store.persistedKey !== null) return { key: store.persistedKey };
  let checked: { key: string } | { error: string };
  try {
    checked = checkDestinationKey(await evaluateValue(expression, context), rule);
  } catch (error) {
    checked = { error: errorMessage(error) };
  }
  if ("error" in checked) return { error: `gateway ${vertexId}: invalid ${rule.headerName}: ${checked.error}` };
  const stored = await store.persistKey(checked.key);
  if (stored === null) return { error: "the step was taken over before its key was persisted; nothing was sent" };
  return { key: stored };
}
