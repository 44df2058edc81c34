/**
 * Retry policy of a vertex: which failures are retried, and after how long.
 *
 * Exponential backoff uses "full jitter" (a uniform delay between 0 and the exponential cap), so
 * that steps failing together against one destination do not retry together. A destination's
 * `Retry-After` is a floor: we never come back sooner than it asked — up to a ceiling
 * (`retryAfterCeilingMs`); a longer demand fails the step, except while the destination says the
 * key's earlier request is still in progress (then we wait at the ceiling).
 */
import { DEFAULT_RETRY, type RetryPolicy } from "../definitions/schema";

/** The queue cannot delay a message longer than 12 hours. */
export const MAX_DELAY_MS = 12 * 3_600_000;

export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/**
 * Delay before the next attempt, after `failedAttempts` attempts of the current budget failed.
 */
export function backoffDelayMs(policy: RetryPolicy = DEFAULT_RETRY, failedAttempts: number, random: () => number): number {
  if (policy.backoff === "fixed") return Math.min(policy.initialDelayMs, policy.maxDelayMs);
  const cap = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** Math.max(0, failedAttempts - 1));
  return Math.floor(random() * cap);
}

/**
 * The longest wait a destination's `Retry-After` can impose on a step, whatever the vertex says:
 * 24 hours (also the schema's bound on `retry.maxDelayMs`). Beyond it a wait is not a retry but a
 * parked step, and its `available_at` would drift towards times no timestamp can render.
 */
export const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

/** The `Retry-After` a vertex honours: its `maxDelayMs`, within `MAX_RETRY_AFTER_MS`. */
export function retryAfterCeilingMs(policy: RetryPolicy): number {
  return Math.min(policy.maxDelayMs, MAX_RETRY_AFTER_MS);
}

export type RetryPlan = { delayMs: number } | { refused: string };

/**
 * The wait before the next attempt of an ordinary retryable failure. `Retry-After` is a floor up
 * to the ceiling; a destination demanding more is refused (the caller fails the step naming both
 * numbers) rather than parking the step. Not capped at the queue's 12-hour delay limit: the
 * step's `available_at` keeps the full delay, the message's delay is capped (`delaySeconds`), and
 * a message that arrives before `available_at` bounces until the step is due (or, after
 * `DROP_REDELIVERY_AT_ATTEMPT` deliveries, is dropped and the reaper re-sends the overdue step).
 */
export function planRetry(policy: RetryPolicy, failedAttempts: number, random: () => number, retryAfterMs?: number): RetryPlan {
  const ceiling = retryAfterCeilingMs(policy);
  if (retryAfterMs !== undefined && retryAfterMs > ceiling) {
    return {
      refused:
        `the destination asked to wait ${describeMs(retryAfterMs)} (Retry-After), over this step's ceiling of ${ceiling} ms ` +
        `(retry.maxDelayMs ${policy.maxDelayMs}, at most ${MAX_RETRY_AFTER_MS}); not retried. Raise retry.maxDelayMs, or retry ` +
        `the step once the destination is back`,
    };
  }
  return { delayMs: Math.max(backoffDelayMs(policy, failedAttempts, random), retryAfterMs ?? 0) };
}

/** `ms` for an error message: seconds when whole, never an unreadable exponent. */
function describeMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

/** The shortest wait between two asks while a destination says "in progress". */
export const MIN_IN_PROGRESS_WAIT_MS = 1_000;

export { DEFAULT_IN_PROGRESS_BUDGET_MS, inProgressBudgetMs } from "../definitions/schema";

/**
 * The wait before asking again a destination that said "in progress": its `Retry-After` (the
 * policy's `initialDelayMs` without one), clamped to the ceiling — here a longer demand is waited
 * at the ceiling, not refused: the earlier request is running and its answer is the one we want —
 * and to the budget left, so the last ask falls at the end of the budget. At least 1 s.
 */
export function inProgressWaitMs(policy: RetryPolicy, retryAfterMs: number | undefined, budgetLeftMs: number): number {
  const wanted = retryAfterMs ?? policy.initialDelayMs;
  return Math.max(MIN_IN_PROGRESS_WAIT_MS, Math.min(wanted, retryAfterCeilingMs(policy), budgetLeftMs));
}

/**
 * `Retry-After` as delay-seconds or an HTTP date (RFC 9110 §10.2.3) in milliseconds from `now`;
 * undefined when absent or not one of those. Never more than `Number.MAX_SAFE_INTEGER` (a value
 * of 400 digits is "very long", not Infinity), never negative (a date in the past means now).
 */
export function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Math.min(Number(trimmed) * 1000, Number.MAX_SAFE_INTEGER);
  // An HTTP date names its day and month; without letters ("-1", "1.5") it is garbage, however
  // leniently Date.parse would read it.
  if (!/[a-z]/i.test(trimmed)) return undefined;
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.min(Math.max(0, at - now), Number.MAX_SAFE_INTEGER);
}

/** Queue `delaySeconds` covering `ms` (rounded up: arriving early would only bounce again). */
export function delaySeconds(ms: number): number {
  return Math.min(Math.ceil(Math.max(0, ms) / 1000), MAX_DELAY_MS / 1000);
}
