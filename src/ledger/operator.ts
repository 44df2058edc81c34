/**
 * Operator actions on steps (SPEC section 7): the retry of a FAILED step. Every action is scoped
 * to the caller's workspace in SQL, so another workspace's step reads as not found.
 */
import { LabelledBatch } from "./batch";
import { KEY_MAY_BE_FORGOTTEN_MARK } from "./key-sends";
import type { StepRef } from "./step-sql";
import type { StepState } from "./steps";

export type OperatorRetryResult =
  | { retried: true; acknowledged: boolean }
  | { retried: false; state: StepState | null }
  /** The retention guard refused this step's key: a retry must acknowledge that the destination may have forgotten it. */
  | { retried: false; state: "FAILED"; needsAcknowledgement: true };

export interface OperatorRetryOptions {
  /**
   * The operator checked by hand that the destination did not act on the key's first request
   * (or accepts that it might act twice): re-send a key the retention guard refused. Applies
   * only to a step the guard refused; its key's retention then counts from this retry.
   */
  acknowledgeForgottenKey?: boolean;
}

/**
 * `retryFailedStep`: FAILED → DISPATCHED (operator action), in the caller's workspace only. The
 * persisted destination key stays on the row, so the retry sends it again; the attempt counter
 * continues and `retry_base` restarts the retry budget. The execution goes back to RUNNING in the
 * same batch. Not retried: not found in this workspace (`state` null), not FAILED (`state` says
 * what it is), or refused by the retention guard (its error carries KEY_MAY_BE_FORGOTTEN_MARK) and
 * not acknowledged. An acknowledged retry of such a step moves its key's `counted_from` to now —
 * the re-send starts the destination's memory over — and its event says so. The event quotes at
 * most 10,000 characters of the error: a value built in SQL must stay under what D1 stores
 * (2,000,000 bytes) whatever the error held.
 *
 * Binds ?1 execution id, ?2 vertex id, ?3 workspace, ?4 now, ?5 acknowledged (0/1), ?6 the mark.
 */
export async function retryFailedStep(
  db: D1Database,
  workspace: string,
  ref: StepRef,
  now: number,
  options: OperatorRetryOptions = {},
): Promise<OperatorRetryResult> {
  const failed = `execution_id = ?1 AND vertex_id = ?2 AND workspace = ?3 AND state = 'FAILED'`;
  const refusedByGuard = `instr(coalesce(error, ''), ?6) > 0`;
  // The guard's refusal is retried only when acknowledged.
  const retryable = `${failed} AND (?5 = 1 OR NOT ${refusedByGuard})`;
  const params = [ref.executionId, ref.vertexId, workspace, now, options.acknowledgeForgottenKey ? 1 : 0, KEY_MAY_BE_FORGOTTEN_MARK];
  const results = await new LabelledBatch<"event" | "keyAcknowledged" | "step" | "execution" | "current">(db)
    .add(
      "event",
      db
        .prepare(
          `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
           SELECT execution_id, vertex_id, 'operator_retry', epoch, ?4,
                  CASE WHEN ${refusedByGuard}
                       THEN 'acknowledged that the destination may have forgotten key ' || idempotency_key ||
                            '; it is sent again and its retention counts from now. '
                       ELSE '' END || 'previous error: ' || substr(coalesce(error, ''), 1, 10000)
           FROM steps WHERE ${retryable}`,
        )
        .bind(...params),
    )
    .add(
      "keyAcknowledged",
      db
        .prepare(
          `UPDATE destination_key_sends SET counted_from = max(counted_from, ?4)
           WHERE workspace = ?3 AND ?5 = 1
             AND idempotency_key = (SELECT idempotency_key FROM steps WHERE ${failed} AND ${refusedByGuard})`,
        )
        .bind(...params),
    )
    .add(
      "step",
      db
        .prepare(
          `UPDATE steps
             SET state = 'DISPATCHED', available_at = ?4, finished_at = NULL, error = NULL, retry_base = attempt, updated_at = ?4
           WHERE ${retryable}
           RETURNING vertex_id`,
        )
        .bind(...params),
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
        .prepare(
          `SELECT state, ${refusedByGuard} AS refusedByGuard FROM steps
           WHERE execution_id = ?1 AND vertex_id = ?2 AND workspace = ?3`,
        )
        .bind(...params),
    )
    .run();
  if (results.first("step") !== null) return { retried: true, acknowledged: results.changes("keyAcknowledged") > 0 };
  const current = results.first<{ state: StepState; refusedByGuard: number }>("current");
  if (current?.state === "FAILED" && current.refusedByGuard) return { retried: false, state: "FAILED", needsAcknowledgement: true };
  return { retried: false, state: current?.state ?? null };
}
