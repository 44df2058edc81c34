/**
 * The step transitions a worker makes: the claim (with everything the run needs, one round trip),
 * the fenced writes during a run (the destination key, the heartbeat), the settle-and-dispatch
 * batch and the retry. Every transition is one statement named after it, with its precondition in
 * the WHERE clause; zero rows returned means "not yours" and the operation says what that means.
 *
 * Parameters follow the ledger's convention (src/ledger/index.ts); for a statement acting on one
 * step as its worker: ?1 execution id, ?2 vertex id, ?3 epoch, ?4 now, then the rest.
 */
import { sealedSecretsColumn } from "../secrets/store";
import {
  finishAttempt,
  markLostAttempts,
  openAttempt,
  recordAttemptKey,
  trimAttempts,
  type AttemptEnd,
  type AttemptResponse,
  type RetryDelayReason,
} from "./attempts";
import { LabelledBatch } from "./batch";
import { CHAINED_CLAIM_COLUMNS, MAX_CHAIN_CANDIDATES, type ChainedClaim, type ChainOffer } from "./chain-claim";
import type { ExecutionStatus } from "./executions";
import { selectList } from "./columns";
import { countAttemptEnd, countClaim, isReplayed } from "./execution-counters";
import { keySendsColumn, upsertKeySend, type KeySend } from "./key-sends";
import { CLAIMABLE, fenceParams, SETTLED, STEP_FENCE, WAITING, WAITING_DETAIL, type Fence, type StepRef } from "./step-sql";

export type { Fence, StepRef } from "./step-sql";

export type StepState = "DISPATCHED" | "EXECUTING" | "COMPLETED" | "FAILED" | "SKIPPED" | "CANCELLED";
export type StepEventType =
  "fenced_out" | "attempt_failed" | "lease_expired" | "operator_retry" | "dead_lettered" | "redelivery_dropped" | "cancelled";

// ---------------------------------------------------------------------------------------------
// Claim

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
}

/** What a claimed step reads: only the outputs its expressions can reach, and the payload only if they read it. */
export type StepInputs =
  | {
      withinBound: true;
      /** The payload, when the step reads it (the entry step's output IS the payload). */
      payload: unknown;
      readsPayload: boolean;
      /** Vertex id → output, of the outputs the step reads. */
      outputs: Record<string, unknown>;
      /** COMPLETED steps whose taken edges were not recorded (the entry step written by ingress). */
      unrecorded: string[];
    }
  | {
      withinBound: false;
      /** Bytes of what the step reads: the payload (if read) and the JSON object of the outputs. */
      inputBytes: number;
      readsPayload: boolean;
      /** Vertex id → bytes, of each output the step reads (for the error). */
      outputSizes: Record<string, number>;
    };

/**
 * The start of the `attempt_failed` detail (and step error) of an attempt the destination
 * answered "in progress". `scheduleInProgressRecheck` writes it and the claim's read finds the
 * first one to time the in-progress budget: the ledger owns both sides of this text.
 */
export const IN_PROGRESS_MARK = "waiting: destination says in progress";

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
 * A message arrived, so the reaper's re-send back-off starts over (`next_resend_at` cleared).
 */
function claimStep(db: D1Database, ref: StepRef, now: number, leaseMs: number): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE steps
         SET state = 'EXECUTING', epoch = epoch + 1, attempt = attempt + 1, lease_until = ?3 + ?4, updated_at = ?3,
             next_resend_at = NULL, parked_until = NULL
       WHERE execution_id = ?1 AND vertex_id = ?2 AND ${CLAIMABLE}
       RETURNING ${CLAIMED_STEP}`,
    )
    .bind(ref.executionId, ref.vertexId, now, leaseMs);
}

/**
 * `recordLeaseExpiry`: runs just before `claimStep` in the same batch, so a takeover leaves a
 * `lease_expired` event naming the epoch that lost the step. A parked step whose time came is not
 * a lost lease (its resume is this claim): no event.
 */
function recordLeaseExpiry(db: D1Database, ref: StepRef, now: number): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
       SELECT execution_id, vertex_id, 'lease_expired', epoch, ?3, 'taken over by a new claim'
       FROM steps WHERE execution_id = ?1 AND vertex_id = ?2 AND state = 'EXECUTING' AND lease_until <= ?3 AND parked_until IS NULL`,
    )
    .bind(ref.executionId, ref.vertexId, now);
}

