/**
 * The operator's two actions on a COMPENSATION_FAILED execution (docs/steps.md "Compensation",
 * issue 45): retry its failed undo with the same key (`retryFailedUndo`), or mark the compensation
 * resolved with a note (`resolveCompensation`). Each ONE batch, guarded by the execution's status
 * in every statement, so of two operators acting at once one wins and the other is refused.
 */
import { LabelledBatch } from "./batch";
import { LIVE_STATUSES_SQL, type ExecutionStatus } from "./execution-types";
import type { UndoRef, UndoState } from "./undo-steps";

export type UndoRetryResult =
  | { retried: true; undo: UndoRef }
  | {
      retried: false;
      reason: "not-found" | "not-compensation-failed" | "live-execution";
      status: ExecutionStatus | null;
      /** For `live-execution`: the execution of the lineage that is live. */
      liveExecutionId?: string;
    };

/**
 * `retryFailedUndo`: the FAILED undo step of a COMPENSATION_FAILED execution (the one named by
 * `vertexId`, the step it undoes; null: whichever failed — one at a time, so at most one) back to
 * DISPATCHED with its persisted key (the retry sends the same key: one refund at the destination
 * whatever the first attempts did), a fresh retry budget (`retry_base = attempt`) and an
 * `operator_retry` event (its count is the generation the next `execution.compensation_failed`
 * carries in its webhook-id: migrations/0034); the execution back to COMPENSATING (live, no
 * finish) in the same batch — unless another execution of its lineage is live. The caller sends
 * the undo's message after the commit.
 * Binds ?1 execution id, ?2 the undone vertex (or NULL), ?3 workspace, ?4 now.
 */
export async function retryFailedUndo(
  db: D1Database,
  workspace: string,
  executionId: string,
  vertexId: string | null,
  now: number,
): Promise<UndoRetryResult> {
  const reopenable = `EXISTS (SELECT 1 FROM executions e WHERE e.id = ?1 AND e.workspace = ?3 AND e.status = 'COMPENSATION_FAILED'
      AND NOT EXISTS (SELECT 1 FROM executions l WHERE l.lineage_id = e.lineage_id AND l.id <> e.id AND l.status IN ${LIVE_STATUSES_SQL}))`;
  const failedUndo = `execution_id = ?1 AND (?2 IS NULL OR vertex_id = ?2) AND kind = 'undo' AND state = 'FAILED' AND ${reopenable}`;
  const params = [executionId, vertexId, workspace, now] as const;
  const results = await new LabelledBatch<"event" | "undo" | "execution" | "current">(db)
    .add(
      "event",
      db
        .prepare(
          `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
           SELECT execution_id, row_key, 'operator_retry', epoch, ?4, 'previous error: ' || substr(coalesce(error, ''), 1, 10000)
           FROM work_items WHERE ${failedUndo}`,
        )
        .bind(...params),
    )
    .add(
      "undo",
      db
        .prepare(
          `UPDATE work_items
             SET state = 'DISPATCHED', available_at = ?4, finished_at = NULL, error = NULL, retry_base = attempt, updated_at = ?4
           WHERE ${failedUndo}
           RETURNING execution_id AS executionId, vertex_id AS vertexId, item_index AS place`,
        )
        .bind(...params),
    )
    .add(
      "execution",
      db
        .prepare(
          `UPDATE executions SET status = 'COMPENSATING', finished_at = NULL, updated_at = ?4
           WHERE id = ?1 AND workspace = ?3 AND status = 'COMPENSATION_FAILED'
             AND EXISTS (SELECT 1 FROM work_items w WHERE w.execution_id = ?1 AND w.kind = 'undo' AND w.state = 'DISPATCHED')`,
        )
        .bind(...params),
    )
    .add(
      "current",
      db
        .prepare(
          `SELECT e.status,
                  (SELECT w.state FROM work_items w WHERE w.execution_id = e.id AND w.kind = 'undo' AND (?3 IS NULL OR w.vertex_id = ?3)
                   ORDER BY w.state = 'FAILED' DESC LIMIT 1) AS undoState,
                  (SELECT l.id FROM executions l WHERE l.lineage_id = e.lineage_id AND l.id <> e.id AND l.status IN ${LIVE_STATUSES_SQL}
                   LIMIT 1) AS liveExecutionId
           FROM executions e WHERE e.id = ?1 AND e.workspace = ?2`,
        )
        .bind(executionId, workspace, vertexId),
    )
    .run();
  const undo = results.first<UndoRef>("undo");
  if (undo) return { retried: true, undo };
  const current = results.first<{ status: ExecutionStatus; undoState: UndoState | null; liveExecutionId: string | null }>("current");
  if (!current || (vertexId !== null && current.undoState === null)) {
    return { retried: false, reason: "not-found", status: current?.status ?? null };
  }
  if (current.status === "COMPENSATION_FAILED" && current.undoState === "FAILED" && current.liveExecutionId !== null) {
    return { retried: false, reason: "live-execution", status: current.status, liveExecutionId: current.liveExecutionId };
  }
  return { retried: false, reason: "not-compensation-failed", status: current.status };
}

export interface CompensationResolution {
  executionId: string;
  status: "COMPENSATED";
  resolvedBy: string;
  note: string;
  resolvedAt: number;
  /** The undo step that had failed (its row key `<vertex>#undo#<place>`). */
  failedUndo: string | null;
  /** The undo steps never sent (after the failed one), CANCELLED now. */
  cancelledUndos: string[];
}

export type ResolveResult = { resolved: true; resolution: CompensationResolution } | { resolved: false; status: ExecutionStatus | null };

