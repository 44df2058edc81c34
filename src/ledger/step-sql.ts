/**
 * SQL fragments the step modules share (private to src/ledger, but for the types): a step's
 * states, the fence, what "claimable" and "waiting" mean, and how a time renders in an event detail.
 */

export type StepState = "DISPATCHED" | "EXECUTING" | "COMPLETED" | "FAILED" | "SKIPPED" | "CANCELLED";

export interface StepRef {
  executionId: string;
  vertexId: string;
}

/** What a worker holds after its claim: the step and the epoch it claimed it under. */
export interface Fence extends StepRef {
  epoch: number;
}

/**
 * THE FENCE. Every write a worker makes after its claim carries this predicate: the row is still
 * EXECUTING under the epoch this worker claimed. A takeover increments the epoch and the reaper
 * moves an expired step out of EXECUTING, so a worker presumed dead matches zero rows — even if
 * it wakes up holding a perfectly plausible epoch. The lease is deliberately NOT part of the
 * fence: a slow worker whose lease ran out but whom nobody replaced still owns the step, and
 * fencing it out would only force a pointless re-run.
 *
 * Binds ?1 execution id, ?2 vertex id, ?3 epoch (`fenceParams`).
 */
export const STEP_FENCE = "execution_id = ?1 AND vertex_id = ?2 AND epoch = ?3 AND state = 'EXECUTING'";

export const fenceParams = (f: Fence) => [f.executionId, f.vertexId, f.epoch] as const;

/** A step a worker may claim now: dispatched and due, or executing under an expired lease. Binds ?3 = now. */
export const CLAIMABLE = "((state = 'DISPATCHED' AND available_at <= ?3) OR (state = 'EXECUTING' AND lease_until <= ?3))";

/**
 * The step is waiting, not stuck: EXECUTING under a live lease, or DISPATCHED and not due yet.
 * Exactly the unsettled steps a claim refuses at `now` (binds ?3 = now).
 */
export const WAITING = "((state = 'EXECUTING' AND lease_until > ?3) OR (state = 'DISPATCHED' AND available_at > ?3))";

/**
 * THE UN-PARK: a parked step woken from outside (an event took its wait) becomes due now. It stays
 * parked — `parked_until` moves forward to `now`, it is not cleared — so the claim that resumes it
 * sees a parked step whose time came, exactly like a DELAY woken by its timer: no `lease_expired`
 * (`recordLeaseExpiry` and the reaper skip parked steps), no retry counted, and a lost wake-up
 * message is the wake-up task's (`dueParkedSteps`). The claim clears `parked_until`. `now`: a bound
 * parameter or column. A SET list for `UPDATE steps`.
 */
export const UNPARK_NOW = (now: string) => `parked_until = ${now}, lease_until = ${now}, updated_at = ${now}`;

/** A step that needs no message any more: settled, or cancelled. */
export const SETTLED = "state IN ('COMPLETED', 'FAILED', 'SKIPPED', 'CANCELLED')";

/** Milliseconds (a column or parameter) as an ISO-8601 UTC timestamp, for event details. */
const isoSql = (ms: string) => `strftime('%Y-%m-%dT%H:%M:%fZ', ${ms} / 1000.0, 'unixepoch')`;

/** Why a waiting step needs no message: the reaper's guarantee, for event details. */
export const WAITING_DETAIL = `CASE WHEN state = 'EXECUTING'
    THEN 'the step is EXECUTING under a live lease (epoch ' || epoch || ', until ' || ${isoSql("lease_until")}
         || '); the reaper re-dispatches it if that lease expires'
    ELSE 'the step is DISPATCHED and not due until ' || ${isoSql("available_at")}
         || '; the reaper re-sends it once it is overdue' END`;

/** `{ execution_id, vertex_id }` rows RETURNed by a sweep, as step references. */
export const toStepRef = (row: { execution_id: string; vertex_id: string }): StepRef => ({
  executionId: row.execution_id,
  vertexId: row.vertex_id,
});