/**
 * `recordRedeliveryDropped`: placed just BEFORE `claimStep` in the claim batch. It inserts a
 * `redelivery_dropped` event exactly when the claim that follows is about to miss on a message
 * the consumer acks unrun: the step is already settled (always acked), or waiting and the
 * consumer drops such messages (`drop`: see src/steps/redelivery.ts) — the same transaction, so
 * the event and the consumer's ack always agree, and the counter `countClaim` moves with it — at
 * no extra round trip. Binds ?1 execution id, ?2 vertex id, ?3 now, ?4 the message's
 * description, ?5 drop (0/1).
 */
function recordRedeliveryDropped(db: D1Database, ref: StepRef, now: number, message: string, drop: boolean): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
       SELECT execution_id, vertex_id, 'redelivery_dropped', epoch, ?3,
              CASE WHEN ${SETTLED} THEN ?4 || ' acked: the step was already ' || state
                   ELSE ?4 || ' acked instead of retried: ' || ${WAITING_DETAIL} END
       FROM steps WHERE execution_id = ?1 AND vertex_id = ?2 AND (${SETTLED} OR (?5 = 1 AND ${WAITING} AND parked_until IS NULL))`,
    )
    .bind(ref.executionId, ref.vertexId, now, message, drop ? 1 : 0);
}

/**
 * When the destination first answered "in progress" since the last operator retry: the first
 * `attempt_failed` event whose detail starts with `IN_PROGRESS_MARK`. Binds ?2 vertex id.
 */
const IN_PROGRESS_SINCE = `(SELECT min(ev.at) FROM step_events ev
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

/**
 * The most a step may read in one claim: the payload (if it reads it) plus the JSON object of the
 * outputs it reads. D1 refuses any value or row over 2,000,000 bytes; the rest of the row is
 * small (a few numbers and the ids of unrecorded steps).
 */
export const MAX_STEP_INPUT_BYTES = 1_900_000;

export interface StepInputsBound {
  maxBytes: number;
  /**
   * The analysis version the caller understands (src/definitions/step-inputs.ts); a version stored
   * under another one — or `null` — reads every output, under the same bound.
   */
  analysisVersion: number | null;
}

interface StepInputsRow {
  input_bytes: number;
  reads_payload: number;
  /** The payload as JSON text, when read and within the bound. */
  payload: string | null;
  /** JSON object vertex id → output of the outputs read, when within the bound. */
  outputs: string | null;
  /** Over the bound only: JSON object vertex id → bytes of each output read. */
  output_sizes: string | null;
  /** JSON array: COMPLETED steps whose taken edges were not recorded (see `backfill`). */
  unrecorded: string;
}

/**
 * `readStepInputs`: what the step just claimed reads — nothing more. Its pinned version's
 * `step_inputs` (src/definitions/step-inputs.ts) names, per vertex, the outputs its expressions
 * can reach and whether they read the payload (the entry step's output IS the payload, so it is
 * never loaded twice); "all" for a dynamic reference, and for a version without the analysis.
 * The entry's edges are added while some COMPLETED step has no recorded edges (the backfill).
 *
 * D1 refuses any value or row over 2,000,000 bytes, and inside the claim batch such a refusal
 * would roll the claim back with it (the step would loop, its attempt counter never moving). So
 * the sizes are summed in SQL first, and the payload and the outputs object are built only when
 * the sum is within `maxBytes`; over it, the row says so (with each output's size) and the runner
 * settles the step FAILED. The outputs object is concatenated from the stored JSON texts, so its
 * size is exactly the sum measured.
 *
 * Runs only for a claim made by this batch (EXECUTING, updated at `now`): a duplicate delivery
 * reads nothing. Binds ?1 execution id, ?2 vertex id, ?3 analysis version, ?4 max bytes, ?5 now.
 */
function readStepInputs(db: D1Database, ref: StepRef, now: number, bound: StepInputsBound): D1PreparedStatement {
  return db
    .prepare(
      `WITH run AS (
         SELECT e.payload, e.entry_vertex_id AS entry,
                CASE WHEN json_extract(v.step_inputs, '$.v') = ?3 THEN v.step_inputs END AS spec
         FROM executions e
         JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version
         WHERE e.id = ?1
           AND EXISTS (SELECT 1 FROM steps s WHERE s.execution_id = ?1 AND s.vertex_id = ?2 AND s.state = 'EXECUTING' AND s.updated_at = ?5)
       ),
       unrecorded AS (
         SELECT json_group_array(vertex_id) AS ids, count(*) AS n FROM steps
         WHERE execution_id = ?1 AND state = 'COMPLETED' AND next_vertices IS NULL
       ),
       wanted AS (
         SELECT run.payload, run.entry, unrecorded.ids AS unrecorded,
                (SELECT value FROM json_each(run.spec, '$.vertices') WHERE key = ?2) AS own,
                CASE WHEN unrecorded.n > 0 THEN json_extract(run.spec, '$.backfill') END AS backfill,
                run.spec IS NULL AS legacy
         FROM run, unrecorded
       ),
       flags AS (
         SELECT wanted.*,
                (legacy OR coalesce(json_extract(own, '$.all'), 0) OR coalesce(json_extract(backfill, '$.all'), 0)) AS reads_all
         FROM wanted
       ),
       needed AS (
         SELECT o.vertex_id, coalesce(o.output, 'null') AS output
         FROM steps o, flags
         WHERE o.execution_id = ?1 AND o.state = 'COMPLETED' AND o.vertex_id <> flags.entry
           AND (flags.reads_all
                OR o.vertex_id IN (SELECT value FROM json_each(flags.own, '$.steps'))
                OR o.vertex_id IN (SELECT value FROM json_each(flags.backfill, '$.steps')))
       ),
       measured AS (
         SELECT flags.*,
                (reads_all OR coalesce(json_extract(own, '$.payload'), 0)
                           OR coalesce(json_extract(backfill, '$.payload'), 0)) AS reads_payload,
                2 + coalesce((SELECT sum(length(CAST(output AS BLOB)) + length(CAST(vertex_id AS BLOB)) + 4) FROM needed), 0)
                  AS outputs_bytes
         FROM flags
       )
       SELECT outputs_bytes + CASE WHEN reads_payload THEN length(CAST(payload AS BLOB)) ELSE 0 END AS input_bytes,
              reads_payload, unrecorded,
              CASE WHEN reads_payload AND outputs_bytes + length(CAST(payload AS BLOB)) <= ?4 THEN payload END AS payload,
              CASE WHEN outputs_bytes + CASE WHEN reads_payload THEN length(CAST(payload AS BLOB)) ELSE 0 END <= ?4
                THEN (SELECT '{' || coalesce(group_concat(json_quote(vertex_id) || ':' || output, ','), '') || '}' FROM needed)
              END AS outputs,
              CASE WHEN outputs_bytes + CASE WHEN reads_payload THEN length(CAST(payload AS BLOB)) ELSE 0 END > ?4
                THEN (SELECT json_group_object(vertex_id, length(CAST(output AS BLOB))) FROM needed) END AS output_sizes
       FROM measured`,
    )
    .bind(ref.executionId, ref.vertexId, bound.analysisVersion, bound.maxBytes, now);
}

function toStepInputs(row: StepInputsRow): StepInputs {
  const readsPayload = row.reads_payload !== 0;
  if (row.outputs === null) {
    return {
      withinBound: false,
      inputBytes: row.input_bytes,
      readsPayload,
      outputSizes: JSON.parse(row.output_sizes ?? "{}") as Record<string, number>,
    };
  }
  return {
    withinBound: true,
    payload: row.payload === null ? undefined : (JSON.parse(row.payload) as unknown),
    readsPayload,
    outputs: JSON.parse(row.outputs) as Record<string, unknown>,
    unrecorded: JSON.parse(row.unrecorded) as string[],
  };
}

export interface ClaimAndLoadOptions {
  /** What delivered this claim, for the `redelivery_dropped` event of a message acked unrun (default "a message"). */
  message?: string;
  /** The caller acks rather than retries if the step turns out to be waiting (src/steps/redelivery.ts). */
  dropIfWaiting?: boolean;
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
 * the attempt's record (older open attempts marked lost, this one opened if the claim succeeded,
 * the step's attempts trimmed to the newest `MAX_ATTEMPTS_KEPT`: ./attempts.ts), the run's
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
    .add("redeliveryDropped", recordRedeliveryDropped(db, ref, now, options.message ?? "a message", drop))
    .add("counters", countClaim(db, ref, now, drop))
    .add("claim", claimStep(db, ref, now, leaseMs))
    .add("attempts", markLostAttempts(db, ref))
    .add("attempts", openAttempt(db, ref, now))
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

/**
 * `loadStepInputs`: what a step claimed by a chained claim (./chain-claim.ts) reads, loaded on its
 * own AFTER the batch that claimed it committed — inside that batch, a read D1 refuses (over
 * 2,000,000 bytes) would have rolled the settle back with it. `claimedAt` is the claim's `now`
 * (the read runs only while the step is EXECUTING under that claim). Null: no longer that claim.
 */
export async function loadStepInputs(db: D1Database, ref: StepRef, claimedAt: number, bound: StepInputsBound): Promise<StepInputs | null> {
  const row = await readStepInputs(db, ref, claimedAt, bound).first<StepInputsRow>();
  return row ? toStepInputs(row) : null;
}

// ---------------------------------------------------------------------------------------------
// Fenced writes during a run

/** The key a step sends, and when it was first sent to the destination it goes to. */
export interface PersistedKey {
  key: string;
  send: KeySend;
}

/**
 * `persistIdempotencyKey`: store the destination key computed at the first attempt (on the step
 * and on the attempt's record) and record its first send to `destination` (the URL's origin) —
 * one batch, fenced. The key is written only if none is stored, so it is written once per step
 * and never changes; the value the row holds is the one to send. The send is recorded only if
 * none is on record for this workspace, key and destination: a start over finds the time of the
 * first execution's send. Null: fenced out.
 */
export async function persistIdempotencyKey(
  db: D1Database,
  fence: Fence,
  key: string,
  now: number,
  destination: string,
  guarded: boolean,
): Promise<PersistedKey | null> {
  const results = await new LabelledBatch<"key" | "attempt" | "send">(db)
    .add(
      "key",
      db
        .prepare(
          `UPDATE steps SET idempotency_key = coalesce(idempotency_key, ?5), updated_at = ?4
           WHERE ${STEP_FENCE}
           RETURNING idempotency_key`,
        )
        .bind(...fenceParams(fence), now, key),
    )
    .add("attempt", recordAttemptKey(db, fence))
    .add("send", upsertKeySend(db, fence, now, destination, guarded))
    .run();
  const stored = results.first<{ idempotency_key: string }>("key");
  const send = results.first<KeySend>("send");
  return stored && send ? { key: stored.idempotency_key, send } : null;
}

/** `extendLease`: the fenced heartbeat of a long call. False: the step is no longer ours. */
export async function extendLease(db: D1Database, fence: Fence, now: number, leaseMs: number): Promise<boolean> {
  const row = await db
    .prepare(`UPDATE steps SET lease_until = ?4 + ?5, updated_at = ?4 WHERE ${STEP_FENCE} RETURNING lease_until`)
    .bind(...fenceParams(fence), now, leaseMs)
    .first();
  return row !== null;
}

/**
 * `recordFencedOut`: placed first in every settle batch. It inserts a `fenced_out` event exactly
 * when the fence does NOT hold, i.e. when the write that follows is about to match zero rows: a
 * late worker's result is never silently lost, and recording it costs no extra round trip.
 */
function recordFencedOut(db: D1Database, fence: Fence, now: number, detail: string): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
       SELECT ?1, ?2, 'fenced_out', ?3, ?4, ?5
       WHERE NOT EXISTS (SELECT 1 FROM steps WHERE ${STEP_FENCE})`,
    )
    .bind(...fenceParams(fence), now, detail);
}

/** An event recorded only while the fence holds (so a fenced-out worker cannot add history). */
function recordFencedEvent(db: D1Database, fence: Fence, now: number, type: StepEventType, detail: string): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
       SELECT ?1, ?2, ?5, ?3, ?4, ?6
       WHERE EXISTS (SELECT 1 FROM steps WHERE ${STEP_FENCE})`,
    )
    .bind(...fenceParams(fence), now, type, detail);
}

