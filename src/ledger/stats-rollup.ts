/**
 * The hourly rollup of what idemflow stopped (SPEC section 15, migrations/0022_stats_rollup.sql):
 * its statements, and the one read of a series over it. The cron task that decides WHICH hours to
 * roll is src/stats/rollup-task.ts; this module only says HOW an hour is rolled and read.
 *
 * What an hour's row counts: the executions CREATED in that hour (their counters and status as the
 * roll finds them), and the events the workspace RECEIVED in it with their duplicates. Rolling is
 * one `INSERT … SELECT … ON CONFLICT DO UPDATE` over a range of closed hours — every workspace of
 * the database at once, recomputed from the executions — so rolling an hour again gives the same
 * row (only `rolled_at` moves), and a re-roll after the history sweep removed some of the hour's
 * executions never lowers a figure: counters keep the larger value, statuses are replaced only when
 * the re-roll saw every execution the row counted.
 *
 * No statement here scans a table that grows with the executions (test/stats/query-plans.test.ts):
 * the roll walks `workflows` (one row per workflow) and, per workflow, its range of
 * `executions_by_workflow`; events by `events_received`; the rollup by its key or `stats_hourly_age`.
 */
import { LabelledBatch } from "./batch";

export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

/** How long an hour's row is kept (it must outlive executions: their longest retention is 365 days). */
export const STATS_RETENTION_MS = 400 * DAY_MS;

/** The rollup's passes over an hour (src/stats/rollup-plan.ts says when each is due). */
export const ROLLUP_PASSES = ["closed", "settled", "final"] as const;
export type RollupPass = (typeof ROLLUP_PASSES)[number];

/** A range of whole hours, `[from, to)`, each bound an hour's first millisecond. */
export interface HourRange {
  from: number;
  to: number;
}

/** What one bucket of a series holds: a rollup's hours or a live computation, summed. */
export interface StatsBucketRecord {
  /** The bucket's first millisecond. */
  start: number;
  executions: number;
  triggers: number;
  redeliveries: number;
  fencedOut: number;
  destinationReplays: number;
  running: number;
  completed: number;
  failed: number;
  cancelled: number;
  /**
   * The compensation statuses (docs/steps.md "Compensation"), apart from `running` and `failed`
   * in the live part and in rolled hours (migrations/0037). A row rolled before 0037 counted them in
   * `running` / `failed` and reads 0 here until its hour is re-rolled.
   */
  compensating: number;
  compensated: number;
  compensationFailed: number;
  eventsReceived: number;
  duplicateEvents: number;
}

// ---- rolling ---------------------------------------------------------------------------------------

const COUNTERS = [
  "executions",
  "duplicate_triggers",
  "redeliveries_stopped",
  "fenced_out_writes",
  "destination_replays",
  "events_received",
  "duplicate_events",
] as const;
const STATUSES = ["running", "completed", "failed", "cancelled", "compensating", "compensated", "compensation_failed"] as const;
const COLUMNS = [...COUNTERS.slice(0, 5), ...STATUSES, ...COUNTERS.slice(5)];
/** An events-only row of the rollup: every column before the events' two reads 0. */
const EVENTS_ONLY_ZEROS = COLUMNS.slice(0, -2)
  .map(() => "0")
  .join(", ");

/**
 * `rollHours`: every workspace's rows for the hours of `[?1, ?2)`, recomputed. The executions are
 * reached through `workflows` (CROSS JOIN keeps that order: one search of `executions_by_workflow`
 * per workflow, never a pass over the executions); the workspace's row ('') sums its workflows and
 * adds its events. Binds ?1 from, ?2 to, ?3 now (`rolled_at`).
 */
