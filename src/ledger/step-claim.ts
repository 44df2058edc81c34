/**
 * The claim of a step and its lease: `claimAndLoad` — the claim with everything the run needs, in
 * one round trip (the lease-expiry and redelivery-dropped records, the claim, the attempts kept,
 * the run's context, the step's inputs: ./step-inputs.ts) — and `extendLease`, the fenced
 * heartbeat of a long call.
 *
 * Parameters follow the ledger's convention (src/ledger/index.ts); for a statement acting on one
 * step as its worker: ?1 execution id, ?2 vertex id, ?3 epoch, ?4 now, then the rest.
 */
import { sealedSecretsColumn } from "../secrets/store";
import { markLostAttempts, trimAttempts } from "./attempts";
import { LabelledBatch } from "./batch";
import { selectList } from "./columns";
import { countClaim } from "./execution-counters";
import type { ExecutionStatus } from "./execution-types";
import { limitedConnectorsColumn } from "./limited-connectors";
import { keySendsColumn } from "./key-sends";
import { IN_PROGRESS_MARK } from "./step-events";
import {
  MAX_STEP_INPUT_BYTES,
  readStepInputs,
  toStepInputs,
  type StepInputs,
  type StepInputsBound,
  type StepInputsRow,
} from "./step-inputs";
import { CLAIMABLE, fenceParams, SETTLED, WAITING, WAITING_DETAIL, type Fence, type StepRef, type StepState } from "./step-sql";
import { fenceOn, STEP_ROWS, type RowSource } from "./work-rows";

export interface ClaimedStep {
  epoch: number;
  attempt: number;
  /** `attempt - retryBase` is the number of claims the retry budget and the crash allowance count. */
  retryBase: number;
  leaseUntil: number;
  /** The destination key persisted by an earlier attempt, if any: every later attempt sends it. */
  idempotencyKey: string | null;
}

/** The step, its execution and its pinned definition: what the runner needs, and why a claim missed. */
export interface StepRun {
  executionId: string;
  workspace: string;
  workflowId: string;
  version: string;
  entryVertexId: string;
  triggerKind: string;
  /** The execution this one was started over from (its steps may have written), if any. */
  startedOverFrom: string | null;
  executionStatus: ExecutionStatus;
  /** The pinned version's definition, as stored (JSON text). */
  definitionJson: string;
  /** The step's state; null when the execution has no step for this vertex. */
  stepState: StepState | null;
  leaseUntil: number | null;
  /** Set while the step is parked (a DELAY sleeping): when it resumes. */
  parkedUntil: number | null;
  /** A DELAY's wake time, persisted the first time it parked: never recomputed. */
  wakeAt: number | null;
  availableAt: number | null;
  /**
   * When the destination first answered "in progress" for this step since it was dispatched or
   * operator-retried (the first in-progress re-check after the last `operator_retry`); null if it
   * has not. The in-progress budget counts from here.
   */
  inProgressSince: number | null;
  /** JSON array of the workspace's sealed secrets that the definition names (src/secrets/store.ts). */
  sealedSecretsJson: string | null;
  /** When the step's persisted key was first sent to each destination (`parseKeySends`); '{}' without a key. */
  keySendsJson: string | null;
  /** When the step was created (dispatched): no later than any send of its key. */
  stepCreatedAt: number | null;
  /** The workspace's limited connectors as the claim read them (./limited-connectors.ts `mustAsk`); absent: ask. */
  limitedConnectorsJson?: string | null;
}

const CLAIMED_STEP = selectList<ClaimedStep>({
  epoch: "epoch",
  attempt: "attempt",
  retryBase: "retry_base",
  leaseUntil: "lease_until",
  idempotencyKey: "idempotency_key",
});

/**
 * `claimStep`: DISPATCHED (due) → EXECUTING, or the takeover of an EXECUTING step whose lease
 * expired. One statement: epoch and attempt +1, lease set, RETURNING the new epoch and the key.
 * A message arrived, so the reaper's re-send back-off starts over (`next_resend_at` cleared). A
 * step, or a work item, records when it was claimed (`claimed_at`, migrations/0040 and 0041): its
 * running attempt has no row until it ends, and this is its start (./attempts.ts). A takeover's
 * lost attempt is written by the trigger `steps_attempt_unrecorded` (`work_items_attempt_unrecorded`)
 * in this very statement.
 */