/**
 * `resolveCompensation` ("mark resolved"): a COMPENSATION_FAILED execution → COMPENSATED, final,
 * with the resolution on record (`compensation_resolutions`: who, the note, when, the failed undo).
 * The undo steps never sent (PENDING, after the failed one) are CANCELLED, each with a `cancelled`
 * event carrying who and the note — nothing more is sent — and the keys of the steps
 * whose undo did not complete are burnt (`burnt_keys`, `undo_key` empty): the operator says the
 * compensation is settled by hand, so a later send of the charge's key must not have the
 * destination replay it as if it stood. ONE batch; every statement guarded by the status, the
 * status changed last. Not resolved: not in this workspace (`status` null) or not COMPENSATION_FAILED.
 * Binds ?1 execution id, ?2 workspace, ?3 now, ?4 resolved by, ?5 the note.
 */
export async function resolveCompensation(
  db: D1Database,
  workspace: string,
  executionId: string,
  input: { now: number; resolvedBy: string; note: string },
): Promise<ResolveResult> {
  const failed = `EXISTS (SELECT 1 FROM executions e WHERE e.id = ?1 AND e.workspace = ?2 AND e.status = 'COMPENSATION_FAILED')`;
  const params = [executionId, workspace, input.now, input.resolvedBy, input.note] as const;
  const results = await new LabelledBatch<"event" | "resolution" | "burn" | "cancel" | "execution" | "current">(db)
    .add(
      "event",
      db
        .prepare(
          `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
           SELECT execution_id, row_key, 'cancelled', epoch, ?3, 'not run: the compensation was marked resolved by ' || ?4 || ': ' || ?5
           FROM work_items WHERE execution_id = ?1 AND kind = 'undo' AND state = 'PENDING' AND ${failed}`,
        )
        .bind(...params),
    )
    .add(
      "resolution",
      db
        .prepare(
          `INSERT INTO compensation_resolutions (execution_id, workspace, resolved_by, note, failed_undo, resolved_at)
           SELECT ?1, ?2, ?4, ?5,
                  (SELECT w.row_key FROM work_items w WHERE w.execution_id = ?1 AND w.kind = 'undo' AND w.state = 'FAILED'
                   ORDER BY w.item_index LIMIT 1), ?3
           WHERE ${failed}
           ON CONFLICT (execution_id) DO NOTHING
           RETURNING failed_undo AS failedUndo`,
        )
        .bind(...params),
    )
    .add(
      "burn",
      db
        .prepare(
          // The step's key, or a MAP item's (its row `<map>#<index>`) for an item's undo.
          `INSERT INTO burnt_keys (workspace, idempotency_key, execution_id, vertex_id, undo_key, burnt_at)
           SELECT u.workspace, u.undone_key, u.execution_id, u.undone, '', ?3
           FROM (SELECT w.workspace, w.execution_id,
                        iif(json_extract(w.item, '$.item') IS NULL, w.vertex_id,
                            w.vertex_id || '#' || json_extract(w.item, '$.item')) AS undone,
                        iif(json_extract(w.item, '$.item') IS NULL,
                            (SELECT s.idempotency_key FROM steps s WHERE s.execution_id = w.execution_id AND s.vertex_id = w.vertex_id),
                            (SELECT mi.idempotency_key FROM work_items mi
                             WHERE mi.execution_id = w.execution_id AND mi.row_key = w.vertex_id || '#' || json_extract(w.item, '$.item'))
                        ) AS undone_key
                 FROM work_items w WHERE w.execution_id = ?1 AND w.kind = 'undo' AND w.state IN ('FAILED', 'PENDING') AND ${failed}) u
           WHERE u.undone_key IS NOT NULL
           ON CONFLICT DO NOTHING`,
        )
        .bind(executionId, workspace, input.now),
    )
    .add(
      "cancel",
      db
        .prepare(
          `UPDATE work_items
             SET state = 'CANCELLED', finished_at = ?3, updated_at = ?3,
                 error = 'not run: the compensation was marked resolved by ' || ?4 || ' after an earlier undo failed'
           WHERE execution_id = ?1 AND kind = 'undo' AND state = 'PENDING' AND ${failed}
           RETURNING row_key AS rowKey`,
        )
        .bind(executionId, workspace, input.now, input.resolvedBy),
    )
    .add(
      "execution",
      db
        .prepare(
          `UPDATE executions SET status = 'COMPENSATED', finished_at = ?3, updated_at = ?3
           WHERE id = ?1 AND workspace = ?2 AND status = 'COMPENSATION_FAILED'
           RETURNING status`,
        )
        .bind(executionId, workspace, input.now),
    )
    .add("current", db.prepare("SELECT status FROM executions WHERE id = ?1 AND workspace = ?2").bind(executionId, workspace))
    .run();
  if (results.first("execution") === null) {
    return { resolved: false, status: results.first<{ status: ExecutionStatus }>("current")?.status ?? null };
  }
  return {
    resolved: true,
    resolution: {
      executionId,
      status: "COMPENSATED",
      resolvedBy: input.resolvedBy,
      note: input.note,
      resolvedAt: input.now,
      failedUndo: results.first<{ failedUndo: string | null }>("resolution")?.failedUndo ?? null,
      cancelledUndos: results.rows<{ rowKey: string }>("cancel").map((r) => r.rowKey),
    },
  };
}

/** The pending `execution.compensation_failed` rows of an execution (after the settle that failed it: their messages). */
export async function pendingCompensationFailedNotifications(db: D1Database, executionId: string): Promise<number[]> {
  const { results } = await db
    .prepare(
      `SELECT id FROM notification_outbox WHERE execution_id = ?1 AND event = 'execution.compensation_failed' AND status = 'pending'
       ORDER BY id`,
    )
    .bind(executionId)
    .all<{ id: number }>();
  return results.map((r) => r.id);
}
