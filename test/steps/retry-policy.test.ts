import { afterEach, describe, expect, it, vi } from "vitest";
import { RetryPolicy } from "../../src/definitions/schema";
import {
  backoffDelayMs,
  delaySeconds,
  inProgressWaitMs,
  MAX_DELAY_MS,
  MAX_RETRY_AFTER_MS,
  parseRetryAfter,
  planRetry,
  retryAfterCeilingMs,
} from "../../src/steps/retry-policy";

const exponential = RetryPolicy.parse({ maxAttempts: 10, backoff: "exponential", initialDelayMs: 1_000, maxDelayMs: 60_000 });
const fixed = RetryPolicy.parse({ maxAttempts: 10, backoff: "fixed", initialDelayMs: 750, maxDelayMs: 60_000 });

/** The largest value a random source in [0, 1) returns. */
const ALMOST_ONE = 1 - Number.EPSILON;
const always = (value: number) => () => value;

afterEach(() => vi.restoreAllMocks());

describe("exponential backoff", () => {
  it("the jitter cap starts at initialDelayMs after the first failure and doubles with every further failure", () => {
    // With the random source at one half, every delay is exactly half its cap.
    const delays = [1, 2, 3, 4, 5].map((failed) => backoffDelayMs(exponential, failed, always(0.5)));
    expect(delays).toEqual([500, 1_000, 2_000, 4_000, 8_000]);
  });

  it("uses full jitter: the delay is uniform over [0, cap) — 0 at the bottom of the random source, just under the cap at its top", () => {
    for (const failed of [1, 2, 3, 4]) {
      const cap = 1_000 * 2 ** (failed - 1);
      expect(backoffDelayMs(exponential, failed, always(0))).toBe(0);
      expect(backoffDelayMs(exponential, failed, always(ALMOST_ONE))).toBe(cap - 1);
      for (const r of [0.01, 0.25, 0.5, 0.75, 0.99]) {
        const delay = backoffDelayMs(exponential, failed, always(r));
        expect(delay).toBeGreaterThanOrEqual(0);
        expect(delay).toBeLessThan(cap);
        expect(delay).toBe(Math.floor(r * cap));
      }
    }
  });

  it("draws its jitter from the random source it is given, not from Math.random", () => {
    const mathRandom = vi.spyOn(Math, "random").mockReturnValue(0.9);
    expect(backoffDelayMs(exponential, 3, always(0.25))).toBe(1_000);
    expect(mathRandom).not.toHaveBeenCalled();
  });

  it("never lets the cap grow past maxDelayMs, however many attempts failed", () => {
    const capped = RetryPolicy.parse({ maxAttempts: 20, backoff: "exponential", initialDelayMs: 1_000, maxDelayMs: 5_000 });
    // 1 s, 2 s, 4 s, then the 5 s ceiling: 8 s, 16 s, … are cut to it.
    expect([1, 2, 3, 4, 5, 10, 20].map((failed) => backoffDelayMs(capped, failed, always(ALMOST_ONE)))).toEqual([
      999, 1_999, 3_999, 4_999, 4_999, 4_999, 4_999,
    ]);
    expect(backoffDelayMs(capped, 12, always(0.5))).toBe(2_500);
  });

  it("an initialDelayMs above maxDelayMs is cut to maxDelayMs from the first retry", () => {
    const inverted = RetryPolicy.parse({ maxAttempts: 3, backoff: "exponential", initialDelayMs: 10_000, maxDelayMs: 2_000 });
    expect(backoffDelayMs(inverted, 1, always(0.5))).toBe(1_000);
  });
});

describe("fixed backoff", () => {
  it("waits initialDelayMs after every failure, without jitter and without growth", () => {
    for (const failed of [1, 2, 5, 9]) {
      for (const r of [0, 0.5, ALMOST_ONE]) expect(backoffDelayMs(fixed, failed, always(r))).toBe(750);
    }
  });

  it("is still capped by maxDelayMs", () => {
    const inverted = RetryPolicy.parse({ maxAttempts: 3, backoff: "fixed", initialDelayMs: 10_000, maxDelayMs: 2_000 });
    expect(backoffDelayMs(inverted, 1, always(0.5))).toBe(2_000);
  });
});

