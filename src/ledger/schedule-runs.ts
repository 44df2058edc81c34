/**
 * Scheduled runs (migrations/0006_schedules_and_resends.sql): one row per (workflow, cron,
 * scheduled minute), so a tick that does not fit one invocation, or whose start failed, is still
 * on record and picked up by a later invocation while its minute is recent. Every statement takes
 * the clock as a parameter; every transition states its precondition in WHERE.
 */
import { LabelledBatch } from "./batch";
import { selectList } from "./columns";

export type ScheduleRunStatus = "PENDING" | "STARTING" | "STARTED" | "FAILED" | "SKIPPED" | "EXPIRED";

/** A run claimed for starting, with the workflow's latest version (null: no longer on this cron). */
export interface ClaimedScheduleRun {
  rowid: number;
  workspace: string;
  workflowId: string;
  cron: string;
  scheduledAt: number;
  attempts: number;
  workflow: { version: string; definition: string; createdAt: number } | null;
}

/**
 * Record the tick for every workflow whose latest version has this schedule: one INSERT … SELECT
 * over the `workflows_scheduled` index (only this cron's rows are read). A redelivered tick
 * inserts nothing. Returns how many runs are new.
 */
export async function recordTick(db: D1Database, cron: string, scheduledAt: number, now: number): Promise<number> {
  const result = await db
    .prepare(
      `INSERT INTO schedule_runs (workspace, workflow_id, scheduled_at, cron, status, created_at, updated_at)
       SELECT workspace, workflow_id, ?2, ?1, 'PENDING', ?3, ?3 FROM workflows WHERE schedule = ?1
       ON CONFLICT (workspace, workflow_id, scheduled_at, cron) DO NOTHING`,
    )
    .bind(cron, scheduledAt, now)
    .run();
  return result.meta.changes ?? 0;
}

/**
 * Claim up to `limit` open runs whose minute is after `since`: PENDING, FAILED, or STARTING under
 * an expired lease (an invocation died mid-start). Never-tried runs first, then the oldest
 * minute, so runs that keep failing cannot starve the others. One statement; then one read of the
 * claimed runs' latest definitions (two round trips per invocation, whatever the limit).
 */
export async function claimScheduleRuns(
  db: D1Database,
  r: { now: number; since: number; leaseMs: number; limit: number },
): Promise<ClaimedScheduleRun[]> {
  const open = `finished_at IS NULL AND scheduled_at > ?2 AND (status <> 'STARTING' OR lease_until <= ?1)`;
  const { results } = await db
    .prepare(
      `UPDATE schedule_runs SET status = 'STARTING', attempts = attempts + 1, lease_until = ?1 + ?3, updated_at = ?1
       WHERE rowid IN (SELECT rowid FROM schedule_runs WHERE ${open} ORDER BY attempts, scheduled_at LIMIT ?4)
         AND ${open}
       RETURNING rowid, workspace, workflow_id, cron, scheduled_at, attempts`,
    )
    .bind(r.now, r.since, r.leaseMs, r.limit)
    .all<{ rowid: number; workspace: string; workflow_id: string; cron: string; scheduled_at: number; attempts: number }>();
  if (results.length === 0) return [];
  const { results: versions } = await db
    .prepare(
      `SELECT w.workspace, w.workflow_id, w.schedule, v.version, v.definition, v.created_at
       FROM json_each(?1) AS k
       JOIN workflows w ON w.workspace = json_extract(k.value, '$[0]') AND w.workflow_id = json_extract(k.value, '$[1]')
       JOIN workflow_versions v ON v.workspace = w.workspace AND v.workflow_id = w.workflow_id AND v.version = w.latest_version`,
    )
    .bind(`[${[...new Set(results.map((row) => JSON.stringify([row.workspace, row.workflow_id])))].join(",")}]`)
    .all<{ workspace: string; workflow_id: string; schedule: string | null; version: string; definition: string; created_at: number }>();
  const byWorkflow = new Map(versions.map((v) => [JSON.stringify([v.workspace, v.workflow_id]), v]));
  return results.map((row) => {
    const v = byWorkflow.get(JSON.stringify([row.workspace, row.workflow_id]));
    return {
      rowid: row.rowid,
      workspace: row.workspace,
      workflowId: row.workflow_id,
      cron: row.cron,
      scheduledAt: row.scheduled_at,
      attempts: row.attempts,
      // The workflow may have dropped or changed its schedule since the tick was recorded.
      workflow: v && v.schedule === row.cron ? { version: v.version, definition: v.definition, createdAt: v.created_at } : null,
    };
  });
}

