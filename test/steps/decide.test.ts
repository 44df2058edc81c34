/**
 * The step's decision as a table: for every kind of outcome, the one transition it becomes.
 * Pure (src/steps/decide.ts): no database, no clock but the one passed in.
 */
import { describe, expect, it } from "vitest";
import { DEFAULT_RETRY, type RetryPolicy } from "../../src/definitions/schema";
import { CRASH_ALLOWANCE, claimsCounted, decide, overClaimBudget, type ClaimFacts, type Transition } from "../../src/steps/decide";
import type { RunOutcome } from "../../src/steps/outcome";
import { DEFAULT_IN_PROGRESS_BUDGET_MS, MAX_RETRY_AFTER_MS } from "../../src/steps/retry-policy";

const NOW = Date.UTC(2026, 11, 3, 12, 0, 0);
const POLICY: RetryPolicy = { ...DEFAULT_RETRY, maxAttempts: 3, backoff: "exponential", initialDelayMs: 1_000, maxDelayMs: 60_000 };
const claim = (attempt: number, retryBase = 0, inProgressSince: number | null = null): ClaimFacts => ({
  attempt,
  retryBase,
  inProgressSince,
});
/** Jitter at its top: the backoff delay equals its exponential cap. */
const TOP = () => 0.999_999;

interface Row {
  name: string;
  outcome: RunOutcome;
  claim: ClaimFacts;
  policy: RetryPolicy | null;
  expected: Transition | ((t: Transition) => void);
}

