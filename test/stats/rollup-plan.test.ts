/**
 * Which hours a tick rolls (src/stats/rollup-plan.ts), as a pure function of the marks and the
 * clock: each pass's delay after the hour's end, the bound per tick, the backfill's floor, a tick
 * from the past, and one statement for passes whose hours touch.
 */
import { describe, expect, it } from "vitest";
import { HOUR_MS, type RollupPass } from "../../src/ledger";
import { BACKFILL_HOURS, hourOf, MAX_HOURS_PER_ROLL, PASS_DELAYS, planRollup } from "../../src/stats/rollup-plan";

const MINUTE = 60_000;
const H = Date.UTC(2026, 11, 6, 12); // an hour's start
const marks = (closed: number, settled: number, final: number) =>
  new Map<RollupPass, number>([
    ["closed", closed],
    ["settled", settled],
    ["final", final],
  ]);

describe("planRollup", () => {
  it("at :05 the closed pass rolls the hour just ended, the settled pass the one before (one statement), the final a day back", () => {
    const steady = marks(H - HOUR_MS, H - 2 * HOUR_MS, H - 25 * HOUR_MS);
    expect(planRollup(steady, H + 4 * MINUTE)).toEqual({ ranges: [], advances: [] });
    expect(planRollup(steady, H + 5 * MINUTE)).toEqual({
      ranges: [
        { from: H - 25 * HOUR_MS, to: H - 24 * HOUR_MS },
        { from: H - 2 * HOUR_MS, to: H },
      ],
      advances: [
        { pass: "closed", nextHour: H },
        { pass: "settled", nextHour: H - HOUR_MS },
        { pass: "final", nextHour: H - 24 * HOUR_MS },
      ],
    });
    expect(PASS_DELAYS).toEqual({ closed: 5 * MINUTE, settled: 65 * MINUTE, final: 24 * HOUR_MS + 5 * MINUTE });
  });

  it("a fresh database starts BACKFILL_HOURS back, MAX_HOURS_PER_ROLL hours a pass, the three passes in one statement", () => {
    const floor = H - BACKFILL_HOURS * HOUR_MS;
    const plan = planRollup(new Map(), H + 30 * MINUTE);
    expect(plan.ranges).toEqual([{ from: floor, to: floor + MAX_HOURS_PER_ROLL * HOUR_MS }]);
    expect(plan.advances.map((a) => a.nextHour)).toEqual([1, 2, 3].map(() => floor + MAX_HOURS_PER_ROLL * HOUR_MS));
  });

  it("marks behind the backfill (a long outage) restart at its floor; marks ahead of the clock (a replayed tick) roll nothing", () => {
    const floor = H - BACKFILL_HOURS * HOUR_MS;
    const behind = H - 100 * 24 * HOUR_MS;
    expect(planRollup(marks(behind, behind, behind), H + 30 * MINUTE).ranges[0]?.from).toBe(floor);
    expect(planRollup(marks(H, H - HOUR_MS, H - 24 * HOUR_MS), Date.UTC(2026, 0, 5, 9))).toEqual({ ranges: [], advances: [] });
  });

  it("hourOf is the hour's first millisecond (UTC)", () => {
    expect(hourOf(H + 59 * MINUTE + 59_999)).toBe(H);
    expect(hourOf(H)).toBe(H);
  });
});
