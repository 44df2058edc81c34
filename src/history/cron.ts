/**
 * The periodic task of history: the history sweep (./sweep.ts) on every tick, one holder at a
 * time per database (a lease in `sweep_leases`: every cron string runs every task, so at :00
 * three invocations would otherwise sweep the same executions at once).
 *
 * When a sweep stops on its budget with work left, it continues through the step queue: one
 * message `{ sweep: "history" }`, whose invocation has its own 1,000 queries and runs the next
 * sweep at once (src/queue.ts routes it here). Each continuation sends at most one more, so the
 * sweep runs as one chain of invocations until it drains, never as a fan of concurrent sweeps
 * fighting over the same rows.
 */
import { claimSweepLease, releaseSweepLease } from "../ledger";
import type { PeriodicTask } from "../lib/periodic-task";
import type { LogLine } from "../lib/log";
import { countQueries } from "../lib/query-count";
import { ARCHIVE_READ_QUERIES, archiverFor } from "./archive";
import { deploymentRetention, keySendHorizonMs } from "./retention";
import { eventSettings, type EventVars } from "../events/settings";
import { keyMemoryBucket, keyMemoryHotMs } from "../keys/memory";
import { DEFAULT_SWEEP_LIMITS, emptyReport, sweepHistory, type HistorySweepLimits, type HistorySweepReport } from "./sweep";

/** The queue message that continues a sweep that is behind. */
export interface HistorySweepMessage {
  sweep: "history";
}

export function isHistorySweepMessage(body: unknown): body is HistorySweepMessage {
  return typeof body === "object" && body !== null && !Array.isArray(body) && (body as Record<string, unknown>).sweep === "history";
}

const LEASE = "history";
/** Longer than a sweep's time budget, so a live sweep keeps it; a crashed one's runs out soon after. */
const LEASE_MS = 60_000;

export interface HistoryRunReport extends HistorySweepReport {
  via: "cron" | "queue";
  /** Another invocation held the lease: this one did nothing. */
  skipped: boolean;
  /** A continuation message was sent. */
  continued: boolean;
}

export interface HistoryRunOptions {
  now: number;
  via: "cron" | "queue";
  limits?: HistorySweepLimits;
}

/** One sweep under the lease, continued through the queue when it stopped with work left. */
export async function runHistorySweep(env: Env, options: HistoryRunOptions): Promise<HistoryRunReport> {
  // The counter may be shared with earlier work on this database object (it is per object, and
  // an isolate may hand the same binding to several invocations): count from here.
  const counted = countQueries(env.DB);
  const db = counted.db;
  const base = counted.queries();
  const holder = crypto.randomUUID();
  // Wall time, not the env's clock: the sweep's time budget measures real elapsed time.
  const started = Date.now();
  const { now, via } = options;
  if (!(await claimSweepLease(db, LEASE, holder, now, now + LEASE_MS))) {
    return { ...emptyReport(), via, skipped: true, continued: false };
  }
  let report: HistorySweepReport;
  try {
    report = await sweepHistory(
      {
        db,
        now,
        elapsed: () => Date.now() - started,
        queries: () => counted.queries() - base,
        archive: archiverFor(env, db),
        archiveQueries: ARCHIVE_READ_QUERIES,
        deadLetterMaxAgeMs: deploymentRetention(env).failedMs,
        keySendHorizonMs: keySendHorizonMs(env),
        eventHistoryMs: eventSettings(env as unknown as EventVars).historyMs,
        keyMemory: keyMemoryOf(env),
      },
      options.limits ?? DEFAULT_SWEEP_LIMITS,
    );
  } finally {
    await releaseSweepLease(db, LEASE, holder);
  }
  // Behind: removed something and stopped on the budget, not for lack of work.
  const continued = (!report.drained && report.removed > 0) || report.keysBehind;
  if (continued) await env.QUEUE.send({ sweep: "history" } satisfies HistorySweepMessage);
  return { ...report, via, skipped: false, continued };
}

/** The cold tier for the sweep's move, when a KEY_MEMORY bucket is bound. */
function keyMemoryOf(env: Env): { bucket: R2Bucket; hotMs: number } | null {
  const bucket = keyMemoryBucket(env);
  return bucket === null ? null : { bucket, hotMs: keyMemoryHotMs(env) };
}

export function historyLogLine(r: HistoryRunReport): LogLine | null {
  if (
    r.skipped ||
    (r.removed === 0 &&
      r.held === 0 &&
      r.archiveFailed === 0 &&
      r.tombstones === 0 &&
      r.deadLetters === 0 &&
      r.keySendsExpired === 0 &&
      r.events === 0 &&
      r.keysMoved === 0 &&
      r.keysMoveFailed === 0)
  ) {
    return null;
  }
  return {
    level: r.archiveFailed > 0 || r.keysMoveFailed > 0 ? "warn" : "info",
    event: "history.swept",
    fields: {
      via: r.via,
      removed: r.removed,
      archived: r.archived,
      held: r.held,
      archiveFailed: r.archiveFailed,
      passes: r.passes,
      drained: r.drained,
      continued: r.continued,
      steps: r.rows.steps,
      attempts: r.rows.attempts,
      events: r.rows.events,
      duplicates: r.rows.duplicates,
      keySendsRemoved: r.rows.keySends,
      tombstonesSwept: r.tombstones,
      deadLettersSwept: r.deadLetters,
      keySendsExpired: r.keySendsExpired,
      eventsSwept: r.events,
      keysMovedCold: r.keysMoved,
      keysColdWritten: r.keysWritten,
      keysColdFailed: r.keysMoveFailed,
      keysColdReads: r.keysColdReads,
    },
  };
}

/**
 * The tick's sweep of its shard, within the queries the cron allocator gave it (src/shards/cron.ts);
 * a tick over so many shards that the share is too small sends the sweep to its own queue invocation.
 */
export const historyTask: PeriodicTask<HistoryRunReport> = {
  name: "history sweep",
  async run(env, tick) {
    if (tick.sweepQueries === 0) {
      await env.QUEUE.send({ sweep: "history" } satisfies HistorySweepMessage);
      return { ...emptyReport(), via: "cron", skipped: true, continued: true };
    }
    const queryBudget = Math.min(DEFAULT_SWEEP_LIMITS.queryBudget, tick.sweepQueries ?? DEFAULT_SWEEP_LIMITS.queryBudget);
    return runHistorySweep(env, { now: tick.scheduledTime, via: "cron", limits: { ...DEFAULT_SWEEP_LIMITS, queryBudget } });
  },
  logLine: historyLogLine,
};
