/**
 * Phase 2 of a Gateway attempt: the destination key.
 *
 * The key an earlier attempt persisted wins; otherwise the key expression is evaluated, checked
 * against the destination's constraints (by default 1–255 printable ASCII: src/lib/key-constraints.ts)
 * and persisted — fenced, only-if-absent — BEFORE the first send, so every retry, takeover and
 * operator retry sends the same value, wherever it travels (./body-key.ts places a body field).
 * A key that fails the check fails the step, nothing sent: the same expression would produce it
 * again — and so does a key built from a value that is absent, null or empty (its parts are checked
 * first: src/definitions/key-parts.ts), which would be the same key for every execution lacking it.
 */
import { DEFAULT_KEY_HEADER, type DestinationKey } from "../../definitions/destination-key";
import { absentKeyPart, type Absence } from "../../definitions/key-parts";
import { DEFAULT_LIMITS, evaluateValue } from "../../expressions/evaluate";
import { EXPRESSION_PREFIX, isExpression } from "../../definitions/schema";
import { DEFAULT_KEY_CONSTRAINTS, validateKey } from "../../lib/key-constraints";
import { errorMessage } from "../../lib/log";
import { guardOf, type KeyGuard, type KeySend, type PersistedKey } from "../../ledger";
import type { ExpressionContext } from "../plan";

/** Where a destination's key travels, what the destination accepts in it, and who declared it. */
export type DestinationKeyRule = Pick<DestinationKey, "location" | "constraints" | "declaredBy"> & {
  /** How long the destination remembers a key, when declared: the key's send is then guarded (kept for good). */
  retentionMs?: number | null;
};

/** The original form: an `Idempotency-Key` header, 1–255 printable ASCII. */
export const DEFAULT_DESTINATION_KEY: DestinationKeyRule = Object.freeze({
  location: Object.freeze({ header: DEFAULT_KEY_HEADER }),
  constraints: DEFAULT_KEY_CONSTRAINTS,
  declaredBy: "header",
});

/**
 * How errors name where the key travels: the declared header, or the body field's pointer. The
 * original form is always named `Idempotency-Key`, whatever the letter case it was written in.
 */
export function keyLabel(rule: DestinationKeyRule): string {
  if (rule.declaredBy === "header") return DEFAULT_KEY_HEADER;
  return "header" in rule.location ? rule.location.header : `body field ${rule.location.bodyField}`;
}

/** The header that carries the key, matched in any letter case; false for a body-field key. */
export function isKeyHeader(name: string, rule: DestinationKeyRule | null): boolean {
  return rule !== null && "header" in rule.location && name.toLowerCase() === rule.location.header.toLowerCase();
}

/**
 * What the key expression produced, as a key, or why it is not one. A finite number is taken as
 * its decimal text (an order number is a fine key); anything else that is not a string is refused.
 */
export function checkDestinationKey(value: unknown, rule: DestinationKeyRule): { key: string } | { error: string } {
  const { constraints } = rule;
  const label = keyLabel(rule);
  if (typeof value === "number" && Number.isFinite(value)) value = String(value);
  if (typeof value !== "string") {
    return { error: `the ${label} expression produced ${value === undefined ? "nothing" : typeof value}, not a string` };
  }
  const check = validateKey(value, constraints);
  if (check.ok) return { key: value };
  // The length first: of a key that breaks both rules, the length is the part to fix.
  if (check.problems[0].reason !== "bad_character") {
    return {
      error:
        `the ${label} must be ${constraints.minLength}-${constraints.maxLength} characters, got ${value.length}; use ` +
        `$idempotencyKey(prefix, …) to bound it`,
    };
  }
  return {
    error: `the ${label} must be ${constraints.alphabet.name} only; use $idempotencyKey(prefix, …) to encode other values`,
  };
}