export function claimStep(db: D1Database, ref: StepRef, now: number, leaseMs: number, rows: RowSource = STEP_ROWS): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE ${rows.table}
         SET state = 'EXECUTING', epoch = epoch + 1, attempt = attempt + 1, lease_until = ?3 + ?4, updated_at = ?3,
             next_resend_at = NULL, parked_until = NULL, claimed_at = ?3
       WHERE execution_id = ?1 AND ${rows.key} = ?2 AND ${CLAIMABLE}
       RETURNING ${CLAIMED_STEP}`,
    )
    .bind(ref.executionId, ref.vertexId, now, leaseMs);
}

/**
 * `recordLeaseExpiry`: runs just before `claimStep` in the same batch, so a takeover leaves a
 * `lease_expired` event naming the epoch that lost the step. A parked step whose time came is not
 * a lost lease (its resume is this claim): no event.
 */
export function recordLeaseExpiry(db: D1Database, ref: StepRef, now: number, rows: RowSource = STEP_ROWS): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
       SELECT execution_id, ${rows.key}, 'lease_expired', epoch, ?3, 'taken over by a new claim'
       FROM ${rows.table}
       WHERE execution_id = ?1 AND ${rows.key} = ?2 AND state = 'EXECUTING' AND lease_until <= ?3 AND parked_until IS NULL`,
    )
    .bind(ref.executionId, ref.vertexId, now);
}

/**
 * `recordRedeliveryDropped`: placed just BEFORE `claimStep` in the claim batch. It inserts a
 * `redelivery_dropped` event exactly when the claim that follows is about to miss on a message
 * the consumer acks unrun: the step is already settled (always acked), or waiting and the
 * consumer drops such messages (`drop`: see src/steps/redelivery.ts) — the same transaction, so
 * the event and the consumer's ack always agree, and the counter `countClaim` moves with it — at
 * no extra round trip. A permit waiter's wake-up (`permitWake`) meeting the step settled is neither:
 * the waiter was woken sooner and ran. Binds ?1 execution id, ?2 vertex id, ?3 now, ?4 the message's
 * description, ?5 drop (0/1), ?6 permitWake (0/1).
 */
