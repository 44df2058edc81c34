/** The retention guard's arithmetic (src/steps/gateway/retention.ts); the guard at work is test/steps/retention-guard.test.ts. */
import { describe, expect, it } from "vitest";
import { retentionMarginMs } from "../../src/definitions/destination-key";
import { duration, retentionDeadline, retentionRefusal } from "../../src/steps/gateway/retention";

const facts = (now: number, retentionMs = 86_400_000, countedFrom = 0) => ({
  vertexId: "charge",
  key: "charge-1",
  destination: "https://api.stripe.com",
  send: { firstSentAt: 0, countedFrom },
  retentionMs,
  now,
});

describe("the retention guard's arithmetic", () => {
  it("keeps a margin of a tenth of the retention, at most a minute", () => {
    expect(retentionMarginMs(86_400_000)).toBe(60_000);
    expect(retentionMarginMs(120_000)).toBe(12_000);
    expect(retentionMarginMs(1_000)).toBe(100);
  });

  it("sends until the deadline less the margin, refuses from then on", () => {
    expect(retentionRefusal(facts(86_400_000 - 60_001))).toBeNull();
    expect(retentionRefusal(facts(86_400_000 - 60_000))).toMatch(/^not sent: the destination may have forgotten this key/);
    expect(retentionRefusal(facts(40 * 86_400_000))).toContain("remembers keys for 1 day, until 1970-01-02T00:00:00.000Z");
  });

  it("counts from an acknowledged re-send, and says so", () => {
    expect(retentionDeadline({ firstSentAt: 0, countedFrom: 5_000 }, 10_000)).toBe(15_000);
    expect(retentionRefusal(facts(86_400_000, 86_400_000, 3_600_000))).toBeNull();
    expect(retentionRefusal(facts(90_000_000 + 3_600_000, 86_400_000, 3_600_000))).toContain(
      "at 1970-01-01T00:00:00.000Z; an operator acknowledged a re-send at 1970-01-01T01:00:00.000Z, counted from then,",
    );
  });

  it("writes a retention in its largest whole unit", () => {
    expect([31 * 86_400_000, 86_400_000, 1_800_000, 90_000, 1_500].map(duration)).toEqual([
      "31 days",
      "1 day",
      "30 minutes",
      "90 seconds",
      "1500 ms",
    ]);
  });
});