// ---------------------------------------------------------------------------------------------
// Settle and dispatch

export type SettleOutcome =
  { state: "COMPLETED"; output: string; nextVertices: string[] } | { state: "FAILED"; error: string; output: string | null };

export interface DescendantPlan {
  vertexId: string;
  predecessors: string[];
}

export interface SettleInput {
  fence: Fence;
  now: number;
  outcome: SettleOutcome;
  /** The redacted request summary (JSON), if the step made a request. */
  request: string | null;
  /** What the destination answered this attempt, if it was a call that got an answer (the attempt's record). */
  response?: AttemptResponse | null;
  /**
   * COMPLETED steps whose taken edges were not recorded (the entry step, written by ingress):
   * recorded here, idempotently, before the fan-in decisions read them.
   */
  backfill: Array<{ vertexId: string; nextVertices: string[] }>;
  /** Every descendant of the settling vertex, in topological order, with its predecessors. */
  descendants: DescendantPlan[];
  /**
   * When COMPLETED, also claim one of these successors in the same batch if it became ready, so
   * the caller runs it at once (./chain-claim.ts). Absent: every ready successor gets a message.
   */
  chain?: ChainOffer | null;
}

export interface SettleResult {
  /** False: the fence did not hold; nothing of this worker's was written (a fenced_out event was). */
  settled: boolean;
  /** Steps this batch inserted as DISPATCHED and did not claim: send one message each, after the commit. */
  dispatched: string[];
  /** The successor this batch claimed for the caller to run (`SettleInput.chain`), if any. */
  chained: ChainedClaim | null;
  skipped: string[];
  /** The execution's new final status, if this batch finished it. */
  executionStatus: "COMPLETED" | "FAILED" | null;
}

