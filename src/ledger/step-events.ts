/**
 * The step events the step batches write around their fenced statement (private to src/ledger,
 * but for the types and `IN_PROGRESS_MARK`): the fenced-out record that opens every settle and
 * retry batch, and an event written only while the fence holds.
 *
 * Binds as every worker statement: ?1 execution id, ?2 vertex id, ?3 epoch, ?4 now, then the rest.
 */
import { fenceParams, type Fence } from "./step-sql";
import { fenceOn, STEP_ROWS, type RowSource } from "./work-rows";

export type StepEventType =
  "fenced_out" | "attempt_failed" | "lease_expired" | "operator_retry" | "dead_lettered" | "redelivery_dropped" | "cancelled";

/**
 * The start of the `attempt_failed` detail (and step error) of an attempt the destination
 * answered "in progress". `scheduleInProgressRecheck` writes it and the claim's read finds the
 * first one to time the in-progress budget: the ledger owns both sides of this text.
 */
export const IN_PROGRESS_MARK = "waiting: destination says in progress";

/**
 * `recordFencedOut`: placed first in every settle batch. It inserts a `fenced_out` event exactly
 * when the fence does NOT hold, i.e. when the write that follows is about to match zero rows: a
 * late worker's result is never silently lost, and recording it costs no extra round trip.
 */
export function recordFencedOut(
  db: D1Database,
  fence: Fence,
  now: number,
  detail: string,
  rows: RowSource = STEP_ROWS,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
       SELECT ?1, ?2, 'fenced_out', ?3, ?4, ?5
       WHERE NOT EXISTS (SELECT 1 FROM ${rows.table} WHERE ${fenceOn(rows)})`,
    )
    .bind(...fenceParams(fence), now, detail);
}

/** An event recorded only while the fence holds (so a fenced-out worker cannot add history). */
export function recordFencedEvent(
  db: D1Database,
  fence: Fence,
  now: number,
  type: StepEventType,
  detail: string,
  rows: RowSource = STEP_ROWS,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
       SELECT ?1, ?2, ?5, ?3, ?4, ?6
       WHERE EXISTS (SELECT 1 FROM ${rows.table} WHERE ${fenceOn(rows)})`,
    )
    .bind(...fenceParams(fence), now, type, detail);
}
