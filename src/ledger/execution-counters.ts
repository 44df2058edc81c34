/**
 * The execution's "duplicates stopped" counters (migrations/0012), each maintained by one statement
 * in a batch that already stops the duplicate — no round trip of its own. Private to the ledger:
 * the step batches (./step-claim.ts, ./step-settle.ts, ./step-schedule.ts) place them. (The
 * trigger's count, `duplicate_deliveries`, is the start batch's.)
 */
import { CLAIMABLE, fenceParams, SETTLED, WAITING, type Fence, type StepRef } from "./step-sql";
import { fenceOn, STEP_ROWS, type RowSource } from "./work-rows";

/**
 * `countClaim`: placed BEFORE `claimStep` in the claim batch, it reads the step as the claim is
 * about to find it. A step already settled means this message is a redelivery the claim will
 * stop; so is one the consumer drops while the step waits (`drop`: the batch also records the
 * `redelivery_dropped` event). A claimable step means the claim will run attempt + 1, which raises
 * `max_attempt`. Writes the execution row only when one of them changes.
 * Binds ?1 execution id, ?2 vertex id, ?3 now, ?4 drop (0/1), ?5 a permit waiter's wake-up (0/1).
 */
export function countClaim(
  db: D1Database,
  ref: StepRef,
  now: number,
  drop: boolean,
  rows: RowSource = STEP_ROWS,
  permitWake = false,
): D1PreparedStatement {
  const step = `FROM ${rows.table} s WHERE s.execution_id = ?1 AND s.${rows.key} = ?2`;
  // A parked step (a DELAY sleeping) is neither: a message that meets it early is acked, not a
  // stopped redelivery, and the claim that resumes it is not a retry (docs/waits.md).
  // A permit waiter's wake-up (?5) meeting its step settled is expected: the waiter was woken sooner and ran.
  const stopped = `(SELECT count(*) ${step} AND ((?5 = 0 AND ${SETTLED}) OR (?4 = 1 AND ${WAITING} AND s.parked_until IS NULL)))`;
  const nextAttempt = `coalesce((SELECT s.attempt + 1 ${step} AND ${CLAIMABLE} AND s.parked_until IS NULL), 0)`;
  return db
    .prepare(
      `UPDATE executions
         SET redeliveries_stopped = redeliveries_stopped + ${stopped}, max_attempt = max(max_attempt, ${nextAttempt})
       WHERE id = ?1 AND (${stopped} > 0 OR ${nextAttempt} > max_attempt)`,
    )
    .bind(ref.executionId, ref.vertexId, now, drop ? 1 : 0, permitWake ? 1 : 0);
}

/**
 * `countAttemptEnd`: placed BEFORE the step's transition in a settle or retry batch, so the fence
 * is read as the transition will. A worker fenced out adds a fenced-out write (the batch's
 * `recordFencedOut` records its event); a worker still holding the step whose destination
 * replayed its answer (`replayed`) adds a destination replay. Binds the fence ?1–?3, ?4 replayed (0/1).
 */
export function countAttemptEnd(db: D1Database, fence: Fence, replayed: boolean, rows: RowSource = STEP_ROWS): D1PreparedStatement {
  const holds = `EXISTS (SELECT 1 FROM ${rows.table} WHERE ${fenceOn(rows)})`;
  return db
    .prepare(
      `UPDATE executions
         SET fenced_out_writes = fenced_out_writes + (NOT ${holds}), destination_replays = destination_replays + (?4 = 1 AND ${holds})
       WHERE id = ?1 AND (NOT ${holds} OR ?4 = 1)`,
    )
    .bind(...fenceParams(fence), replayed ? 1 : 0);
}

/** The header a destination's idempotency store sets on an answer it replayed (the IETF draft, Stripe, the demo). */
export function isReplayed(headers: Record<string, string> | undefined): boolean {
  return headers?.["idempotent-replayed"]?.toLowerCase() === "true";
}
