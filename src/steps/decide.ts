/**
 * What an attempt's outcome means for the step, as pure functions of (outcome, claim, policy,
 * now): the ONE transition to apply — complete, fail, retry later, or ask the destination again
 * because it said "in progress". No I/O here; src/steps/run-step.ts applies the transition
 * through the ledger, fenced.
 *
 * Budgets count claims, not calls: `attempt - retryBase` (`claimsCounted`). An operator retry
 * restarts them (`retryBase = attempt`); an in-progress re-check does not count at all.
 */
import { DEFAULT_RETRY, type RetryPolicy } from "../definitions/schema";
import { isoTimeText } from "../lib/iso-time";
import type { PermitWait } from "../ledger/connector-permits";
import type { RunOutcome } from "./outcome";
import type { MapPark } from "../ledger";
import { inProgressBudgetMs, inProgressWaitMs, planRetry } from "./retry-policy";

/** What the claim tells the decision. */
export interface ClaimFacts {
  /** This claim's attempt number (every claim counts one). */
  attempt: number;
  retryBase: number;
  /** When the destination first answered "in progress" since the step was dispatched or operator-retried. */
  inProgressSince: number | null;
}

export type Transition =
  | { kind: "complete"; output: unknown }
  | { kind: "fail"; error: string; output?: unknown }
  /**
   * Back to DISPATCHED, due in `delayMs`, counted against the retry budget. `reason`: the delay is
   * the backoff's, or the destination's `Retry-After` (when it asked for at least as long).
   */
  | { kind: "retry"; delayMs: number; reason: "backoff" | "retry-after"; error: string; output?: unknown }
  /** Back to DISPATCHED, due in `delayMs`, not counted: the destination is still working on the key. */
  | { kind: "recheck_in_progress"; delayMs: number; reason: "in-progress"; detail: string; output?: unknown }
  /** Parked until `until` (a DELAY, a wait's timeout): nothing held, resumed by the claim after it or by an event. */
  | { kind: "park"; until: number; detail: string; waitKey?: string; mapItems?: MapPark }
  /** Parked until `until` for a connector's permit: not an attempt (its claim is undone), no budget spent. */
  | { kind: "await_permit"; until: number; detail: string; wait: PermitWait };

/**
 * Claims a step may take beyond its retry budget without ever settling. Every claim counts as an
 * attempt, and a worker that dies mid-step (a deterministic crash, an output D1 refuses, a
 * request that always exceeds the Worker's limits) never settles: without a bound the takeover
 * and the reaper would re-run it forever. Generous, so chance crashes never exhaust it.
 */
export const CRASH_ALLOWANCE = 10;

/** The claims the retry budget and the crash allowance count (computed here, once). */
export function claimsCounted(claim: ClaimFacts): number {
  return claim.attempt - claim.retryBase;
}

/**
 * Before running: a step claimed more often than its retry budget plus `CRASH_ALLOWANCE` is not
 * run again — the outcome is a failure naming why. Null: run it.
 */
export function overClaimBudget(claim: ClaimFacts, policy: RetryPolicy | null): RunOutcome | null {
  const claims = claimsCounted(claim);
  if (claims <= (policy?.maxAttempts ?? 1) + CRASH_ALLOWANCE) return null;
  return {
    kind: "failed",
    error:
      `gave up: this step was claimed ${claims - 1} times (retries included) without settling — ` +
      "its worker crashed or lost its lease again and again; not run again",
  };
}

const withOutput = (output: unknown) => (output === undefined ? {} : { output });

/**
 * The transition for an attempt's outcome. `policy` is the vertex's retry policy, null for a
 * vertex that is never retried (only Gateway calls meet transient failures); `random` is the
 * jitter source of the backoff.
 */
export function decide(outcome: RunOutcome, claim: ClaimFacts, policy: RetryPolicy | null, now: number, random: () => number): Transition {
  switch (outcome.kind) {
    case "completed":
      return { kind: "complete", output: outcome.output };
    case "parked":
      return {
        kind: "park",
        until: outcome.until,
        detail: outcome.detail,
        ...(outcome.waitKey ? { waitKey: outcome.waitKey } : {}),
        ...(outcome.mapItems ? { mapItems: outcome.mapItems } : {}),
      };
    case "awaiting_permit":
      return { kind: "await_permit", until: outcome.until, detail: outcome.detail, wait: outcome.wait };
    case "failed":
      return { kind: "fail", error: outcome.error, ...withOutput(outcome.output) };
    case "in_progress": {
      const inProgressPolicy = policy ?? DEFAULT_RETRY;
      const since = claim.inProgressSince ?? now;
      const budget = inProgressBudgetMs(inProgressPolicy);
      const waited = now - since;
      if (waited < budget) {
        const delayMs = inProgressWaitMs(inProgressPolicy, outcome.retryAfterMs, since + budget - now);
        const until = isoTimeText(since + budget);
        const detail = `${outcome.error}; asking again in ${delayMs} ms (in-progress budget until ${until})`;
        return { kind: "recheck_in_progress", delayMs, reason: "in-progress", detail, ...withOutput(outcome.output) };
      }
      return {
        kind: "fail",
        error:
          `the destination still answers "in progress" for this step's key ${Math.round(waited / 1000)} s after it first did: ` +
          `the in-progress budget (retry.inProgressBudgetMs ${budget} ms) ran out (${outcome.error}). The earlier request may still ` +
          `finish there: check the destination before an operator retry (it re-sends the same key), or raise retry.inProgressBudgetMs`,
        ...withOutput(outcome.output),
      };
    }
    case "retryable": {
      const used = claimsCounted(claim);
      if (!policy || used >= policy.maxAttempts) {
        return { kind: "fail", error: `gave up after ${used} attempt(s): ${outcome.error}`, ...withOutput(outcome.output) };
      }
      const plan = planRetry(policy, used, random, outcome.retryAfterMs);
      if ("refused" in plan) return { kind: "fail", error: `${outcome.error}: ${plan.refused}`, ...withOutput(outcome.output) };
      // Retry-After is a floor over the backoff: it set the delay when the delay is what it asked for.
      const reason =
        outcome.retryAfterMs !== undefined && outcome.retryAfterMs > 0 && plan.delayMs === outcome.retryAfterMs ? "retry-after" : "backoff";
      return {
        kind: "retry",
        delayMs: plan.delayMs,
        reason,
        error: `attempt ${claim.attempt}: ${outcome.error}`,
        ...withOutput(outcome.output),
      };
    }
  }
}