/** `settleStep`: EXECUTING (fenced) → COMPLETED | FAILED, with output, error and next vertices. */
function settleStep(db: D1Database, input: SettleInput): D1PreparedStatement {
  const o = input.outcome;
  return db
    .prepare(
      `UPDATE steps
         SET state = ?5, output = ?6, error = ?7, next_vertices = ?8, request = coalesce(?9, request),
             lease_until = NULL, finished_at = ?4, updated_at = ?4
       WHERE ${STEP_FENCE}
       RETURNING vertex_id`,
    )
    .bind(
      ...fenceParams(input.fence),
      input.now,
      o.state,
      o.output,
      o.state === "FAILED" ? o.error : null,
      o.state === "COMPLETED" ? JSON.stringify(o.nextVertices) : null,
      input.request,
    );
}

function backfillNextVertices(db: D1Database, executionId: string, vertexId: string, next: string[]): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE steps SET next_vertices = ?3
       WHERE execution_id = ?1 AND vertex_id = ?2 AND state = 'COMPLETED' AND next_vertices IS NULL`,
    )
    .bind(executionId, vertexId, JSON.stringify(next));
}

/**
 * `decideStep`: the fan-in decision, made by SQL inside the settle transaction rather than by a
 * worker's earlier read. The row for `vertexId` is inserted only once ALL its predecessors are
 * settled (COMPLETED or SKIPPED) — as DISPATCHED if at least one COMPLETED predecessor recorded
 * the edge into it as taken, else SKIPPED. D1 runs batches one at a time, so of two predecessors
 * settling concurrently, the second batch to commit sees both settled and decides; the first sees
 * one still running and writes nothing. Insert-if-absent makes a repeated decision a no-op.
 * Statements later in the same batch see a SKIPPED row inserted here, so skips propagate.
 *
 * With `claim` (the step is a candidate of the chain's offer, src/steps/chain.ts), a DISPATCHED
 * decision is inserted claimed instead — EXECUTING under epoch 1 and attempt 1 with the offer's
 * lease, the row a claim would leave, its attempt's row opened by the insert's trigger
 * (migrations/0024 `steps_claimed_at_insert`) — while the batch's own settle held its fence (the
 * settled step is COMPLETED under its epoch, finished now) and no earlier decision of this batch
 * already took the claim (one chained step per settle). Only a row inserted now is ever claimed
 * this way: a fresh step, never attempted, with no key, sends or attempts on record.
 * The fence condition is defence in depth, not a reachable branch: a row is inserted only by the
 * batch that settles its last predecessor, and a fenced-out batch settles nothing (every COMPLETED
 * settle decides all its descendants in its own transaction), so a stale worker's decision always
 * finds the row on record. Planting its removal turns no test red, for that reason
 * (test/ledger/chain-claim.test.ts shows the stale twin claiming nothing).
 * Binds ?1 execution id, ?2 vertex id, ?3 predecessors, ?4 now, ?5 their count, ?6 the lease ms
 * or NULL (no claim), ?7 the settled vertex, ?8 its epoch.
 */
function decideStep(
  db: D1Database,
  executionId: string,
  d: DescendantPlan,
  now: number,
  claim: { leaseMs: number; settled: Fence } | null,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, available_at, lease_until,
                          created_at, updated_at, finished_at)
       SELECT e.id, ?2, e.workspace,
              CASE WHEN NOT t.taken THEN 'SKIPPED' WHEN c.claim THEN 'EXECUTING' ELSE 'DISPATCHED' END,
              t.taken AND c.claim, t.taken AND c.claim, ?4,
              CASE WHEN t.taken AND c.claim THEN ?4 + ?6 END,
              ?4, ?4,
              CASE WHEN t.taken THEN NULL ELSE ?4 END
       FROM executions e,
            (SELECT EXISTS (
               SELECT 1 FROM steps p, json_each(p.next_vertices) j
               WHERE p.execution_id = ?1 AND p.state = 'COMPLETED'
                 AND p.vertex_id IN (SELECT value FROM json_each(?3)) AND j.value = ?2) AS taken) t,
            (SELECT ?6 IS NOT NULL
               AND EXISTS (SELECT 1 FROM steps g WHERE g.execution_id = ?1 AND g.vertex_id = ?7 AND g.epoch = ?8
                             AND g.state = 'COMPLETED' AND g.finished_at = ?4)
               AND NOT EXISTS (SELECT 1 FROM steps n WHERE n.execution_id = ?1 AND n.state = 'EXECUTING'
                                 AND n.epoch = 1 AND n.attempt = 1 AND n.created_at = ?4 AND n.updated_at = ?4) AS claim) c
       WHERE e.id = ?1
         AND (SELECT count(*) FROM steps p
              WHERE p.execution_id = ?1 AND p.state IN ('COMPLETED', 'SKIPPED')
                AND p.vertex_id IN (SELECT value FROM json_each(?3))) = ?5
       ON CONFLICT (execution_id, vertex_id) DO NOTHING
       RETURNING ${DECIDED}`,
    )
    .bind(
      executionId,
      d.vertexId,
      JSON.stringify(d.predecessors),
      now,
      d.predecessors.length,
      claim?.leaseMs ?? null,
      claim?.settled.vertexId ?? null,
      claim?.settled.epoch ?? null,
    );
}

