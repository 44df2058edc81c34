/**
 * A claimed step that does not settle waits: back to DISPATCHED for a later attempt (`scheduleRetry`,
 * counted; `scheduleInProgressRecheck`, not counted: the destination said "in progress"), or parked
 * EXECUTING until a time (`parkStep`: a DELAY sleeping, a WAIT_FOR_EVENT waiting). Each is one
 * fenced batch with the attempt's end (./attempts.ts).
 *
 * Binds as every worker statement: ?1 execution id, ?2 vertex id, ?3 epoch, ?4 now, then the rest.
 */
import { finishAttempt, type AttemptEnd, type AttemptResponse, type RetryDelayReason } from "./attempts";
import { LabelledBatch } from "./batch";
import { countAttemptEnd, isReplayed } from "./execution-counters";
import { IN_PROGRESS_MARK, recordFencedEvent, recordFencedOut } from "./step-events";
import { fenceParams, STEP_FENCE, type Fence } from "./step-sql";
import { fenceOn, STEP_ROWS, type RowSource } from "./work-rows";
import { MAP_DONE, type MapPark } from "./map-sql";

export interface RetryInput {
  now: number;
  availableAt: number;
  /** The attempt's failure: the step's error and the `attempt_failed` event's detail. */
  error: string;
  /** The redacted request summary (JSON), if the attempt made one; null keeps the stored one. */
  request: string | null;
  output: string | null;
  /** What the destination answered, if it answered (the attempt's record). */
  response?: AttemptResponse | null;
}

/** A counted retry's input: why it waits until `availableAt` (the backoff, or the destination's `Retry-After`). */
export interface ScheduledRetry extends RetryInput {
  delayReason: Exclude<RetryDelayReason, "in-progress">;
}

/**
 * EXECUTING (fenced) → DISPATCHED, due at `availableAt`. One batch: fenced-out record, the
 * attempt's failure as an event, the attempt's end with its delay and why (./attempts.ts), the
 * transition. `uncounted` (an in-progress re-check) moves `retry_base` up with `attempt`, so
 * `attempt - retry_base` — the claims the budgets count — stays where it was.
 */
async function backToDispatched(db: D1Database, fence: Fence, r: RetryInput, reason: RetryDelayReason, rows: RowSource): Promise<boolean> {
  const uncounted = reason === "in-progress";
  const attempt: AttemptEnd = {
    outcome: uncounted ? "in_progress" : "retried",
    request: r.request,
    response: r.response ?? null,
    error: r.error,
    delay: { ms: Math.max(0, r.availableAt - r.now), reason },
  };
  const results = await new LabelledBatch<"fencedOut" | "counters" | "attemptFailed" | "attempt" | "dispatched">(db)
    .add("fencedOut", recordFencedOut(db, fence, r.now, "late retry rejected: the step was taken over or re-dispatched", rows))
    .add("counters", countAttemptEnd(db, fence, isReplayed(r.response?.headers), rows))
    .add("attemptFailed", recordFencedEvent(db, fence, r.now, "attempt_failed", r.error, rows))
    .add("attempt", finishAttempt(db, fence, r.now, attempt, rows))
    .add(
      "dispatched",
      db
        .prepare(
          `UPDATE ${rows.table}
             SET state = 'DISPATCHED', available_at = ?5, lease_until = NULL, error = ?6,
                 request = coalesce(?7, request), output = ?8, retry_base = retry_base + ?9, updated_at = ?4
           WHERE ${fenceOn(rows)}
           RETURNING ${rows.key}`,
        )
        .bind(...fenceParams(fence), r.now, r.availableAt, r.error, r.request, r.output, uncounted ? 1 : 0),
    )
    .run();
  return results.first("dispatched") !== null;
}

