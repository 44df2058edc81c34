/**
 * Retry policy of a vertex: which failures are retried, and after how long.
 *
 * Exponential backoff uses "full jitter" (a uniform delay between 0 and the exponential cap), so
 * that steps failing together against one destination do not retry together. A destination's
 * `Retry-After` is a floor: we never come back sooner than it asked.
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
 * Not capped at the queue's 12-hour delay limit: the step's `available_at` keeps the full delay
 * (a `Retry-After` of a day means a day), the message's delay is capped (`delaySeconds`), and a
 * message that arrives before `available_at` bounces until the step is due (or, after
 * `DROP_REDELIVERY_AT_ATTEMPT` deliveries, is dropped and the reaper re-sends the overdue step).
 */
export function retryDelayMs(policy: RetryPolicy, failedAttempts: number, random: () => number, retryAfterMs?: number): number {
  return Math.max(backoffDelayMs(policy, failedAttempts, random), retryAfterMs ?? 0);
}

/** `Retry-After` as delay-seconds or an HTTP date (RFC 9110 §10.2.3); undefined when absent/invalid. */
export function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

/** Queue `delaySeconds` covering `ms` (rounded up: arriving early would only bounce again). */
export function delaySeconds(ms: number): number {
  return Math.min(Math.ceil(Math.max(0, ms) / 1000), MAX_DELAY_MS / 1000);
}