describe("Retry-After", () => {
  const patient = RetryPolicy.parse({ maxAttempts: 10, backoff: "exponential", initialDelayMs: 1_000, maxDelayMs: 600_000 });

  it("is a floor up to the ceiling: a Retry-After longer than the backoff wins, a shorter one leaves the backoff", () => {
    expect(planRetry(patient, 1, always(0.5), 120_000)).toEqual({ delayMs: 120_000 });
    expect(planRetry(patient, 4, always(0.5), 1_000)).toEqual({ delayMs: 4_000 });
    expect(planRetry(patient, 4, always(0.5))).toEqual({ delayMs: 4_000 });
    expect(planRetry(fixed, 1, always(0.5), 0)).toEqual({ delayMs: 750 });
    // Exactly at the ceiling is still a wait, not a refusal.
    expect(planRetry(patient, 1, always(0.5), 600_000)).toEqual({ delayMs: 600_000 });
  });

  it("refuses a demand above the ceiling (maxDelayMs within 24 h), naming both numbers, instead of parking the step", () => {
    const plan = planRetry(exponential, 1, always(0.5), 60_001);
    expect(plan).toHaveProperty("refused");
    const refused = (plan as { refused: string }).refused;
    expect(refused).toContain("60001 ms");
    expect(refused).toContain("60000 ms");
    // The global maximum bounds even a vertex that allows more.
    const lax = { ...patient, maxDelayMs: Number.MAX_SAFE_INTEGER };
    expect(retryAfterCeilingMs(lax)).toBe(MAX_RETRY_AFTER_MS);
    expect(planRetry(lax, 1, always(0.5), MAX_RETRY_AFTER_MS)).toEqual({ delayMs: MAX_RETRY_AFTER_MS });
    expect(planRetry(lax, 1, always(0.5), MAX_RETRY_AFTER_MS + 1000)).toHaveProperty("refused");
  });

  it("while the destination says in progress, a longer demand waits at the ceiling and the last ask falls at the end of the budget", () => {
    expect(inProgressWaitMs(exponential, 10 * 365 * 24 * 3_600_000, 3_600_000)).toBe(60_000);
    expect(inProgressWaitMs(exponential, 30_000, 5_000)).toBe(5_000);
    expect(inProgressWaitMs(exponential, undefined, 3_600_000)).toBe(1_000);
    expect(inProgressWaitMs(exponential, 0, 3_600_000)).toBe(1_000);
  });

  it("parses delay-seconds and HTTP dates; a date in the past means now; anything else is ignored", () => {
    const now = Date.UTC(2026, 0, 1, 12, 0, 0);
    expect(parseRetryAfter("120", now)).toBe(120_000);
    expect(parseRetryAfter(" 0 ", now)).toBe(0);
    expect(parseRetryAfter("Thu, 01 Jan 2026 12:00:30 GMT", now)).toBe(30_000);
    expect(parseRetryAfter("Thu, 01 Jan 2026 11:59:00 GMT", now)).toBe(0);
    expect(parseRetryAfter(null, now)).toBeUndefined();
    expect(parseRetryAfter("soon", now)).toBeUndefined();
  });
});

describe("the queue message's delaySeconds", () => {
  it("rounds up to whole seconds (arriving early would only bounce) and stops at the queue's 12-hour limit", () => {
    expect(delaySeconds(0)).toBe(0);
    expect(delaySeconds(-10)).toBe(0);
    expect(delaySeconds(1)).toBe(1);
    expect(delaySeconds(1_000)).toBe(1);
    expect(delaySeconds(1_001)).toBe(2);
    expect(delaySeconds(MAX_DELAY_MS)).toBe(12 * 3600);
    expect(delaySeconds(MAX_DELAY_MS * 2)).toBe(12 * 3600);
  });
});