function rollHoursStatement(db: D1Database, range: HourRange, now: number): D1PreparedStatement {
  const hourOf = (column: string) => `(${column} / ${HOUR_MS}) * ${HOUR_MS}`;
  const sums = (prefix: string) => COLUMNS.map((c) => `sum(${prefix}${c})`).join(", ");
  const update = [
    ...STATUSES.map((c) => `${c} = iif(excluded.executions >= executions, excluded.${c}, ${c})`),
    ...COUNTERS.map((c) => `${c} = max(${c}, excluded.${c})`),
    "rolled_at = excluded.rolled_at",
  ].join(", ");
  return db
    .prepare(
      `WITH per_workflow AS (
         SELECT w.workspace AS workspace, w.workflow_id AS workflow_id, ${hourOf("e.created_at")} AS hour,
                count(*) AS executions, sum(e.duplicate_deliveries) AS duplicate_triggers,
                sum(e.redeliveries_stopped) AS redeliveries_stopped, sum(e.fenced_out_writes) AS fenced_out_writes,
                sum(e.destination_replays) AS destination_replays,
                sum(e.status = 'RUNNING') AS running, sum(e.status = 'COMPLETED') AS completed,
                sum(e.status = 'FAILED') AS failed, sum(e.status = 'CANCELLED') AS cancelled,
                sum(e.status = 'COMPENSATING') AS compensating, sum(e.status = 'COMPENSATED') AS compensated,
                sum(e.status = 'COMPENSATION_FAILED') AS compensation_failed,
                0 AS events_received, 0 AS duplicate_events
         FROM workflows AS w CROSS JOIN executions AS e
           ON e.workspace = w.workspace AND e.workflow_id = w.workflow_id AND e.created_at >= ?1 AND e.created_at < ?2
         GROUP BY w.workspace, w.workflow_id, hour
       ),
       rolled AS (
         SELECT * FROM per_workflow
         UNION ALL
         SELECT workspace, '', hour, ${sums("")} FROM per_workflow GROUP BY workspace, hour
         UNION ALL
         SELECT workspace, '', ${hourOf("received_at")} AS hour, ${EVENTS_ONLY_ZEROS}, count(*), sum(duplicates)
         FROM events WHERE received_at >= ?1 AND received_at < ?2 GROUP BY workspace, hour
       )
       INSERT INTO stats_hourly (workspace, workflow_id, hour, ${COLUMNS.join(", ")}, rolled_at)
       SELECT workspace, workflow_id, hour, ${sums("")}, ?3 FROM rolled WHERE true GROUP BY workspace, workflow_id, hour
       ON CONFLICT (workspace, workflow_id, hour) DO UPDATE SET ${update}`,
    )
    .bind(range.from, range.to, now);
}

/** Sweeps rollup rows older than ?1, oldest first, at most ?2 (the bounded sweep's shape, ./sweep.ts). */
function sweepStatement(db: D1Database, olderThan: number, limit: number): D1PreparedStatement {
  return db
    .prepare(`DELETE FROM stats_hourly WHERE rowid IN (SELECT rowid FROM stats_hourly WHERE hour < ?1 ORDER BY hour LIMIT ?2)`)
    .bind(olderThan, limit);
}

const READ_MARKS = "SELECT pass, next_hour AS nextHour FROM stats_rollup_marks";

export interface RollupStart {
  /** Each pass's mark: every hour before it had that pass. Absent: the pass never ran here. */
  marks: Map<RollupPass, number>;
  /** Rows past the retention deleted by this tick's sweep. */
  swept: number;
}

/**
 * A tick's first round trip: the retention sweep (rows whose hour began before `olderThan`, at most
 * `limit`) and the marks, in one batch.
 */
export async function startRollupTick(db: D1Database, olderThan: number, limit: number): Promise<RollupStart> {
  const results = await new LabelledBatch<"sweep" | "marks">(db)
    .add("sweep", sweepStatement(db, olderThan, limit))
    .add("marks", db.prepare(READ_MARKS))
    .run();
  const marks = new Map<RollupPass, number>();
  for (const row of results.rows<{ pass: RollupPass; nextHour: number }>("marks")) marks.set(row.pass, row.nextHour);
  return { marks, swept: results.changes("sweep") };
}

/**
 * Rolls `ranges` and moves each pass's mark to its `nextHour` (never back: two ticks running at
 * once both roll, and the marks keep the furthest), in one batch: a mark moves only with its hours.
 * Returns the rollup rows written (inserted or updated).
 */
