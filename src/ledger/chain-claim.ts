/**
 * The chained claim: the settle of a step (./steps.ts `settleAndDispatch`) also claims ONE of the
 * steps it made ready, so the same invocation runs it at once instead of sending it a queue message
 * (src/steps/chain.ts). (The start of an execution needs no claim: it inserts its first step
 * claimed, ./executions.ts `insertStartSteps`; `ChainedClaim` and `FirstStepKey` serve both.)
 *
 * Only a fresh step is claimed this way: DISPATCHED, due, never attempted (`attempt = 0`), so it
 * has no destination key, no key sends and no attempts on record yet. The claim is the same
 * transition as `claimStep` (epoch and attempt +1, lease set), guarded by the batch's own
 * success (the settle held its fence), and it opens the attempt's row
 * like the claim batch does (./attempts.ts `openAttempt`). Of several candidates the first one in
 * the given order that is claimable is taken, in one statement.
 *
 * Crash safety is the claim batch's: a claimed step that never runs stays EXECUTING under its
 * lease, and the reaper re-dispatches it once the lease expired (src/steps/reaper.ts).
 */
import { openAttempt } from "./attempts";
import { selectList } from "./columns";

export interface ChainOffer {
  /** The steps the batch may claim, in order of preference (at most `MAX_CHAIN_CANDIDATES` are tried). */
  candidates: string[];
  /** The lease of the chained claim. */
  leaseMs: number;
}

/** What a chained claim took: the step and the claim (epoch, attempt, lease). */
export interface ChainedClaim {
  vertexId: string;
  epoch: number;
  attempt: number;
  retryBase: number;
  leaseUntil: number;
  /** Null for a fresh step, unless the start batch inserted it with its key (`insertStartSteps`). */
  idempotencyKey: string | null;
  /** When the step row was created (the first send of its key can be no earlier). */
  createdAt: number;
  /** The key's first sends (as `StepRun.keySendsJson`), when the batch persisted one; absent: none on record. */
  keySendsJson?: string;
}

/**
 * The destination key of a first step, computed before the start batch (src/steps/first-key.ts):
 * the batch inserts the step claimed with it, as the key persist of the first attempt would leave
 * it (`persistIdempotencyKey`), so the inline run sends it without a round trip of its own.
 */
export interface FirstStepKey {
  /** The execution id the key was computed for (a key expression may read `execution.id`). */
  executionId: string;
  vertexId: string;
  key: string;
  /** The URL's origin the key goes to: its first send is recorded there. */
  destination: string;
  /** The key declares a retention: its send is kept for the retention guard (migrations/0017). */
  guarded: boolean;
}

/** More candidates would only add `openAttempt` statements for steps the claim cannot take. */
export const MAX_CHAIN_CANDIDATES = 4;

const CHAINED_CLAIM = selectList<Omit<ChainedClaim, "keySendsJson">>({
  vertexId: "vertex_id",
  epoch: "epoch",
  attempt: "attempt",
  retryBase: "retry_base",
  leaseUntil: "lease_until",
  idempotencyKey: "idempotency_key",
  createdAt: "created_at",
});

/**
 * The batch's own success, as SQL over ?1 execution id, ?3 now and the guard's parameters from ?5
 * on: the claim is made only while it holds.
 */
export interface ChainGuard {
  sql: string;
  params: unknown[];
}

/** The settle held its fence: the settled step is COMPLETED under its epoch, finished now. */
export function settledGuard(vertexId: string, epoch: number): ChainGuard {
  return {
    sql: `EXISTS (SELECT 1 FROM steps g WHERE g.execution_id = ?1 AND g.vertex_id = ?5 AND g.epoch = ?6
                   AND g.state = 'COMPLETED' AND g.finished_at = ?3)`,
    params: [vertexId, epoch],
  };
}

/**
 * `claimChainedStep`: the first candidate that is DISPATCHED, due and never attempted → EXECUTING,
 * epoch and attempt +1, lease set, RETURNING the claim. Binds ?1 execution id, ?2 JSON array of
 * candidates, ?3 now, ?4 lease ms, the guard from ?5.
 */
function claimChainedStep(db: D1Database, executionId: string, offer: ChainOffer, now: number, guard: ChainGuard): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE steps
         SET state = 'EXECUTING', epoch = epoch + 1, attempt = attempt + 1, lease_until = ?3 + ?4, updated_at = ?3,
             next_resend_at = NULL
       WHERE execution_id = ?1 AND state = 'DISPATCHED' AND available_at <= ?3 AND attempt = 0
         AND vertex_id = (SELECT c.value FROM json_each(?2) c
                          JOIN steps s ON s.execution_id = ?1 AND s.vertex_id = c.value
                          WHERE s.state = 'DISPATCHED' AND s.available_at <= ?3 AND s.attempt = 0
                          ORDER BY c.key LIMIT 1)
         AND ${guard.sql}
       RETURNING ${CHAINED_CLAIM}`,
    )
    .bind(executionId, JSON.stringify(offer.candidates), now, offer.leaseMs, ...guard.params);
}

/**
 * The statements of a chained claim, to add to a batch under their labels: the claim first, then
 * its attempt rows. (No counter: the settling step's own claim has already raised `max_attempt` to
 * at least 1, the only value a chained claim reaches.)
 */
export function chainedClaimStatements(
  db: D1Database,
  executionId: string,
  offer: ChainOffer,
  now: number,
  guard: ChainGuard,
): { claim: D1PreparedStatement; follow: D1PreparedStatement[] } {
  const bounded = { ...offer, candidates: offer.candidates.slice(0, MAX_CHAIN_CANDIDATES) };
  return {
    claim: claimChainedStep(db, executionId, bounded, now, guard),
    follow: [
      // Opens the row only for the step this batch claimed (EXECUTING, updated now); a no-op for the others.
      ...bounded.candidates.map((vertexId) => openAttempt(db, { executionId, vertexId }, now)),
    ],
  };
}