export type ScheduleRunOutcome =
  { rowid: number; status: "STARTED"; executionId: string } | { rowid: number; status: "FAILED" | "SKIPPED"; error: string };

/** Settle claimed runs: one UPDATE each, fenced on the claim (still STARTING). */
function settleStatements(db: D1Database, outcomes: ScheduleRunOutcome[], now: number): D1PreparedStatement[] {
  return outcomes.map((o) =>
    db
      .prepare(
        `UPDATE schedule_runs
           SET status = ?2, execution_id = ?3, error = ?4, lease_until = NULL, updated_at = ?5,
               finished_at = CASE WHEN ?2 = 'FAILED' THEN NULL ELSE ?5 END
         WHERE rowid = ?1 AND status = 'STARTING'`,
      )
      .bind(o.rowid, o.status, o.status === "STARTED" ? o.executionId : null, o.status === "STARTED" ? null : o.error, now),
  );
}

/**
 * End of an invocation, one batch: settle the claimed runs; runs still open when their minute
 * stopped being recent (at or before `since`) become EXPIRED (keeping the last error); runs older
 * than `keepAfter` are deleted. Both sweeps bounded by `limit`.
 */
export async function finishScheduleRuns(
  db: D1Database,
  outcomes: ScheduleRunOutcome[],
  r: { now: number; since: number; keepAfter: number; limit: number },
): Promise<{ expired: number; deleted: number }> {
  const batch = new LabelledBatch<"settle" | "expire" | "delete">(db);
  for (const statement of settleStatements(db, outcomes, r.now)) batch.add("settle", statement);
  const results = await batch
    .add(
      "expire",
      db
        .prepare(
          `UPDATE schedule_runs
             SET status = 'EXPIRED', lease_until = NULL, finished_at = ?1, updated_at = ?1,
                 error = coalesce(error, 'not started before the scheduled minute stopped being recent')
           WHERE rowid IN (SELECT rowid FROM schedule_runs
                           WHERE finished_at IS NULL AND scheduled_at <= ?2 ORDER BY scheduled_at LIMIT ?3)`,
        )
        .bind(r.now, r.since, r.limit),
    )
    .add(
      "delete",
      db
        .prepare(
          `DELETE FROM schedule_runs
           WHERE rowid IN (SELECT rowid FROM schedule_runs WHERE scheduled_at < ?1 ORDER BY scheduled_at LIMIT ?2)`,
        )
        .bind(r.keepAfter, r.limit),
    )
    .run();
  return { expired: results.changes("expire"), deleted: results.changes("delete") };
}

export interface ScheduleRunRecord {
  cron: string;
  scheduledAt: number;
  status: ScheduleRunStatus;
  attempts: number;
  executionId: string | null;
  error: string | null;
  updatedAt: number;
}

const SCHEDULE_RUN_RECORD = selectList<ScheduleRunRecord>({
  cron: "cron",
  scheduledAt: "scheduled_at",
  status: "status",
  attempts: "attempts",
  executionId: "execution_id",
  error: "error",
  updatedAt: "updated_at",
});

/** The workflow's most recent scheduled runs, newest minute first (a primary-key range). */
export async function recentScheduleRuns(
  db: D1Database,
  workspace: string,
  workflowId: string,
  limit: number,
): Promise<ScheduleRunRecord[]> {
  const { results } = await db
    .prepare(
      `SELECT ${SCHEDULE_RUN_RECORD} FROM schedule_runs
       WHERE workspace = ?1 AND workflow_id = ?2 ORDER BY scheduled_at DESC LIMIT ?3`,
    )
    .bind(workspace, workflowId, limit)
    .all<ScheduleRunRecord>();
  return results;
}