/** `scheduleRetry`: a failed attempt within its budget waits for the next (counted). False: fenced out. */
export function scheduleRetry(db: D1Database, fence: Fence, r: ScheduledRetry, rows: RowSource = STEP_ROWS): Promise<boolean> {
  return backToDispatched(db, fence, r, r.delayReason, rows);
}

/**
 * `scheduleInProgressRecheck`: the destination answered "in progress" for the step's key, so it
 * is asked again later. Not counted against the retry budget or the crash allowance; the error
 * starts with `IN_PROGRESS_MARK` and the attempt, which is how the in-progress budget finds when
 * the waiting began. False: fenced out.
 */
export function scheduleInProgressRecheck(
  db: D1Database,
  fence: Fence,
  r: Omit<RetryInput, "error"> & { attempt: number; detail: string },
  rows: RowSource = STEP_ROWS,
): Promise<boolean> {
  const error = `${IN_PROGRESS_MARK} (attempt ${r.attempt}): ${r.detail}`;
  const { now, availableAt, request, output, response } = r;
  return backToDispatched(db, fence, { now, availableAt, error, request, output, response }, "in-progress", rows);
}

/**
 * `parkStep`: the claimed step sleeps until `until` (a DELAY's wake time, a WAIT_FOR_EVENT's
 * timeout): its attempt ends as `slept`, and the step stays EXECUTING with its lease and
 * `parked_until` at `until`, so nothing bounces, takes it over or re-dispatches it meanwhile;
 * `wake_at` keeps the time for every later claim. The resume is the claim after `until`
 * (src/ledger/step-sql.ts CLAIMABLE), or an event's un-park (src/ledger/events.ts). One batch,
 * fenced.
 *
 * `waitKey`: a wait parks only if no event reached it since its registration read — an event
 * whose batch committed in between found the step running, not parked, so it could not un-park
 * it; the park then leaves the step claimable now (`event-arrived`) and the caller sends its
 * message at once.
 */
export async function parkStep(
  db: D1Database,
  fence: Fence,
  r: { now: number; until: number; waitKey?: string; mapItems?: MapPark },
): Promise<"parked" | "event-arrived" | "fenced-out"> {
  // ?4 until, ?5 now, ?6 wait key (NULL for a DELAY), ?7 a MAP's park (0/1), ?8 its stop on a failed item (0/1).
  // A MAP parks only while an item is unsettled (./map-items.ts MAP_DONE): an item that settled after the
  // MAP's read found it not parked and could not wake it, so the park leaves it claimable now instead.
  const arrived = `((?6 IS NOT NULL AND EXISTS (SELECT 1 FROM event_consumptions c WHERE c.wait_key = ?6)) OR (?7 = 1 AND ${MAP_DONE}))`;
  const results = await new LabelledBatch<"attempt" | "parked">(db)
    .add("attempt", finishAttempt(db, fence, r.now, { outcome: "slept", request: null, response: null, error: null, delay: null }))
    .add(
      "parked",
      db
        .prepare(
          // An event that arrived meanwhile: parked and woken at once (parked_until = now, as the event's un-park
          // does: step-sql.ts UNPARK_NOW), so the claim that resumes the step records no lease_expired.
          // A MAP's park is progress, not a crash: its claims so far leave the crash allowance (retry_base).
          `UPDATE steps SET lease_until = iif(${arrived}, ?5, ?4), parked_until = iif(${arrived}, ?5, ?4),
                            wake_at = coalesce(wake_at, ?4), updated_at = ?5, retry_base = iif(?7 = 1, attempt, retry_base)
           WHERE ${STEP_FENCE}
           RETURNING parked_until`,
        )
        .bind(...fenceParams(fence), r.until, r.now, r.waitKey ?? null, r.mapItems ? 1 : 0, r.mapItems?.stopOnFailure ? 1 : 0),
    )
    .run();
  const row = results.first<{ parked_until: number | null }>("parked");
  if (!row) return "fenced-out";
  return row.parked_until === r.until ? "parked" : "event-arrived";
}
