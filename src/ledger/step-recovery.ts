/**
 * Recovery: the reaper's sweeps (overdue DISPATCHED steps whose message is presumed lost, EXECUTING
 * steps whose lease expired) and the record of messages that reached a dead-letter queue.
 */
import { LabelledBatch } from "./batch";
import { SETTLED, toStepRef, WAITING, WAITING_DETAIL, type StepRef } from "./step-sql";
import { ITEM_ROWS, itemRowKey, STEP_ROWS, type RowSource } from "./work-rows";

/** The reaper's longest wait between two re-sends of the same step (its back-off cap). */
export const DEFAULT_MAX_RESEND_WAIT_MS = 60 * 60_000;

/**
 * `redispatchOverdue`: DISPATCHED steps whose message is presumed lost (the send after the commit
 * failed, it was dead-lettered, or it waits in a backlog). The first re-send is due `overdueMs`
 * after `available_at`; after the n-th, the next is due `min(overdueMs · 2^n, maxWaitMs)` later
 * (`next_resend_at`), so a step whose message sits in a backlog does not gain one message per
 * sweep. `resends` counts them (the trace shows it). A claim clears `next_resend_at`.
 *
 * Bounded: each kind of due step is one index range (`steps_first_resend_due`,
 * `steps_next_resend_due`), at most `limit` of each read, the `limit` most overdue re-sent.
 * `available_at` is left alone (the step stays claimable). RETURNING what to re-send. The steps
 * are named by their primary key (`steps` has no rowid since migrations/0038).
 */
export async function redispatchOverdue(
  db: D1Database,
  now: number,
  overdueMs: number,
  limit: number,
  maxWaitMs: number = DEFAULT_MAX_RESEND_WAIT_MS,
): Promise<StepRef[]> {
  const due = `SELECT execution_id, vertex_id FROM (
      SELECT * FROM (SELECT execution_id, vertex_id, available_at + ?2 AS due FROM steps
                     WHERE state = 'DISPATCHED' AND next_resend_at IS NULL AND available_at <= ?1 - ?2
                     ORDER BY available_at LIMIT ?3)
      UNION ALL
      SELECT * FROM (SELECT execution_id, vertex_id, next_resend_at AS due FROM steps
                     WHERE state = 'DISPATCHED' AND next_resend_at IS NOT NULL AND next_resend_at <= ?1
                     ORDER BY next_resend_at LIMIT ?3)
    ) ORDER BY due LIMIT ?3`;
  const { results } = await db
    .prepare(
      `UPDATE steps
         SET resends = resends + 1, next_resend_at = ?1 + min(?2 << min(resends + 1, 30), ?4), updated_at = ?1
       WHERE (execution_id, vertex_id) IN (${due}) AND state = 'DISPATCHED'
       RETURNING execution_id, vertex_id`,
    )
    .bind(now, overdueMs, limit, maxWaitMs)
    .all<{ execution_id: string; vertex_id: string }>();
  return results.map(toStepRef);
}

/**
 * `redispatchExpiredLeases`: EXECUTING steps whose lease expired (their worker is presumed dead)
 * go back to DISPATCHED, due now, the `limit` longest expired first. Leaving EXECUTING fences the
 * old worker out (its epoch stays, but the state no longer matches). One batch: the events, then
 * the bounded transition.
 */
export async function redispatchExpiredLeases(db: D1Database, now: number, limit: number): Promise<StepRef[]> {
  // A parked step (a DELAY sleeping) is not an expired lease: its wake-up is its own (`dueParkedSteps`, src/steps/cron.ts).
  const expired = `SELECT execution_id, vertex_id FROM steps WHERE state = 'EXECUTING' AND lease_until <= ?1 AND parked_until IS NULL
                   ORDER BY lease_until LIMIT ?2`;
  const results = await new LabelledBatch<"leaseExpired" | "redispatched">(db)
    .add(
      "leaseExpired",
      db
        .prepare(
          `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
           SELECT execution_id, vertex_id, 'lease_expired', epoch, ?1, 're-dispatched by the reaper'
           FROM steps WHERE (execution_id, vertex_id) IN (${expired})`,
        )
        .bind(now, limit),
    )
    .add(
      "redispatched",
      db
        .prepare(
          `UPDATE steps SET state = 'DISPATCHED', lease_until = NULL, available_at = ?1, updated_at = ?1
           WHERE (execution_id, vertex_id) IN (${expired}) AND state = 'EXECUTING'
           RETURNING execution_id, vertex_id`,
        )
        .bind(now, limit),
    )
    .run();
  return results.rows<{ execution_id: string; vertex_id: string }>("redispatched").map(toStepRef);
}