export async function rollHours(
  db: D1Database,
  ranges: readonly HourRange[],
  advances: ReadonlyArray<{ pass: RollupPass; nextHour: number }>,
  now: number,
): Promise<number> {
  const batch = new LabelledBatch<"roll" | "marks">(db);
  for (const range of ranges) batch.add("roll", rollHoursStatement(db, range, now));
  if (advances.length > 0) {
    // ?1, ?2 per pass: its name and its new mark (at most three passes: six parameters).
    const values = advances.map((_, i) => `(?${2 * i + 1}, ?${2 * i + 2})`).join(", ");
    batch.add(
      "marks",
      db
        .prepare(
          `INSERT INTO stats_rollup_marks (pass, next_hour) VALUES ${values}
           ON CONFLICT (pass) DO UPDATE SET next_hour = max(next_hour, excluded.next_hour)`,
        )
        .bind(...advances.flatMap((a) => [a.pass, a.nextHour])),
    );
  }
  return (await batch.run()).changes("roll");
}

// ---- reading a series --------------------------------------------------------------------------------

export interface SeriesQuery {
  workspace: string;
  /** One workflow's rows; `null`: the workspace's rows (every workflow summed, and its events). */
  workflowId: string | null;
  /** `[since, until)`, both on bucket bounds. */
  since: number;
  until: number;
  bucketMs: number;
  /**
   * The earliest hour computed live from the executions: hours from `closed`'s mark on are, but
   * never before this bound (a rollup far behind is not replaced by a long live scan).
   */
  liveFloor: number;
}

export interface SeriesRecords {
  /** Buckets summed from the rollup's hours (before the live part). */
  rolled: StatsBucketRecord[];
  /** Buckets computed from the executions and events themselves (the hours not rolled up yet). */
  live: StatsBucketRecord[];
  /** `closed`'s mark: the hours before it are rolled up. Null: the rollup never ran on this database. */
  rolledUntil: number | null;
  /** Where the live part starts: `max(rolledUntil, liveFloor)`. */
  liveFrom: number;
}

/** Where the live part starts, in SQL: `closed`'s mark, never before the live floor `?N`. */
const liveFrom = (floor: string) => `max(coalesce((SELECT next_hour FROM stats_rollup_marks WHERE pass = 'closed'), ${floor}), ${floor})`;

/** The start of the bucket of `size` ms holding `column`. `%` works on integers whatever the binding: D1 may bind a number as REAL. */
const bucketOf = (column: string, size: string) => `(${column} - ${column} % ${size})`;

const ZERO_EVENTS = "0 AS eventsReceived, 0 AS duplicateEvents";
const EXECUTION_SUMS = `count(*) AS executions, sum(duplicate_deliveries) AS triggers, sum(redeliveries_stopped) AS redeliveries,
  sum(fenced_out_writes) AS fencedOut, sum(destination_replays) AS destinationReplays,
  sum(status = 'RUNNING') AS running, sum(status = 'COMPLETED') AS completed, sum(status = 'FAILED') AS failed,
  sum(status = 'CANCELLED') AS cancelled, sum(status = 'COMPENSATING') AS compensating, sum(status = 'COMPENSATED') AS compensated,
  sum(status = 'COMPENSATION_FAILED') AS compensationFailed`;

/**
 * A series in ONE batch (one round trip, one snapshot): the rollup's hours before the live part,
 * the executions (and, for the workspace, the events) of the live part, and the marks. Each part
 * is grouped into buckets by SQL, so at most one row per bucket comes back.
 */