const table: Row[] = [
  {
    name: "completed → complete, with its output",
    outcome: { kind: "completed", output: { id: "ch_1" } },
    claim: claim(1),
    policy: POLICY,
    expected: { kind: "complete", output: { id: "ch_1" } },
  },
  {
    name: "permanent failure → fail at once, whatever budget is left",
    outcome: { kind: "failed", error: "HTTP 400", output: { status: 400 } },
    claim: claim(1),
    policy: POLICY,
    expected: { kind: "fail", error: "HTTP 400", output: { status: 400 } },
  },
  {
    name: "retryable failure within the budget → retry, counted, after the backoff",
    outcome: { kind: "retryable", error: "HTTP 503" },
    claim: claim(2),
    policy: POLICY,
    expected: { kind: "retry", delayMs: 1_999, reason: "backoff", error: "attempt 2: HTTP 503" },
  },
  {
    name: "retryable failure with Retry-After → the later of backoff and Retry-After, saying Retry-After set it",
    outcome: { kind: "retryable", error: "HTTP 429", retryAfterMs: 30_000 },
    claim: claim(1),
    policy: POLICY,
    expected: { kind: "retry", delayMs: 30_000, reason: "retry-after", error: "attempt 1: HTTP 429" },
  },
  {
    name: "retryable failure with a Retry-After shorter than the backoff → the backoff, saying so",
    outcome: { kind: "retryable", error: "HTTP 503", retryAfterMs: 500 },
    claim: claim(2),
    policy: POLICY,
    expected: { kind: "retry", delayMs: 1_999, reason: "backoff", error: "attempt 2: HTTP 503" },
  },
  {
    name: "retryable failure with a Retry-After in the past (0 ms) → the backoff",
    outcome: { kind: "retryable", error: "HTTP 503", retryAfterMs: 0 },
    claim: claim(1),
    policy: POLICY,
    expected: { kind: "retry", delayMs: 999, reason: "backoff", error: "attempt 1: HTTP 503" },
  },
  {
    name: "retryable failure whose Retry-After is over the ceiling → fail, naming it",
    outcome: { kind: "retryable", error: "HTTP 503", retryAfterMs: MAX_RETRY_AFTER_MS },
    claim: claim(1),
    policy: POLICY,
    expected: (t) => {
      expect(t.kind).toBe("fail");
      expect(t.kind === "fail" && t.error).toMatch(
        /^HTTP 503: the destination asked to wait 86400 s \(Retry-After\), over this step's ceiling/,
      );
    },
  },
  {
    name: "retry budget exhausted → fail, saying how many attempts were used",
    outcome: { kind: "retryable", error: "HTTP 503", output: { status: 503 } },
    claim: claim(3),
    policy: POLICY,
    expected: { kind: "fail", error: "gave up after 3 attempt(s): HTTP 503", output: { status: 503 } },
  },
  {
    name: "the budget counts claims since the operator retry (retryBase), not all attempts",
    outcome: { kind: "retryable", error: "HTTP 503" },
    claim: claim(5, 4),
    policy: POLICY,
    expected: { kind: "retry", delayMs: 999, reason: "backoff", error: "attempt 5: HTTP 503" },
  },
  {
    name: "a vertex without a retry policy never retries",
    outcome: { kind: "retryable", error: "timeout" },
    claim: claim(1),
    policy: null,
    expected: { kind: "fail", error: "gave up after 1 attempt(s): timeout" },
  },
  {
    name: "in progress within its budget → re-check, uncounted, after Retry-After",
    outcome: { kind: "in_progress", error: "HTTP 409 in progress", retryAfterMs: 5_000 },
    claim: claim(4, 0, NOW - 60_000),
    policy: POLICY,
    expected: {
      kind: "recheck_in_progress",
      delayMs: 5_000,
      reason: "in-progress",
      detail:
        "HTTP 409 in progress; asking again in 5000 ms " +
        `(in-progress budget until ${new Date(NOW - 60_000 + DEFAULT_IN_PROGRESS_BUDGET_MS).toISOString()})`,
    },
  },
  {
    name: "in progress for the first time → the budget starts now",
    outcome: { kind: "in_progress", error: "HTTP 409 in progress" },
    claim: claim(1),
    policy: POLICY,
    expected: (t) => {
      expect(t).toMatchObject({ kind: "recheck_in_progress", delayMs: POLICY.initialDelayMs, reason: "in-progress" });
      expect(t.kind === "recheck_in_progress" && t.detail).toContain(new Date(NOW + DEFAULT_IN_PROGRESS_BUDGET_MS).toISOString());
    },
  },
  {
    name: "in progress past its budget → fail, telling the operator to check the destination first",
    outcome: { kind: "in_progress", error: "HTTP 409 in progress" },
    claim: claim(9, 0, NOW - DEFAULT_IN_PROGRESS_BUDGET_MS),
    policy: POLICY,
    expected: (t) => {
      expect(t.kind).toBe("fail");
      expect(t.kind === "fail" && t.error).toMatch(/still answers "in progress" for this step's key 900 s after it first did/);
    },
  },
];

describe("decide: one transition per outcome", () => {
  for (const row of table) {
    it(row.name, () => {
      const t = decide(row.outcome, row.claim, row.policy, NOW, TOP);
      if (typeof row.expected === "function") row.expected(t);
      else expect(t).toEqual(row.expected);
    });
  }

  it("is a pure function: the same inputs give the same transition", () => {
    for (const row of table)
      expect(decide(row.outcome, row.claim, row.policy, NOW, TOP)).toEqual(decide(row.outcome, row.claim, row.policy, NOW, TOP));
  });
});

describe("the crash budget, decided before running", () => {
  it("runs while the claims are within the retry budget plus the crash allowance", () => {
    expect(overClaimBudget(claim(POLICY.maxAttempts + CRASH_ALLOWANCE), POLICY)).toBeNull();
    expect(overClaimBudget(claim(1 + CRASH_ALLOWANCE), null)).toBeNull();
  });

  it("one claim more → a failure, not run again, which decide turns into fail", () => {
    const over = claim(POLICY.maxAttempts + CRASH_ALLOWANCE + 1);
    const outcome = overClaimBudget(over, POLICY);
    expect(outcome).toEqual({
      kind: "failed",
      error:
        `gave up: this step was claimed ${POLICY.maxAttempts + CRASH_ALLOWANCE} times (retries included) without settling — ` +
        "its worker crashed or lost its lease again and again; not run again",
    });
    expect(decide(outcome!, over, POLICY, NOW, TOP).kind).toBe("fail");
  });

  it("an operator retry restarts the count", () => {
    expect(claimsCounted(claim(40, 39))).toBe(1);
    expect(overClaimBudget(claim(40, 39), POLICY)).toBeNull();
  });
});
