/**
 * Operator actions on steps (SPEC section 7): the retry of a FAILED step. Every action is scoped
 * to the caller's workspace in SQL, so another workspace's step reads as not found.
 */
import { LabelledBatch } from "./batch";
import type { StepRef } from "./step-sql";
import type { StepState } from "./steps";

export type OperatorRetryResult = { retried: true } | { retried: false; state: StepState | null };

/**
 * `retryFailedStep`: FAILED → DISPATCHED (operator action), in the caller's workspace only. The
 * persisted destination key stays on the row, so the retry sends it again; the attempt counter
 * continues and `retry_base` restarts the retry budget. The execution goes back to RUNNING in the
 * same batch. Not retried: not found in this workspace (`state` null), or not FAILED (`state`
 * says what it is). The event quotes at most 10,000 characters of the error: a value built in SQL
 * must stay under what D1 stores (2,000,000 bytes) whatever the error held.
 */
export async function retryFailedStep(db: D1Database, workspace: string, ref: StepRef, now: number): Promise<OperatorRetryResult> {
  const failed = `execution_id = ?1 AND vertex_id = ?2 AND workspace = ?3 AND state = 'FAILED'`;
  const results = await new LabelledBatch<"event" | "step" | "execution" | "current">(db)
    .add(
      "event",
      db
        .prepare(
          `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
           SELECT execution_id, vertex_id, 'operator_retry', epoch, ?4, 'previous error: ' || substr(coalesce(error, ''), 1, 10000)
           FROM steps WHERE ${failed}`,
        )
        .bind(ref.executionId, ref.vertexId, workspace, now),
    )
    .add(
      "step",
      db
        .prepare(
          `UPDATE steps
             SET state = 'DISPATCHED', available_at = ?4, finished_at = NULL, error = NULL, retry_base = attempt, updated_at = ?4
           WHERE ${failed}
           RETURNING vertex_id`,
        )
        .bind(ref.executionId, ref.vertexId, workspace, now),
    )
    .add(
      "execution",
      db
        .prepare(
          `UPDATE executions SET status = 'RUNNING', finished_at = NULL, updated_at = ?3
           WHERE id = ?1 AND workspace = ?2 AND status <> 'RUNNING'
             AND EXISTS (SELECT 1 FROM steps WHERE execution_id = ?1 AND state = 'DISPATCHED')`,
        )
        .bind(ref.executionId, workspace, now),
    )
    .add(
      "current",
      db
        .prepare(`SELECT state FROM steps WHERE execution_id = ?1 AND vertex_id = ?2 AND workspace = ?3`)
        .bind(ref.executionId, ref.vertexId, workspace),
    )
    .run();
  if (results.first("step") !== null) return { retried: true };
  return { retried: false, state: results.first<{ state: StepState }>("current")?.state ?? null };
}
