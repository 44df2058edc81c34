/**
 * Operator actions (SPEC sections 7 and 9): the retry of a FAILED step, and the cancel of a
 * running execution. Every action is scoped to the caller's workspace in SQL, so another
 * workspace's step or execution reads as not found. Both keep the rule that at most one execution
 * of a lineage (a chain of start overs, migrations/0009) is live, checked in the statement that
 * would break it (the start over's side is ./start-source.ts `startOverGate`).
 */
import { stepsWithEntry } from "./entry-step";
import { LabelledBatch } from "./batch";
import { KEY_MAY_BE_FORGOTTEN_MARK } from "./key-sends";
import { NEXT_ATTEMPT_SEQ, STEP_EVENT_MARK } from "./attempts";
import type { StepRef, StepState } from "./step-sql";
import { LIVE_STATUSES_SQL, type ExecutionStatus } from "./execution-types";
import { UNDOABLE } from "./step-settle";

export type OperatorRetryResult =
  | { retried: true; acknowledged: boolean }
  | { retried: false; reason: "not-found" }
  | { retried: false; reason: "not-failed"; state: StepState }
  /** The retention guard refused this step's key: a retry must acknowledge that the destination may have forgotten it. */
  | { retried: false; reason: "needs-acknowledgement" }
  | { retried: false; reason: "execution-cancelled" }
  /** The execution is being (or was) compensated (docs/steps.md "Compensation"): its failure stands. */
  | { retried: false; reason: "compensation"; status: ExecutionStatus }
  /** Another execution of the lineage is RUNNING: reopening this one would make two live. */
  | { retried: false; reason: "live-execution"; liveExecutionId: string }
  /** A newer execution took this one's trigger identity (reuse after failure): retry that one instead. */
  | { retried: false; reason: "superseded"; supersededBy: string };

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
 * same batch. Not retried: not found in this workspace, not FAILED, its execution CANCELLED (a
 * cancel is a decision: start over instead) or superseded (a newer execution took its identity),
 * another execution of its lineage RUNNING, or refused
 * by the retention guard (its error carries KEY_MAY_BE_FORGOTTEN_MARK) and not acknowledged. An
 * acknowledged retry of such a step moves its key's `counted_from` to now — the re-send starts the
 * destination's memory over — and its event says so. The event quotes at
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
  // FAILED, in a reopenable execution that no other execution of its lineage supersedes while live.
  const failed = `execution_id = ?1 AND vertex_id = ?2 AND workspace = ?3 AND state = 'FAILED'
    AND EXISTS (SELECT 1 FROM executions e
                WHERE e.id = ?1 AND e.status IN ('RUNNING', 'FAILED') AND e.superseded_by IS NULL AND ${NO_OTHER_LIVE})`;
  const refusedByGuard = `instr(coalesce(error, ''), ?6) > 0`;
  // The guard's refusal is retried only when acknowledged.
  const retryable = `${failed} AND (?5 = 1 OR NOT ${refusedByGuard})`;
  const params = [ref.executionId, ref.vertexId, workspace, now, options.acknowledgeForgottenKey ? 1 : 0, KEY_MAY_BE_FORGOTTEN_MARK];
  const results = await new LabelledBatch<"event" | "keyAcknowledged" | "items" | "step" | "execution" | "current">(db)
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
      "items",
      db
        .prepare(
          // A MAP's FAILED items are re-run, its COMPLETED ones kept (docs/steps.md "MAP"): back to PENDING with their
          // persisted keys and a fresh retry budget; the MAP's claim starts them. Before the step's own update, which
          // it reads as still FAILED.
          `UPDATE work_items
             SET state = 'PENDING', available_at = ?4, finished_at = NULL, error = NULL, retry_base = attempt, updated_at = ?4
           WHERE execution_id = ?1 AND vertex_id = ?2 AND kind = 'map_item' AND state = 'FAILED'
             AND EXISTS (SELECT 1 FROM steps WHERE ${retryable})`,
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
           WHERE id = ?1 AND workspace = ?2 AND status = 'FAILED'
             AND EXISTS (SELECT 1 FROM steps WHERE execution_id = ?1 AND state = 'DISPATCHED')`,
        )
        .bind(ref.executionId, workspace, now),
    )
    .add(
      "current",
      db
        .prepare(
          `SELECT s.state, ${refusedByGuard} AS refusedByGuard, e.status AS executionStatus, e.superseded_by AS supersededBy,
                  (SELECT l.id FROM executions l
                   WHERE l.lineage_id = e.lineage_id AND l.id <> e.id AND l.status IN ${LIVE_STATUSES_SQL} LIMIT 1)
                    AS liveExecutionId
           FROM ${stepsWithEntry("(?1)")} s JOIN executions e ON e.id = s.execution_id
           WHERE s.vertex_id = ?2 AND s.workspace = ?3`,
        )
        .bind(...params),
    )
    .run();
  if (results.first("step") !== null) return { retried: true, acknowledged: results.changes("keyAcknowledged") > 0 };
  const current = results.first<RetryCurrent>("current");
  if (!current) return { retried: false, reason: "not-found" };
  if (current.state !== "FAILED") return { retried: false, reason: "not-failed", state: current.state };
  if (current.executionStatus === "CANCELLED") return { retried: false, reason: "execution-cancelled" };
  if (current.executionStatus.startsWith("COMPENSAT")) return { retried: false, reason: "compensation", status: current.executionStatus };
  if (current.supersededBy !== null) return { retried: false, reason: "superseded", supersededBy: current.supersededBy };
  if (current.liveExecutionId !== null) return { retried: false, reason: "live-execution", liveExecutionId: current.liveExecutionId };
  return { retried: false, reason: "needs-acknowledgement" };
}

interface RetryCurrent {
  state: StepState;
  refusedByGuard: number;
  executionStatus: ExecutionStatus;
  supersededBy: string | null;
  liveExecutionId: string | null;
}

/** No execution of `e`'s lineage but `e` itself is RUNNING. For a statement where `e` is the execution acted on. */
const NO_OTHER_LIVE = `NOT EXISTS (SELECT 1 FROM executions l
  WHERE l.lineage_id = e.lineage_id AND l.id <> e.id AND l.status IN ${LIVE_STATUSES_SQL})`;

export type CancelResult =
  /** Cancelled now: the steps that were in flight, with the key each had sent (a sent call cannot be unsent). */
  | { cancelled: true; inFlight: InFlightStep[]; identityReleased: boolean; compensating: boolean }
  | { cancelled: false; status: ExecutionStatus | null; identityReleased: boolean };

export interface InFlightStep {
  vertexId: string;
  state: "DISPATCHED" | "EXECUTING";
  /** The key the step had persisted (and so may have sent); null if it had not. */
  idempotencyKey: string | null;
}

export interface CancelOptions {
  /**
   * Let the next trigger with this execution's identity start a new execution (its dedupe window
   * ends now). By default a CANCELLED execution keeps absorbing duplicates until its window ends.
   */
  releaseIdentity?: boolean;
  /**
   * Compensate (docs/steps.md "Compensation"): the in-flight steps are cancelled as for any cancel,
   * and when a COMPLETED step declares `compensate` the execution goes COMPENSATING instead of
   * CANCELLED (its undo steps inserted by the trigger `executions_compensation_starts`); the caller
   * sends the first undo's message. Without one to undo, a plain CANCELLED.
   */
  compensate?: boolean;
}

/**
 * `cancelExecution`: RUNNING → CANCELLED, with every DISPATCHED and EXECUTING step → CANCELLED at
 * once — its epoch moves, so a worker still running is fenced out (and recorded) when it settles,
 * and the reaper has nothing left to re-dispatch — a `cancelled` event per such step naming what
 * it had sent, and its running attempt closed as `cancelled`.
 *
 * ONE batch, one transaction: the in-flight steps read, the events written, the attempts, steps
 * and execution cancelled, [the identity released], the execution's status read. So a settle
 * racing the cancel either commits before it (and the cancel sees its result) or is fenced out
 * after it. Not cancelled: not in this workspace (`status` null), or already finished (`status`
 * says how; a CANCELLED one may still release its identity).
 *
 * Binds ?1 execution id, ?2 workspace, ?3 now.
 */
export async function cancelExecution(
  db: D1Database,
  workspace: string,
  executionId: string,
  now: number,
  options: CancelOptions = {},
): Promise<CancelResult> {
  const running = `EXISTS (SELECT 1 FROM executions e WHERE e.id = ?1 AND e.workspace = ?2 AND e.status = 'RUNNING')`;
  const inFlight = `execution_id = ?1 AND state IN ('DISPATCHED', 'EXECUTING') AND ${running}`;
  const params = [executionId, workspace, now] as const;
  // A MAP's items (docs/steps.md "MAP"): the in-flight ones fenced out like steps (their events under their row
  // keys), the ones not started cancelled with them — none starts after.
  const itemsInFlight = `execution_id = ?1 AND state IN ('PENDING', 'DISPATCHED', 'EXECUTING') AND ${running}`;
  const batch = new LabelledBatch<"inFlight" | "events" | "attempts" | "items" | "steps" | "execution" | "release" | "current">(db)
    .add(
      "inFlight",
      db
        .prepare(`SELECT vertex_id AS vertexId, state, idempotency_key AS idempotencyKey FROM steps WHERE ${inFlight} ORDER BY created_at`)
        .bind(executionId, workspace),
    )
    .add(
      "events",
      db
        .prepare(
          `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
           SELECT execution_id, vertex_id, 'cancelled', epoch + 1, ?3,
                  'cancelled while ' || state ||
                  CASE WHEN idempotency_key IS NULL THEN '; no key sent' ELSE '; key sent: ' || idempotency_key END
           FROM steps WHERE ${inFlight}
           UNION ALL
           SELECT execution_id, row_key, 'cancelled', epoch + 1, ?3,
                  'cancelled while ' || state ||
                  CASE WHEN idempotency_key IS NULL THEN '; no key sent' ELSE '; key sent: ' || idempotency_key END
           FROM work_items WHERE execution_id = ?1 AND state IN ('DISPATCHED', 'EXECUTING') AND ${running}`,
        )
        .bind(...params),
    )
    .add(
      "attempts",
      db
        .prepare(
          // The attempts still running end here (a clock behind the claim's never ends one before it
          // began).
          `UPDATE step_attempt_rows SET outcome = 'cancelled', finished_at = max(started_at, ?3),
                  seq = ${NEXT_ATTEMPT_SEQ}, ev_mark = ${STEP_EVENT_MARK}
           WHERE execution_id = ?1 AND outcome = 'running' AND ${running}`,
        )
        .bind(...params),
    )
    .add(
      "items",
      db
        .prepare(
          `UPDATE work_items
             SET state = 'CANCELLED', epoch = epoch + 1, lease_until = NULL, finished_at = ?3, updated_at = ?3, next_resend_at = NULL,
                 error = 'cancelled by an operator'
           WHERE ${itemsInFlight}`,
        )
        .bind(...params),
    )
    .add(
      "steps",
      db
        .prepare(
          `UPDATE steps
             SET state = 'CANCELLED', epoch = epoch + 1, lease_until = NULL, finished_at = ?3, updated_at = ?3, next_resend_at = NULL,
                 error = 'cancelled by an operator'
           WHERE ${inFlight}`,
        )
        .bind(...params),
    )
    .add(
      "execution",
      db
        .prepare(
          `UPDATE executions SET status = iif(?4 = 1 AND ${UNDOABLE}, 'COMPENSATING', 'CANCELLED'),
                                 finished_at = iif(?4 = 1 AND ${UNDOABLE}, NULL, ?3), updated_at = ?3
           WHERE id = ?1 AND workspace = ?2 AND status = 'RUNNING'
           RETURNING id, status`,
        )
        .bind(...params, options.compensate ? 1 : 0),
    );
  if (options.releaseIdentity) {
    // The window ends now; the identity row's CHECK wants it to end after it began.
    batch.add(
      "release",
      db
        .prepare(
          `UPDATE execution_identities SET expires_at = max(window_start + 1, ?3)
           WHERE execution_id = ?1 AND workspace = ?2 AND expires_at > ?3
             AND EXISTS (SELECT 1 FROM executions e WHERE e.id = ?1 AND e.workspace = ?2 AND e.status = 'CANCELLED')`,
        )
        .bind(...params),
    );
  }
  batch.add("current", db.prepare(`SELECT status FROM executions WHERE id = ?1 AND workspace = ?2`).bind(executionId, workspace));
  const results = await batch.run();
  const identityReleased = options.releaseIdentity === true && results.changes("release") > 0;
  const ended = results.first<{ status: ExecutionStatus }>("execution");
  if (ended !== null) {
    return {
      cancelled: true,
      inFlight: results.rows<InFlightStep>("inFlight"),
      identityReleased,
      compensating: ended.status === "COMPENSATING",
    };
  }
  const status = results.first<{ status: ExecutionStatus }>("current")?.status ?? null;
  return { cancelled: false, status, identityReleased };
}