export async function readStatsSeries(db: D1Database, q: SeriesQuery): Promise<SeriesRecords> {
  const workflowRow = q.workflowId ?? "";
  const batch = new LabelledBatch<"rolled" | "live" | "events" | "marks">(db)
    // Binds ?1 workspace, ?2 workflow ('' for the workspace's row), ?3 since, ?4 until, ?5 bucket ms, ?6 live floor.
    .add(
      "rolled",
      db
        .prepare(
          `SELECT ${bucketOf("hour", "?5")} AS start, sum(executions) AS executions, sum(duplicate_triggers) AS triggers,
                  sum(redeliveries_stopped) AS redeliveries, sum(fenced_out_writes) AS fencedOut,
                  sum(destination_replays) AS destinationReplays, sum(running) AS running, sum(completed) AS completed,
                  sum(failed) AS failed, sum(cancelled) AS cancelled, sum(compensating) AS compensating,
                  sum(compensated) AS compensated, sum(compensation_failed) AS compensationFailed,
                  sum(events_received) AS eventsReceived,
                  sum(duplicate_events) AS duplicateEvents
           FROM stats_hourly
           WHERE workspace = ?1 AND workflow_id = ?2 AND hour >= ?3 AND hour < min(?4, ${liveFrom("?6")})
           GROUP BY start`,
        )
        .bind(q.workspace, workflowRow, q.since, q.until, q.bucketMs, q.liveFloor),
    );
  if (q.workflowId === null) {
    // Binds ?1 workspace, ?2 since, ?3 until, ?4 bucket ms, ?5 live floor: `executions_by_workspace`'s range.
    batch.add(
      "live",
      db
        .prepare(
          `SELECT ${bucketOf("created_at", "?4")} AS start, ${EXECUTION_SUMS}, ${ZERO_EVENTS}
           FROM executions WHERE workspace = ?1 AND created_at >= max(?2, ${liveFrom("?5")}) AND created_at < ?3
           GROUP BY start`,
        )
        .bind(q.workspace, q.since, q.until, q.bucketMs, q.liveFloor),
    );
    // The same binds: the workspace's events received in the live part. `+workspace` keeps SQLite off
    // the indexes that lead with the workspace (every event it keeps): `events_received`'s range is a few hours.
    batch.add(
      "events",
      db
        .prepare(
          `SELECT ${bucketOf("received_at", "?4")} AS start, count(*) AS eventsReceived, sum(duplicates) AS duplicateEvents
           FROM events WHERE +workspace = ?1 AND received_at >= max(?2, ${liveFrom("?5")}) AND received_at < ?3
           GROUP BY start`,
        )
        .bind(q.workspace, q.since, q.until, q.bucketMs, q.liveFloor),
    );
  } else {
    // Binds ?1 workspace, ?2 workflow, ?3 since, ?4 until, ?5 bucket ms, ?6 live floor: `executions_by_workflow`'s range.
    batch.add(
      "live",
      db
        .prepare(
          `SELECT ${bucketOf("created_at", "?5")} AS start, ${EXECUTION_SUMS}, ${ZERO_EVENTS}
           FROM executions WHERE workspace = ?1 AND workflow_id = ?2 AND created_at >= max(?3, ${liveFrom("?6")}) AND created_at < ?4
           GROUP BY start`,
        )
        .bind(q.workspace, q.workflowId, q.since, q.until, q.bucketMs, q.liveFloor),
    );
  }
  batch.add("marks", db.prepare(READ_MARKS));
  const results = await batch.run();
  const closed = results.rows<{ pass: RollupPass; nextHour: number }>("marks").find((m) => m.pass === "closed");
  const rolledUntil = closed?.nextHour ?? null;
  const live = results.rows<StatsBucketRecord>("live");
  for (const row of results.rows<Pick<StatsBucketRecord, "start" | "eventsReceived" | "duplicateEvents">>("events")) {
    live.push({ ...EMPTY_BUCKET, ...row });
  }
  return {
    rolled: results.rows<StatsBucketRecord>("rolled"),
    live,
    rolledUntil,
    liveFrom: Math.max(rolledUntil ?? q.liveFloor, q.liveFloor),
  };
}

const EMPTY_BUCKET: StatsBucketRecord = Object.freeze({
  start: 0,
  executions: 0,
  triggers: 0,
  redeliveries: 0,
  fencedOut: 0,
  destinationReplays: 0,
  running: 0,
  completed: 0,
  failed: 0,
  cancelled: 0,
  compensating: 0,
  compensated: 0,
  compensationFailed: 0,
  eventsReceived: 0,
  duplicateEvents: 0,
});