export interface KeyStore {
  /** The key an earlier attempt persisted, from the claim. */
  persistedKey: string | null;
  /** When the persisted key was first sent to each destination (origin), from the claim. */
  keySends: Record<string, KeySend>;
  /** When the step was created: no later than any send of its key (dates a send not on record). */
  stepCreatedAt: number;
  /** Fenced, only-if-absent persist with the first send to `destination` recorded; null when fenced out. */
  persistKey: (key: string, destination: string, guarded: KeyGuard) => Promise<PersistedKey | null>;
  /** Record a send of the persisted key to `destination`, dated `at`, unless one is on record; null when fenced out. */
  recordSend: (destination: string, at: number, guarded: KeyGuard) => Promise<KeySend | null>;
  /** Why the persist of this key wrote nothing, when it was not a takeover (a burnt key); null: taken over. */
  explainUnpersisted?: (key: string) => Promise<string | null>;
  /** Why this newly computed key must not be sent (an undo's key equal to its step's: docs/steps.md "Compensation"); null: send it. */
  refuseKey?: (key: string) => string | null;
}

/** The key to send, and when it was first sent to this destination (the retention guard's fact). */
export type KeyToSend = PersistedKey;

/**
 * The key to send: the persisted one, else evaluated and checked (`evaluateDestinationKey`) and
 * persisted now — with its first send to `destination` on record either way.
 */
export async function resolveKeyToSend(
  vertexId: string,
  expression: string,
  context: ExpressionContext,
  store: KeyStore,
  rule: DestinationKeyRule,
  destination: string,
): Promise<KeyToSend | { error: string }> {
  if (store.persistedKey !== null) {
    // A key persisted before sends were recorded, or now going to another destination: its step's
    // creation dates the send, which errs toward the guard refusing.
    const send = store.keySends[destination] ?? (await store.recordSend(destination, store.stepCreatedAt, guardOf(rule.retentionMs)));
    if (send === null) return { error: TAKEN_OVER };
    return { key: store.persistedKey, send };
  }
  const checked = await evaluateDestinationKey(vertexId, expression, context, rule);
  if ("error" in checked) return checked;
  const refused = store.refuseKey?.(checked.key) ?? null;
  if (refused !== null) return { error: refused };
  // A key with a declared retention is guarded: its send is kept after its execution is swept (and hot for that retention).
  const stored = await store.persistKey(checked.key, destination, guardOf(rule.retentionMs));
  if (stored === null) return { error: (await store.explainUnpersisted?.(checked.key)) ?? TAKEN_OVER };
  return stored;
}

/**
 * The key expression's value, checked as a key — or why it is not one (the step fails with it). A
 * declared key's expression is evaluated with the destination's constraints, so its
 * `$idempotencyKey` fits them (src/expressions/key-shape.ts); the header form's is evaluated as it
 * always was.
 */
export async function evaluateDestinationKey(
  vertexId: string,
  expression: string,
  context: ExpressionContext,
  rule: DestinationKeyRule,
): Promise<{ key: string } | { error: string }> {
  let checked: { key: string } | { error: string };
  try {
    const shape = rule.declaredBy === "declaration" ? rule.constraints : undefined;
    const absent = isExpression(expression) ? await absentKeyPart(expression.slice(EXPRESSION_PREFIX.length), context, shape) : null;
    checked = absent
      ? { error: absentPartError(absent.part, absent.absence) }
      : checkDestinationKey(await evaluateValue(expression, context, DEFAULT_LIMITS, shape), rule);
  } catch (error) {
    checked = { error: errorMessage(error) };
  }
  return "error" in checked ? { error: `gateway ${vertexId}: invalid ${keyLabel(rule)}: ${checked.error}` } : checked;
}

/**
 * A key never collapses on absent data (SPEC section 3, src/definitions/key-parts.ts): built
 * without the value, it would be the same for every execution that lacks it, and the destination
 * would answer the second with the first one's result. The step fails before anything is sent.
 */
function absentPartError(part: string, absence: Absence): string {
  return (
    `the key's value \`${part.length > 120 ? `${part.slice(0, 120)}…` : part}\` is absent (${absence}), so the key would be the same ` +
    "for every execution that lacks it and the destination would take them as one operation; give the trigger that " +
    "value (or key on one every trigger carries). Nothing was sent; not retried"
  );
}

const TAKEN_OVER = "the step was taken over before its key was persisted; nothing was sent";
