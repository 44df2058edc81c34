/**
 * The chained claim's shapes. A batch that already runs — the start of an execution
 * (./start-steps.ts `insertStartSteps`) or the settle of a step (./step-settle.ts `decideStep`) — inserts
 * ONE of the steps it makes ready already claimed, so the same invocation runs it at once instead
 * of sending it a queue message (src/steps/chain.ts). No claim statement runs: the row is inserted
 * as a claim leaves it (EXECUTING, epoch and attempt 1, the offer's lease), guarded by the batch's
 * own success (the start won its identity or its gates; the settle held its fence). Its attempt
 * has no row while it runs (migrations/0040): the trace reads it from the step row, started at its
 * `created_at` (its `claimed_at` stays NULL), and the batch that ends it writes its row (./attempts.ts).
 *
 * Only a fresh step is claimed this way — inserted now, never attempted — so it has no key sends
 * and no attempts on record yet. Crash safety is the claim batch's: a claimed step that never runs
 * stays EXECUTING under its lease, and the reaper re-dispatches it once the lease expired
 * (src/steps/reaper.ts).
 */

import { selectList } from "./columns";
import type { KeyGuard } from "./key-sends";

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
  /** The key declares a retention: its send is kept for the retention guard (migrations/0017), hot for that retention (0036). */
  guarded: KeyGuard;
}

/** A claimed step's row as a `ChainedClaim` (the start's and the settle's inserts RETURN it). */
export const CHAINED_CLAIM_COLUMNS = selectList<Omit<ChainedClaim, "keySendsJson">>({
  vertexId: "vertex_id",
  epoch: "epoch",
  attempt: "attempt",
  retryBase: "retry_base",
  leaseUntil: "lease_until",
  idempotencyKey: "idempotency_key",
  createdAt: "created_at",
});

/** Candidates a settle tries, in its decisions' order (more would only lengthen the decisions). */
export const MAX_CHAIN_CANDIDATES = 4;