/** What a decision returns: the state it decided, and for a step inserted claimed, the claim. */
interface Decided extends Omit<ChainedClaim, "keySendsJson"> {
  state: "DISPATCHED" | "SKIPPED" | "EXECUTING";
}

const DECIDED = `${CHAINED_CLAIM_COLUMNS}, state`;

/**
 * `finishExecution`: RUNNING → COMPLETED | FAILED once nothing is dispatched or executing.
 * Derived from the step rows, so whichever settle batch commits last finishes the execution.
 */
function finishExecution(db: D1Database, executionId: string, now: number): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE executions
         SET status = CASE WHEN EXISTS (SELECT 1 FROM steps WHERE execution_id = ?1 AND state = 'FAILED')
                           THEN 'FAILED' ELSE 'COMPLETED' END,
             finished_at = ?2, updated_at = ?2
       WHERE id = ?1 AND status = 'RUNNING'
         AND NOT EXISTS (SELECT 1 FROM steps WHERE execution_id = ?1 AND state IN ('DISPATCHED', 'EXECUTING'))
       RETURNING status`,
    )
    .bind(executionId, now);
}

/**
 * Settle and dispatch: ONE batch (one transaction, one round trip) — the fenced-out record, the
 * attempt's end (./attempts.ts), the settle, (when COMPLETED) the edge backfill and every
 * descendant's fan-in decision, and the execution's finish. The caller sends the queue messages
 * for `dispatched` after this returns, never before the commit.
 */
export async function settleAndDispatch(db: D1Database, input: SettleInput): Promise<SettleResult> {
  const { fence, now } = input;
  const o = input.outcome;
  const attempt: AttemptEnd = {
    outcome: o.state === "COMPLETED" ? "completed" : "failed",
    request: input.request,
    response: input.response ?? null,
    error: o.state === "FAILED" ? o.error : null,
    delay: null,
  };
  const batch = new LabelledBatch<"fencedOut" | "counters" | "attempt" | "settle" | "backfill" | "decide" | "finish">(db)
    .add("fencedOut", recordFencedOut(db, fence, now, `late ${o.state.toLowerCase()} rejected: the step was taken over or re-dispatched`))
    .add("counters", countAttemptEnd(db, fence, isReplayed(input.response?.headers)))
    .add("attempt", finishAttempt(db, fence, now, attempt))
    .add("settle", settleStep(db, input));
  if (input.outcome.state === "COMPLETED") {
    for (const b of input.backfill) batch.add("backfill", backfillNextVertices(db, fence.executionId, b.vertexId, b.nextVertices));
    // The chain's candidates are claimed at their insert (`decideStep`): the first one this batch
    // decides DISPATCHED, in the order the decisions run (a fan-in's order: skips propagate).
    const candidates = new Set(input.chain?.candidates.slice(0, MAX_CHAIN_CANDIDATES) ?? []);
    for (const d of input.descendants) {
      const claim = input.chain && candidates.has(d.vertexId) ? { leaseMs: input.chain.leaseMs, settled: fence } : null;
      batch.add("decide", decideStep(db, fence.executionId, d, now, claim));
    }
  }
  batch.add("finish", finishExecution(db, fence.executionId, now));
  const results = await batch.run();
  const decided = results.rows<Decided>("decide");
  const claimed = decided.find((row) => row.state === "EXECUTING");
  const chained: ChainedClaim | null = claimed
    ? {
        vertexId: claimed.vertexId,
        epoch: claimed.epoch,
        attempt: claimed.attempt,
        retryBase: claimed.retryBase,
        leaseUntil: claimed.leaseUntil,
        idempotencyKey: claimed.idempotencyKey,
        createdAt: claimed.createdAt,
      }
    : null;
  return {
    settled: results.first("settle") !== null,
    chained,
    dispatched: decided.filter((row) => row.state === "DISPATCHED").map((row) => row.vertexId),
    skipped: decided.filter((row) => row.state === "SKIPPED").map((row) => row.vertexId),
    executionStatus: results.first<{ status: "COMPLETED" | "FAILED" }>("finish")?.status ?? null,
  };
}

// ---------------------------------------------------------------------------------------------
// Back to DISPATCHED for a later attempt

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
async function backToDispatched(db: D1Database, fence: Fence, r: RetryInput, reason: RetryDelayReason): Promise<boolean> {
  const uncounted = reason === "in-progress";
  const attempt: AttemptEnd = {
    outcome: uncounted ? "in_progress" : "retried",
    request: r.request,
    response: r.response ?? null,
    error: r.error,
    delay: { ms: Math.max(0, r.availableAt - r.now), reason },
  };
  const results = await new LabelledBatch<"fencedOut" | "counters" | "attemptFailed" | "attempt" | "dispatched">(db)
    .add("fencedOut", recordFencedOut(db, fence, r.now, "late retry rejected: the step was taken over or re-dispatched"))
    .add("counters", countAttemptEnd(db, fence, isReplayed(r.response?.headers)))
    .add("attemptFailed", recordFencedEvent(db, fence, r.now, "attempt_failed", r.error))
    .add("attempt", finishAttempt(db, fence, r.now, attempt))
    .add(
      "dispatched",
      db
        .prepare(
          `UPDATE steps
             SET state = 'DISPATCHED', available_at = ?5, lease_until = NULL, error = ?6,
                 request = coalesce(?7, request), output = ?8, retry_base = retry_base + ?9, updated_at = ?4
           WHERE ${STEP_FENCE}
           RETURNING vertex_id`,
        )
        .bind(...fenceParams(fence), r.now, r.availableAt, r.error, r.request, r.output, uncounted ? 1 : 0),
    )
    .run();
  return results.first("dispatched") !== null;
}

/** `scheduleRetry`: a failed attempt within its budget waits for the next (counted). False: fenced out. */
export function scheduleRetry(db: D1Database, fence: Fence, r: ScheduledRetry): Promise<boolean> {
  return backToDispatched(db, fence, r, r.delayReason);
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
): Promise<boolean> {
  const error = `${IN_PROGRESS_MARK} (attempt ${r.attempt}): ${r.detail}`;
  const { now, availableAt, request, output, response } = r;
  return backToDispatched(db, fence, { now, availableAt, error, request, output, response }, "in-progress");
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
  r: { now: number; until: number; waitKey?: string },
): Promise<"parked" | "event-arrived" | "fenced-out"> {
  // ?4 until, ?5 now, ?6 wait key (NULL for a DELAY).
  const arrived = "(?6 IS NOT NULL AND EXISTS (SELECT 1 FROM event_consumptions c WHERE c.wait_key = ?6))";
  const results = await new LabelledBatch<"attempt" | "parked">(db)
    .add("attempt", finishAttempt(db, fence, r.now, { outcome: "slept", request: null, response: null, error: null, delay: null }))
    .add(
      "parked",
      db
        .prepare(
          // An event that arrived meanwhile: parked and woken at once (parked_until = now, as the event's un-park
          // does: step-sql.ts UNPARK_NOW), so the claim that resumes the step records no lease_expired.
          `UPDATE steps SET lease_until = iif(${arrived}, ?5, ?4), parked_until = iif(${arrived}, ?5, ?4),
                            wake_at = coalesce(wake_at, ?4), updated_at = ?5
           WHERE ${STEP_FENCE}
           RETURNING parked_until`,
        )
        .bind(...fenceParams(fence), r.until, r.now, r.waitKey ?? null),
    )
    .run();
  const row = results.first<{ parked_until: number | null }>("parked");
  if (!row) return "fenced-out";
  return row.parked_until === r.until ? "parked" : "event-arrived";
}