// ---------------------------------------------------------------------------------------------
// Dead letters

export interface DeadLetter {
  queue: string;
  messageId: string;
  /** The message body as JSON text (the caller bounds its size). */
  body: string;
  attempts: number;
  /** The step the message was for, when its body names one (and the MAP item, when it names one). */
  step: (StepRef & { item?: number }) | null;
}

/**
 * `recordDeadLetters`: messages that reached the DLQ, in one batch. The `dead_letters` row is
 * always kept (with the step's state at that moment, for operators). The step gets ONE event,
 * chosen by SQL from its state, so a dead letter never reads as a failure of a step that is fine:
 * - settled (COMPLETED, SKIPPED, FAILED) or waiting (live lease, not due yet): the message was
 *   redundant — `redelivery_dropped`, detail "harmless" and why;
 * - otherwise (DISPATCHED and due, or EXECUTING under an expired lease) the step still needs a
 *   run — `dead_lettered`; the reaper re-sends it.
 */
export async function recordDeadLetters(db: D1Database, letters: readonly DeadLetter[], now: number): Promise<void> {
  const batch = new LabelledBatch<"deadLetter" | "stepEvent">(db);
  for (const m of letters) {
    // A MAP item's dead letter is its row's: its state, its event under its row key (./work-rows.ts).
    const rows = m.step?.item === undefined ? STEP_ROWS : ITEM_ROWS;
    const step =
      m.step && m.step.item !== undefined
        ? { executionId: m.step.executionId, vertexId: itemRowKey(m.step.vertexId, m.step.item) }
        : m.step;
    batch.add(
      "deadLetter",
      db
        .prepare(
          `INSERT INTO dead_letters (queue, message_id, body, attempts, at, step_state)
           VALUES (?1, ?2, ?3, ?4, ?5, (SELECT state FROM ${rows.table} WHERE execution_id = ?6 AND ${rows.key} = ?7))`,
        )
        .bind(m.queue, m.messageId, m.body, m.attempts, now, step?.executionId ?? null, step?.vertexId ?? null),
    );
    if (step)
      batch.add(
        "stepEvent",
        deadLetterEvent(db, step, now, `message ${m.messageId} reached ${m.queue} after ${m.attempts} attempts`, rows),
      );
  }
  await batch.run();
}

/** The step's event for a dead letter. Binds ?1 execution id, ?2 vertex id, ?3 now, ?4 the message's description. */
function deadLetterEvent(db: D1Database, step: StepRef, now: number, message: string, rows: RowSource): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
       SELECT execution_id, ${rows.key},
              CASE WHEN ${SETTLED} OR ${WAITING} THEN 'redelivery_dropped' ELSE 'dead_lettered' END,
              epoch, ?3,
              ?4 || CASE
                WHEN ${SETTLED} THEN '; harmless: the step is already ' || state || ', the message had nothing left to run'
                WHEN ${WAITING} THEN '; harmless: ' || ${WAITING_DETAIL}
                ELSE '; the step still needs a run: the reaper re-sends it' END
       FROM ${rows.table} WHERE execution_id = ?1 AND ${rows.key} = ?2`,
    )
    .bind(step.executionId, step.vertexId, now, message);
}

/**
 * `dueParkedSteps`: parked steps whose time came at least `graceMs` ago — their delayed wake-up
 * message did not claim them (a sleep past the queue's 12-hour delay sends none; a message can be
 * lost): the wake-up task sends them one. Read only: the claim is the resume, and a step woken twice
 * resumes once. Over the partial index `steps_parked`.
 */
export async function dueParkedSteps(db: D1Database, now: number, graceMs: number, limit: number): Promise<StepRef[]> {
  const { results } = await db
    .prepare(
      `SELECT execution_id, vertex_id FROM steps
       WHERE parked_until IS NOT NULL AND parked_until <= ?1 AND state = 'EXECUTING'
       ORDER BY parked_until LIMIT ?2`,
    )
    .bind(now - graceMs, limit)
    .all<{ execution_id: string; vertex_id: string }>();
  return results.map(toStepRef);
}
