/**
 * Execution identity (SPEC section 3): SHA-256 (hex) over the RFC 8785 canonical JSON of a tuple.
 *
 * Canonical JSON of an array is unambiguous — every element is delimited and every string quoted
 * and escaped — so `("ab", "c")` and `("a", "bc")` encode as `["ab","c"]` and `["a","bc"]`, never
 * as the same bytes. Plain concatenation would let them collide.
 *
 * The tuple is `[workspace, workflowId, entryVertexId, kind, material]` for production triggers
 * (webhook, hook, schedule). Test and stream runs that opt out of `forceNewExecution` append a
 * sixth element, their scope (`"test"` or `"stream"`), so each invocation kind has its own space:
 * a 6-tuple never encodes like a 5-tuple (no test or stream run can deduplicate against — or
 * block — production traffic), and the two scopes differ in the sixth element (a stream run
 * never returns a test run's execution, whose events it could not have streamed, and vice versa).
 */
import { canonicalJson } from "../lib/canonical-json";
import { sha256Hex, toHex } from "../lib/crypto";
import type { IdentityKind } from "../ledger";

/** One identity space per invocation kind; only production omits the sixth element. */
export type IdentityScope = "production" | "test" | "stream";

export interface IdentityInput {
  workspace: string;
  workflowId: string;
  entryVertexId: string;
  kind: Exclude<IdentityKind, "forced">;
  /** Any JSON value; see `material.ts` for what each kind puts here. */
  material: unknown;
  scope: IdentityScope;
}

export function identityTuple(input: IdentityInput): unknown[] {
  const tuple: unknown[] = [input.workspace, input.workflowId, input.entryVertexId, input.kind, input.material];
  if (input.scope !== "production") tuple.push(input.scope);
  return tuple;
}

export function deriveIdentity(input: IdentityInput): Promise<string> {
  return sha256Hex(canonicalJson(identityTuple(input)));
}

/**
 * The execution id of a dedupe window of an identity — every window, the first one too: no run's
 * id is the bare identity (docs/history.md "Tombstones and ids"). The window's start is the claim's
 * `now`, which strictly increases per identity (a window is taken over only after the previous one
 * ended), so an id derived from it is never given twice — not even once every row and tombstone of
 * an earlier run of the same trigger is gone, which is what state keyed by the id (a wait's key,
 * a destination key built from `execution.id`, an archive object) needs.
 */
export function windowExecutionId(identity: string, windowStart: number): Promise<string> {
  return sha256Hex(canonicalJson(["window", identity, windowStart]));
}

/**
 * The id a claim uses when an execution row or a tombstone already holds its window's id — which
 * only a clock that stepped back (or two windows in one millisecond) can cause: derived from the
 * identity, the window's start and the claim's random token, so it is never given twice either.
 */
export function alternateExecutionId(identity: string, windowStart: number, claimToken: string): Promise<string> {
  return sha256Hex(canonicalJson(["window", identity, windowStart, claimToken]));
}

/** A forced run's id: 256 random bits, hex (same shape as derived ids). */
export function randomExecutionId(): string {
  return toHex(crypto.getRandomValues(new Uint8Array(32)));
}

/** A claim token: random per request, so the identity row names exactly one claimant. */
export function randomClaimToken(): string {
  return toHex(crypto.getRandomValues(new Uint8Array(16)));
}