export function recordRedeliveryDropped(
  db: D1Database,
  ref: StepRef,
  now: number,
  message: string,
  drop: boolean,
  rows: RowSource = STEP_ROWS,
  permitWake = false,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
       SELECT execution_id, ${rows.key}, 'redelivery_dropped', epoch, ?3,
              CASE WHEN ${SETTLED} THEN ?4 || ' acked: the step was already ' || state
                   ELSE ?4 || ' acked instead of retried: ' || ${WAITING_DETAIL} END
       FROM ${rows.table}
       WHERE execution_id = ?1 AND ${rows.key} = ?2 AND ((?6 = 0 AND ${SETTLED}) OR (?5 = 1 AND ${WAITING} AND parked_until IS NULL))`,
    )
    .bind(ref.executionId, ref.vertexId, now, message, drop ? 1 : 0, permitWake ? 1 : 0);
}

/**
 * When the destination first answered "in progress" since the last operator retry: the first
 * `attempt_failed` event whose detail starts with `IN_PROGRESS_MARK`. Binds ?2 vertex id.
 */
export const IN_PROGRESS_SINCE = `(SELECT min(ev.at) FROM step_events ev
  WHERE ev.execution_id = e.id AND ev.vertex_id = ?2 AND ev.type = 'attempt_failed'
    AND substr(ev.detail, 1, ${IN_PROGRESS_MARK.length}) = '${IN_PROGRESS_MARK}'
    AND ev.id > coalesce((SELECT max(r.id) FROM step_events r
                           WHERE r.execution_id = e.id AND r.vertex_id = ?2 AND r.type = 'operator_retry'), 0))`;

const STEP_RUN = selectList<StepRun>({
  executionId: "e.id",
  workspace: "e.workspace",
  workflowId: "e.workflow_id",
  version: "e.version",
  entryVertexId: "e.entry_vertex_id",
  triggerKind: "e.trigger_kind",
  startedOverFrom: "e.started_over_from",
  executionStatus: "e.status",
  definitionJson: "v.definition",
  stepState: "s.state",
  leaseUntil: "s.lease_until",
  parkedUntil: "s.parked_until",
  wakeAt: "s.wake_at",
  availableAt: "s.available_at",
  inProgressSince: IN_PROGRESS_SINCE,
  sealedSecretsJson: sealedSecretsColumn("e.workspace", "v.definition"),
  keySendsJson: keySendsColumn("s"),
  stepCreatedAt: "s.created_at",
  limitedConnectorsJson: limitedConnectorsColumn("e.workspace"),
});

/**
 * `readStepRun`: the step (if any), its execution and pinned definition, and the sealed workspace
 * secrets the definition names (so a Gateway step resolves them without another round trip; they
 * are opened only when a header needs them).
 */
function readStepRun(db: D1Database, ref: StepRef): D1PreparedStatement {
  return db
    .prepare(
      `SELECT ${STEP_RUN}
       FROM executions e
       JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version
       LEFT JOIN steps s ON s.execution_id = e.id AND s.vertex_id = ?2
       WHERE e.id = ?1`,
    )
    .bind(ref.executionId, ref.vertexId);
}

export interface ClaimAndLoadOptions {
  /** What delivered this claim, for the `redelivery_dropped` event of a message acked unrun (default "a message"). */
  message?: string;
  /** The caller acks rather than retries if the step turns out to be waiting (src/steps/redelivery.ts). */
  dropIfWaiting?: boolean;
  /** A permit waiter's wake-up: meeting the step settled is expected — no stopped redelivery counted. */
  permitWake?: boolean;
  /** The bound on what the step reads, and the analysis version (see `readStepInputs`). */
  inputs?: StepInputsBound;
}

export interface ClaimAndLoadResult {
  /** Null: the claim missed (`run.stepState` says why), or the execution does not exist (`run` null). */
  claimed: ClaimedStep | null;
  run: StepRun | null;
  /** Null unless this batch claimed the step. */
  inputs: StepInputs | null;
}

/**
 * Claim and load in ONE round trip: lease expiry record, [redelivery-dropped record,] the claim,
 * the attempts' records (a `running` row from before migrations/0040 under an older epoch marked
 * lost, the step's attempts trimmed to the newest `MAX_ATTEMPTS_KEPT`: ./attempts.ts — the claimed
 * attempt itself has no row until it ends, and a takeover's lost one is written by the claim's
 * trigger), the run's
 * context and the step's inputs. The claim is a single statement; the reads after it tell the
 * runner what it needs when the claim succeeded, and tell the consumer why when it did not
 * (completed, live lease, not due, unknown).
 */
export async function claimAndLoad(
  db: D1Database,
  ref: StepRef,
  now: number,
  leaseMs: number,
  options: ClaimAndLoadOptions = {},
): Promise<ClaimAndLoadResult> {
  const batch = new LabelledBatch<"leaseExpired" | "redeliveryDropped" | "counters" | "claim" | "attempts" | "run" | "inputs">(db);
  batch.add("leaseExpired", recordLeaseExpiry(db, ref, now));
  const drop = options.dropIfWaiting === true;
  batch
    .add("redeliveryDropped", recordRedeliveryDropped(db, ref, now, options.message ?? "a message", drop, STEP_ROWS, options.permitWake))
    .add("counters", countClaim(db, ref, now, drop, STEP_ROWS, options.permitWake))
    .add("claim", claimStep(db, ref, now, leaseMs))
    .add("attempts", markLostAttempts(db, ref))
    .add("attempts", trimAttempts(db, ref))
    .add("run", readStepRun(db, ref))
    .add("inputs", readStepInputs(db, ref, now, options.inputs ?? { maxBytes: MAX_STEP_INPUT_BYTES, analysisVersion: null }));
  const results = await batch.run();
  const inputs = results.first<StepInputsRow>("inputs");
  return {
    claimed: results.first<ClaimedStep>("claim"),
    run: results.first<StepRun>("run"),
    inputs: inputs ? toStepInputs(inputs) : null,
  };
}

/** `extendLease`: the fenced heartbeat of a long call. False: the step is no longer ours. */
export async function extendLease(
  db: D1Database,
  fence: Fence,
  now: number,
  leaseMs: number,
  rows: RowSource = STEP_ROWS,
): Promise<boolean> {
  const row = await db
    .prepare(`UPDATE ${rows.table} SET lease_until = ?4 + ?5, updated_at = ?4 WHERE ${fenceOn(rows)} RETURNING lease_until`)
    .bind(...fenceParams(fence), now, leaseMs)
    .first();
  return row !== null;
}
