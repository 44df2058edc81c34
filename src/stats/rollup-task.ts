/**
 * The periodic task of the hourly rollup (SPEC section 15): on every tick, on every shard (the
 * allocator in src/shards/cron.ts runs it with that shard's env, so a workspace's rollup rows live
 * on the workspace's shard, beside the executions they count), it sweeps rows past the retention,
 * reads the passes' marks, and rolls the hours now due (./rollup-plan.ts) — the hot path gains no
 * statement.
 *
 * Bounded: at most `ROLLUP_TASK_QUERIES` statements in two round trips — one batch with the sweep
 * and the marks, then, only when an hour is due (about once an hour, more while catching up), one
 * batch with at most one roll per pass and the marks' advance. One of the allocator's bounded tasks.
 */
import { rollHours, ROLLUP_PASSES, startRollupTick, STATS_RETENTION_MS, type HourRange } from "../ledger";
import type { LogLine } from "../lib/log";
import { isoTime } from "../lib/iso-time";
import type { PeriodicTask } from "../lib/periodic-task";
import { shardOfEnv } from "../shards/shard-env";
import { planRollup } from "./rollup-plan";

/** Rollup rows past the retention deleted per tick, at most (one statement; a day's rows of ~40 workflows an hour go in a minute). */
export const ROLLUP_SWEEP_LIMIT = 1000;

/** The statements one tick sends on one shard, at most: the sweep and the marks, one roll per pass, the marks' advance. */
export const ROLLUP_TASK_QUERIES = 2 + ROLLUP_PASSES.length + 1;

export interface RollupReport {
  shard: number;
  /** The ranges rolled this tick (empty: nothing was due). */
  rolled: HourRange[];
  /** Rollup rows written (inserted or updated). */
  rows: number;
  /** Rows past the retention swept. */
  swept: number;
}

/** One tick on one shard's database, at `now` (the tick's scheduled time). */
export async function runRollup(db: D1Database, now: number, shard = 0): Promise<RollupReport> {
  const { marks, swept } = await startRollupTick(db, now - STATS_RETENTION_MS, ROLLUP_SWEEP_LIMIT);
  const plan = planRollup(marks, now);
  const rows = plan.ranges.length > 0 ? await rollHours(db, plan.ranges, plan.advances, now) : 0;
  return { shard, rolled: plan.ranges, rows, swept };
}

export const statsRollupTask: PeriodicTask<RollupReport> = {
  name: "stats rollup",
  run: (env, tick) => runRollup(env.DB, tick.scheduledTime, shardOfEnv(env)),
  logLine: rollupLogLine,
};

/** `stats.rolled` when hours were rolled or rows swept; an idle minute logs nothing. */
export function rollupLogLine({ shard, rolled, rows, swept }: RollupReport): LogLine | null {
  if (rolled.length === 0 && swept === 0) return null;
  return {
    level: "info",
    event: "stats.rolled",
    fields: { shard, hours: rolled.map((r) => ({ from: isoTime(r.from), to: isoTime(r.to) })), rows, swept },
  };
}
