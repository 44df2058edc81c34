/**
 * Which hours a tick of the rollup rolls (pure: the marks and the clock in, ranges out), and why.
 *
 * An hour's row counts the executions created in it with their counters as the roll finds them.
 * Those counters move after the hour closes — a retry replayed by the destination, a redelivery, a
 * duplicate trigger arriving within the execution's dedupe window — so an hour is rolled three
 * times, each a pass with its own mark:
 *
 * - `closed`, 5 minutes after the hour ends: the chart has the hour (the live part of a series
 *   covers it until then). 5 minutes let a start batch whose clock read the hour's last millisecond
 *   commit first.
 * - `settled`, 65 minutes after: retries and redeliveries of executions that ran in the hour.
 * - `final`, 24 h 5 min after: every trigger of the hour is past the default 24 h dedupe window, so
 *   its duplicates are all counted.
 *
 * The trade-off: a change later than the final pass (a duplicate inside a dedupe window longer
 * than 24 h, an operator retry days later, a wait that resumes after a day) is not in the hour's
 * row; `GET /v1/stats` still sums it from the executions while they live. Three rolls of an hour
 * cost three statements over its executions, once per hour — the hot path pays nothing.
 *
 * A pass rolls at most `MAX_HOURS_PER_ROLL` hours a tick (a statement's work is bounded by the
 * executions of those hours), and never looks back further than `BACKFILL_HOURS` (a fresh
 * database, a cron stopped for days, a tick replayed with an old time): hours before that are not
 * rolled, and executions are rarely kept longer than the 7 days of the default retention.
 */
import { HOUR_MS, ROLLUP_PASSES, type HourRange, type RollupPass } from "../ledger";

const MINUTE_MS = 60_000;

/** How long after an hour ends each pass rolls it. */
export const PASS_DELAYS: Readonly<Record<RollupPass, number>> = Object.freeze({
  closed: 5 * MINUTE_MS,
  settled: 65 * MINUTE_MS,
  final: 24 * HOUR_MS + 5 * MINUTE_MS,
});

/** Hours one pass rolls in one tick, at most. */
export const MAX_HOURS_PER_ROLL = 6;

/** How far back a pass starts on a fresh database, and the furthest back it ever rolls (7 days). */
export const BACKFILL_HOURS = 7 * 24;

/** The first millisecond of the hour holding `t`. */
export const hourOf = (t: number): number => Math.floor(t / HOUR_MS) * HOUR_MS;

export interface RollupPlan {
  /** The ranges to roll, merged where passes overlap or touch (at most one per pass). */
  ranges: HourRange[];
  /** Each pass that has hours due, and its mark once they are rolled. */
  advances: Array<{ pass: RollupPass; nextHour: number }>;
}

/** The hours due at `now` for each pass, from its mark (or the backfill's start), bounded per pass. */
export function planRollup(marks: ReadonlyMap<RollupPass, number>, now: number, maxHours = MAX_HOURS_PER_ROLL): RollupPlan {
  const floor = hourOf(now) - BACKFILL_HOURS * HOUR_MS;
  const due: Array<{ pass: RollupPass } & HourRange> = [];
  for (const pass of ROLLUP_PASSES) {
    const from = Math.max(marks.get(pass) ?? floor, floor);
    // Hours that ended at least the pass's delay ago: those before the hour holding now − delay.
    const to = Math.min(hourOf(now - PASS_DELAYS[pass]), from + maxHours * HOUR_MS);
    if (to > from) due.push({ pass, from, to });
  }
  return { ranges: merge(due), advances: due.map(({ pass, to }) => ({ pass, nextHour: to })) };
}

/** Ranges that overlap or touch become one: rolled at the same time, one statement serves every pass in it. */
function merge(ranges: readonly HourRange[]): HourRange[] {
  const merged: HourRange[] = [];
  for (const { from, to } of [...ranges].sort((a, b) => a.from - b.from)) {
    const last = merged.at(-1);
    if (last && from <= last.to) last.to = Math.max(last.to, to);
    else merged.push({ from, to });
  }
  return merged;
}
