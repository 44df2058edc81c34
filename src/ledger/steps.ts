/**
 * Step SQL: the claim, the fence, the settle-and-dispatch batch, the reaper's sweeps and the
 * operator's retry. Every transition is one statement named after it, with its precondition in
 * the WHERE clause; zero rows returned means "not yours" and the caller decides what that means.
 *
 * Parameter convention for statements acting on one step as its worker: ?1 execution id,
 * ?2 vertex id, ?3 epoch, ?4 now; further parameters follow.
 */
import { sealedSecretsColumn } from "../secrets/store";

export type StepState = "DISPATCHED" | "EXECUTING" | "COMPLETED" | "FAILED" | "SKIPPED";
export type StepEventType = "fenced_out" | "attempt_failed" | "lease_expired" | "operator_retry" | "dead_lettered" | "redelivery_dropped";

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
 * Binds ?1 execution id, ?2 vertex id, ?3 epoch.
 */
export const STEP_FENCE = "execution_id = ?1 AND vertex_id = ?2 AND epoch = ?3 AND state = 'EXECUTING'";

/** A step a worker may claim now: dispatched and due, or executing under an expired lease. Binds ?3 = now. */
const CLAIMABLE = "((state = 'DISPATCHED' AND available_at <= ?3) OR (state = 'EXECUTING' AND lease_until <= ?3))";

const fenceParams = (f: Fence) => [f.executionId, f.vertexId, f.epoch] as const;

// ---------------------------------------------------------------------------------------------
// Claim

export interface ClaimedStep {
  epoch: number;
  attempt: number;
  retryBase: number;
  leaseUntil: number;
  /** The destination key persisted by an earlier attempt, if any: every later attempt sends it. */
  idempotencyKey: string | null;
}

/** The step, its execution and its pinned definition: what the runner needs, and why a claim missed. */
export interface StepRunRow {
  execution_id: string;
  workspace: string;
  workflow_id: string;
  version: string;
  entry_vertex_id: string;
  trigger_kind: string;
  execution_status: "RUNNING" | "COMPLETED" | "FAILED";
  definition: string;
  step_state: StepState | null;
  epoch: number | null;
  attempt: number | null;
  lease_until: number | null;
  available_at: number | null;
  /**
   * When the destination first answered "in progress" for this step since it was dispatched or
   * operator-retried (the first `IN_PROGRESS_MARK` event after the last `operator_retry`); null
   * if it has not. The in-progress budget counts from here.
   */
  in_progress_since: number | null;
  /** JSON array of the workspace's sealed secrets that the definition names (src/secrets/store.ts). */
  secrets: string | null;
}

/**
 * What a claimed step reads (`readStepInputs`): only the outputs its expressions can reach, and
 * the payload only if they read it, measured in SQL before anything is built.
 */
export interface StepInputsRow {
  /** Bytes of what the step reads: the payload (if read) and the JSON object of the outputs. */
  input_bytes: number;
  /** 1 when the step reads the payload (its value is in `payload` when within the bound). */
  reads_payload: number;
  /** The payload as JSON text, when read and within the bound. */
  payload: string | null;
  /** JSON object vertex id → output of the outputs read, when within the bound. */
  outputs: string | null;
  /** Over the bound only: JSON object vertex id → bytes of each output read (for the error). */
  output_sizes: string | null;
  /** JSON array: COMPLETED steps whose taken edges were not recorded (see `backfill`). */
  unrecorded: string;
}

/**
 * The start of the `attempt_failed` detail (and step error) of an attempt the destination
 * answered "in progress". `readStepRun` finds the first one to time the in-progress budget, so
 * the text is fixed: the steps layer writes it first, before anything a payload could shape.
 */
export const IN_PROGRESS_MARK = "waiting: destination says in progress";

/**
 * `claimStep`: DISPATCHED (due) → EXECUTING, or the takeover of an EXECUTING step whose lease
 * expired. One statement: epoch and attempt +1, lease set, RETURNING the new epoch and the key.
 * A message arrived, so the reaper's re-send back-off starts over (`next_resend_at` cleared).
 */
export function claimStep(db: D1Database, ref: StepRef, now: number, leaseMs: number): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE steps
         SET state = 'EXECUTING', epoch = epoch + 1, attempt = attempt + 1, lease_until = ?3 + ?4, updated_at = ?3,
             next_resend_at = NULL
       WHERE execution_id = ?1 AND vertex_id = ?2 AND ${CLAIMABLE}
       RETURNING epoch, attempt, retry_base, lease_until, idempotency_key`,
    )
    .bind(ref.executionId, ref.vertexId, now, leaseMs);
}

/**
 * `recordLeaseExpiry`: runs just before `claimStep` in the same batch, so a takeover leaves a
 * `lease_expired` event naming the epoch that lost the step.
 */
export function recordLeaseExpiry(db: D1Database, ref: StepRef, now: number): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
       SELECT execution_id, vertex_id, 'lease_expired', epoch, ?3, 'taken over by a new claim'
       FROM steps WHERE execution_id = ?1 AND vertex_id = ?2 AND state = 'EXECUTING' AND lease_until <= ?3`,
    )
    .bind(ref.executionId, ref.vertexId, now);
}

/** Milliseconds (a column or parameter) as an ISO-8601 UTC timestamp, for event details. */
const isoSql = (ms: string) => `strftime('%Y-%m-%dT%H:%M:%fZ', ${ms} / 1000.0, 'unixepoch')`;

/**
 * The step is waiting, not stuck: EXECUTING under a live lease, or DISPATCHED and not due yet.
 * Exactly the unsettled steps `claimStep` refuses at `now` (binds ?3 = now).
 */
const WAITING = "((state = 'EXECUTING' AND lease_until > ?3) OR (state = 'DISPATCHED' AND available_at > ?3))";

/** Why a waiting step needs no message: the reaper's guarantee, for event details. */
const WAITING_DETAIL = `CASE WHEN state = 'EXECUTING'
    THEN 'the step is EXECUTING under a live lease (epoch ' || epoch || ', until ' || ${isoSql("lease_until")} || '); the reaper re-dispatches it if that lease expires'
    ELSE 'the step is DISPATCHED and not due until ' || ${isoSql("available_at")} || '; the reaper re-sends it once it is overdue' END`;

/**
 * `recordRedeliveryDropped`: placed just BEFORE `claimStep` in the claim batch of a message the
 * consumer will drop if the step is waiting (see src/steps/redelivery.ts). It inserts a
 * `redelivery_dropped` event exactly when the claim that follows is about to miss on a waiting
 * step — the same transaction, so the event and the consumer's ack always agree — at no extra
 * round trip. Binds ?1 execution id, ?2 vertex id, ?3 now, ?4 the message's description.
 */
export function recordRedeliveryDropped(db: D1Database, ref: StepRef, now: number, message: string): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
       SELECT execution_id, vertex_id, 'redelivery_dropped', epoch, ?3, ?4 || ' acked instead of retried: ' || ${WAITING_DETAIL}
       FROM steps WHERE execution_id = ?1 AND vertex_id = ?2 AND ${WAITING}`,
    )
    .bind(ref.executionId, ref.vertexId, now, message);
}

/**
 * `readStepRun`: the step (if any), its execution and pinned definition, and the sealed workspace
 * secrets the definition names (so a Gateway step resolves them without another round trip; they
 * are opened only when a header needs them).
 */
export function readStepRun(db: D1Database, ref: StepRef): D1PreparedStatement {
  return db
    .prepare(
      `SELECT e.id AS execution_id, e.workspace, e.workflow_id, e.version, e.entry_vertex_id, e.trigger_kind,
              e.status AS execution_status, v.definition,
              s.state AS step_state, s.epoch, s.attempt, s.lease_until, s.available_at,
              (SELECT min(ev.at) FROM step_events ev
                WHERE ev.execution_id = e.id AND ev.vertex_id = ?2 AND ev.type = 'attempt_failed'
                  AND substr(ev.detail, 1, ${IN_PROGRESS_MARK.length}) = '${IN_PROGRESS_MARK}'
                  AND ev.id > coalesce((SELECT max(r.id) FROM step_events r
                                         WHERE r.execution_id = e.id AND r.vertex_id = ?2 AND r.type = 'operator_retry'), 0)) AS in_progress_since,
              ${sealedSecretsColumn("e.workspace", "v.definition")} AS secrets
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
export function readStepInputs(
  db: D1Database,
  ref: StepRef,
  now: number,
  maxBytes: number,
  analysisVersion: number | null,
): D1PreparedStatement {
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
                (reads_all OR coalesce(json_extract(own, '$.payload'), 0) OR coalesce(json_extract(backfill, '$.payload'), 0)) AS reads_payload,
                2 + coalesce((SELECT sum(length(CAST(output AS BLOB)) + length(CAST(vertex_id AS BLOB)) + 4) FROM needed), 0) AS outputs_bytes
         FROM flags
       )
       SELECT outputs_bytes + CASE WHEN reads_payload THEN length(CAST(payload AS BLOB)) ELSE 0 END AS input_bytes,
              reads_payload, unrecorded,
              CASE WHEN reads_payload AND outputs_bytes + length(CAST(payload AS BLOB)) <= ?4 THEN payload END AS payload,
              CASE WHEN outputs_bytes + CASE WHEN reads_payload THEN length(CAST(payload AS BLOB)) ELSE 0 END <= ?4
                THEN (SELECT '{' || coalesce(group_concat(json_quote(vertex_id) || ':' || output, ','), '') || '}' FROM needed) END AS outputs,
              CASE WHEN outputs_bytes + CASE WHEN reads_payload THEN length(CAST(payload AS BLOB)) ELSE 0 END > ?4
                THEN (SELECT json_group_object(vertex_id, length(CAST(output AS BLOB))) FROM needed) END AS output_sizes
       FROM measured`,
    )
    .bind(ref.executionId, ref.vertexId, analysisVersion, maxBytes, now);
}

/**
 * Claim and load in ONE round trip: [recordLeaseExpiry, claimStep, readStepRun, readStepInputs].
 * The claim is a single statement; the reads after it tell the runner what it needs when the
 * claim succeeded, and tell the consumer why when it did not (completed, live lease, not due,
 * unknown).
 *
 * `dropIfWaiting` (a description of the message): the caller acks rather than retries if the
 * step turns out to be waiting, so `recordRedeliveryDropped` is added before the claim — still
 * one round trip.
 *
 * `inputs`: the bound on what the step reads, and the analysis version (see `readStepInputs`).
 */
export async function claimAndLoad(
  db: D1Database,
  ref: StepRef,
  now: number,
  leaseMs: number,
  dropIfWaiting?: string,
  inputs: StepInputsBound = { maxBytes: MAX_STEP_INPUT_BYTES, analysisVersion: null },
): Promise<{ claimed: ClaimedStep | null; run: StepRunRow | null; inputs: StepInputsRow | null }> {
  const statements = [recordLeaseExpiry(db, ref, now)];
  if (dropIfWaiting !== undefined) statements.push(recordRedeliveryDropped(db, ref, now, dropIfWaiting));
  statements.push(
    claimStep(db, ref, now, leaseMs),
    readStepRun(db, ref),
    readStepInputs(db, ref, now, inputs.maxBytes, inputs.analysisVersion),
  );
  const [claim, read, loaded] = (await db.batch(statements)).slice(-3);
  const row = (
    claim?.results as Array<{ epoch: number; attempt: number; retry_base: number; lease_until: number; idempotency_key: string | null }>
  )[0];
  return {
    claimed: row
      ? {
          epoch: row.epoch,
          attempt: row.attempt,
          retryBase: row.retry_base,
          leaseUntil: row.lease_until,
          idempotencyKey: row.idempotency_key,
        }
      : null,
    run: ((read?.results ?? []) as StepRunRow[])[0] ?? null,
    inputs: ((loaded?.results ?? []) as StepInputsRow[])[0] ?? null,
  };
}

// ---------------------------------------------------------------------------------------------
// Fenced writes during a run

/**
 * `persistIdempotencyKey`: store the destination key computed at the first attempt. Fenced, and
 * only if none is stored, so it is written once per step and never changes; RETURNING the value
 * the row holds, which is the one to send. Zero rows: fenced out.
 */
export async function persistIdempotencyKey(db: D1Database, fence: Fence, key: string, now: number): Promise<string | null> {
  const row = await db
    .prepare(
      `UPDATE steps SET idempotency_key = coalesce(idempotency_key, ?5), updated_at = ?4
       WHERE ${STEP_FENCE}
       RETURNING idempotency_key`,
    )
    .bind(...fenceParams(fence), now, key)
    .first<{ idempotency_key: string }>();
  return row?.idempotency_key ?? null;
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
  /**
   * COMPLETED steps whose taken edges were not recorded (the entry step, written by ingress):
   * recorded here, idempotently, before the fan-in decisions read them.
   */
  backfill: Array<{ vertexId: string; nextVertices: string[] }>;
  /** Every descendant of the settling vertex, in topological order, with its predecessors. */
  descendants: DescendantPlan[];
}

export interface SettleResult {
  /** False: the fence did not hold; nothing of this worker's was written (a fenced_out event was). */
  settled: boolean;
  /** Steps this batch inserted as DISPATCHED: send one message each, after the commit. */
  dispatched: string[];
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
 */
function decideStep(db: D1Database, executionId: string, d: DescendantPlan, now: number): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO steps (execution_id, vertex_id, workspace, state, available_at, created_at, updated_at, finished_at)
       SELECT e.id, ?2, e.workspace,
              CASE WHEN t.taken THEN 'DISPATCHED' ELSE 'SKIPPED' END,
              ?4, ?4, ?4,
              CASE WHEN t.taken THEN NULL ELSE ?4 END
       FROM executions e,
            (SELECT EXISTS (
               SELECT 1 FROM steps p, json_each(p.next_vertices) j
               WHERE p.execution_id = ?1 AND p.state = 'COMPLETED'
                 AND p.vertex_id IN (SELECT value FROM json_each(?3)) AND j.value = ?2) AS taken) t
       WHERE e.id = ?1
         AND (SELECT count(*) FROM steps p
              WHERE p.execution_id = ?1 AND p.state IN ('COMPLETED', 'SKIPPED')
                AND p.vertex_id IN (SELECT value FROM json_each(?3))) = ?5
       ON CONFLICT (execution_id, vertex_id) DO NOTHING
       RETURNING vertex_id, state`,
    )
    .bind(executionId, d.vertexId, JSON.stringify(d.predecessors), now, d.predecessors.length);
}

/**
 * `finishExecution`: RUNNING → COMPLETED | FAILED once nothing is dispatched or executing.
 * Derived from the step rows, so whichever settle batch commits last finishes the execution.
 */
export function finishExecution(db: D1Database, executionId: string, now: number): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE executions
         SET status = CASE WHEN EXISTS (SELECT 1 FROM steps WHERE execution_id = ?1 AND state = 'FAILED') THEN 'FAILED' ELSE 'COMPLETED' END,
             finished_at = ?2, updated_at = ?2
       WHERE id = ?1 AND status = 'RUNNING'
         AND NOT EXISTS (SELECT 1 FROM steps WHERE execution_id = ?1 AND state IN ('DISPATCHED', 'EXECUTING'))
       RETURNING status`,
    )
    .bind(executionId, now);
}

/** The settle-and-dispatch batch's statements (exposed for the budget tests). */
export function settleStatements(db: D1Database, input: SettleInput): D1PreparedStatement[] {
  const { fence, now } = input;
  const statements = [
    recordFencedOut(db, fence, now, `late ${input.outcome.state.toLowerCase()} rejected: the step was taken over or re-dispatched`),
    settleStep(db, input),
  ];
  if (input.outcome.state === "COMPLETED") {
    for (const b of input.backfill) statements.push(backfillNextVertices(db, fence.executionId, b.vertexId, b.nextVertices));
    for (const d of input.descendants) statements.push(decideStep(db, fence.executionId, d, now));
  }
  statements.push(finishExecution(db, fence.executionId, now));
  return statements;
}

/**
 * Settle and dispatch: ONE batch (one transaction, one round trip). The caller sends the queue
 * messages for `dispatched` after this returns, never before the commit.
 */
export async function settleAndDispatch(db: D1Database, input: SettleInput): Promise<SettleResult> {
  const results = await db.batch(settleStatements(db, input));
  const settled = (results[1]?.results ?? []).length > 0;
  const dispatched: string[] = [];
  const skipped: string[] = [];
  for (const r of results.slice(2, -1)) {
    for (const row of (r.results ?? []) as Array<{ vertex_id?: string; state?: string }>) {
      if (row.state === "DISPATCHED" && row.vertex_id) dispatched.push(row.vertex_id);
      if (row.state === "SKIPPED" && row.vertex_id) skipped.push(row.vertex_id);
    }
  }
  const finished = ((results.at(-1)?.results ?? []) as Array<{ status: "COMPLETED" | "FAILED" }>)[0];
  return { settled, dispatched, skipped, executionStatus: finished?.status ?? null };
}

/**
 * `scheduleRetry`: EXECUTING (fenced) → DISPATCHED, due at `availableAt` — the retry-waiting
 * state. One batch: fenced-out record, the attempt's failure as an event, the transition.
 *
 * `uncounted`: this attempt does not count against the retry budget or the crash allowance (the
 * destination said "in progress"): `retry_base` moves up with `attempt`, so `attempt - retry_base`
 * — the claims the budgets count — stays where it was.
 */
export async function scheduleRetry(
  db: D1Database,
  fence: Fence,
  r: { now: number; availableAt: number; error: string; request: string | null; output: string | null; uncounted?: boolean },
): Promise<boolean> {
  const results = await db.batch([
    recordFencedOut(db, fence, r.now, "late retry rejected: the step was taken over or re-dispatched"),
    recordFencedEvent(db, fence, r.now, "attempt_failed", r.error),
    db
      .prepare(
        `UPDATE steps
           SET state = 'DISPATCHED', available_at = ?5, lease_until = NULL, error = ?6,
               request = coalesce(?7, request), output = ?8, retry_base = retry_base + ?9, updated_at = ?4
         WHERE ${STEP_FENCE}
         RETURNING vertex_id`,
      )
      .bind(...fenceParams(fence), r.now, r.availableAt, r.error, r.request, r.output, r.uncounted ? 1 : 0),
  ]);
  return (results[2]?.results ?? []).length > 0;
}

// ---------------------------------------------------------------------------------------------
// Reaper

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
 * `available_at` is left alone (the step stays claimable). RETURNING what to re-send.
 */
export async function redispatchOverdue(
  db: D1Database,
  now: number,
  overdueMs: number,
  limit: number,
  maxWaitMs: number = DEFAULT_MAX_RESEND_WAIT_MS,
): Promise<StepRef[]> {
  const due = `SELECT id FROM (
      SELECT * FROM (SELECT rowid AS id, available_at + ?2 AS due FROM steps
                     WHERE state = 'DISPATCHED' AND next_resend_at IS NULL AND available_at <= ?1 - ?2
                     ORDER BY available_at LIMIT ?3)
      UNION ALL
      SELECT * FROM (SELECT rowid AS id, next_resend_at AS due FROM steps
                     WHERE state = 'DISPATCHED' AND next_resend_at IS NOT NULL AND next_resend_at <= ?1
                     ORDER BY next_resend_at LIMIT ?3)
    ) ORDER BY due LIMIT ?3`;
  const { results } = await db
    .prepare(
      `UPDATE steps
         SET resends = resends + 1, next_resend_at = ?1 + min(?2 << min(resends + 1, 30), ?4), updated_at = ?1
       WHERE rowid IN (${due}) AND state = 'DISPATCHED'
       RETURNING execution_id, vertex_id`,
    )
    .bind(now, overdueMs, limit, maxWaitMs)
    .all<{ execution_id: string; vertex_id: string }>();
  return results.map((r) => ({ executionId: r.execution_id, vertexId: r.vertex_id }));
}

/**
 * `redispatchExpiredLeases`: EXECUTING steps whose lease expired (their worker is presumed dead)
 * go back to DISPATCHED, due now. Leaving EXECUTING fences the old worker out (its epoch stays,
 * but the state no longer matches). One batch: the events, then the bounded transition.
 */
export async function redispatchExpiredLeases(db: D1Database, now: number, limit: number): Promise<StepRef[]> {
  const expired = `SELECT rowid FROM steps WHERE state = 'EXECUTING' AND lease_until <= ?1 ORDER BY lease_until LIMIT ?2`;
  const [, moved] = await db.batch([
    db
      .prepare(
        `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
         SELECT execution_id, vertex_id, 'lease_expired', epoch, ?1, 're-dispatched by the reaper'
         FROM steps WHERE rowid IN (${expired})`,
      )
      .bind(now, limit),
    db
      .prepare(
        `UPDATE steps SET state = 'DISPATCHED', lease_until = NULL, available_at = ?1, updated_at = ?1
         WHERE rowid IN (${expired}) AND state = 'EXECUTING'
         RETURNING execution_id, vertex_id`,
      )
      .bind(now, limit),
  ]);
  return ((moved?.results ?? []) as Array<{ execution_id: string; vertex_id: string }>).map((r) => ({
    executionId: r.execution_id,
    vertexId: r.vertex_id,
  }));
}

// ---------------------------------------------------------------------------------------------
// Operator retry

export type OperatorRetryResult = { retried: true } | { retried: false; state: StepState | null };

/**
 * `retryFailedStep`: FAILED → DISPATCHED (operator action), in the caller's workspace only. The
 * persisted destination key stays on the row, so the retry sends it again; the attempt counter
 * continues and `retry_base` restarts the retry budget. The execution goes back to RUNNING in the
 * same batch. Zero rows: not found in this workspace, or not FAILED (state tells which). The
 * event quotes at most 10,000 characters of the error: a value built in SQL must stay under what
 * D1 stores (2,000,000 bytes) whatever the error held.
 */
export async function retryFailedStep(db: D1Database, workspace: string, ref: StepRef, now: number): Promise<OperatorRetryResult> {
  const failed = `execution_id = ?1 AND vertex_id = ?2 AND workspace = ?3 AND state = 'FAILED'`;
  const [, updated, , current] = await db.batch([
    db
      .prepare(
        `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
         SELECT execution_id, vertex_id, 'operator_retry', epoch, ?4, 'previous error: ' || substr(coalesce(error, ''), 1, 10000)
         FROM steps WHERE ${failed}`,
      )
      .bind(ref.executionId, ref.vertexId, workspace, now),
    db
      .prepare(
        `UPDATE steps
           SET state = 'DISPATCHED', available_at = ?4, finished_at = NULL, error = NULL, retry_base = attempt, updated_at = ?4
         WHERE ${failed}
         RETURNING vertex_id`,
      )
      .bind(ref.executionId, ref.vertexId, workspace, now),
    db
      .prepare(
        `UPDATE executions SET status = 'RUNNING', finished_at = NULL, updated_at = ?3
         WHERE id = ?1 AND workspace = ?2 AND status <> 'RUNNING'
           AND EXISTS (SELECT 1 FROM steps WHERE execution_id = ?1 AND state = 'DISPATCHED')`,
      )
      .bind(ref.executionId, workspace, now),
    db
      .prepare(`SELECT state FROM steps WHERE execution_id = ?1 AND vertex_id = ?2 AND workspace = ?3`)
      .bind(ref.executionId, ref.vertexId, workspace),
  ]);
  if ((updated?.results ?? []).length > 0) return { retried: true };
  const row = ((current?.results ?? []) as Array<{ state: StepState }>)[0];
  return { retried: false, state: row?.state ?? null };
}

// ---------------------------------------------------------------------------------------------
// Dead letters

/**
 * `recordDeadLetter`: a message that reached the DLQ. The `dead_letters` row is always kept (with
 * the step's state at that moment, for operators). The step gets ONE event, chosen by SQL from its
 * state, so a dead letter never reads as a failure of a step that is fine:
 * - settled (COMPLETED, SKIPPED, FAILED) or waiting (live lease, not due yet): the message was
 *   redundant — `redelivery_dropped`, detail "harmless" and why;
 * - otherwise (DISPATCHED and due, or EXECUTING under an expired lease) the step still needs a
 *   run — `dead_lettered`; the reaper re-sends it.
 * Binds ?1 execution id, ?2 vertex id, ?3 now, ?4 the message's description.
 */
export function recordDeadLetter(
  db: D1Database,
  m: { queue: string; messageId: string; body: string; attempts: number; step: StepRef | null },
  now: number,
): D1PreparedStatement[] {
  const statements = [
    db
      .prepare(
        `INSERT INTO dead_letters (queue, message_id, body, attempts, at, step_state)
         VALUES (?1, ?2, ?3, ?4, ?5, (SELECT state FROM steps WHERE execution_id = ?6 AND vertex_id = ?7))`,
      )
      .bind(m.queue, m.messageId, m.body, m.attempts, now, m.step?.executionId ?? null, m.step?.vertexId ?? null),
  ];
  if (m.step) {
    const settled = "state IN ('COMPLETED', 'SKIPPED', 'FAILED')";
    statements.push(
      db
        .prepare(
          `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
           SELECT execution_id, vertex_id,
                  CASE WHEN ${settled} OR ${WAITING} THEN 'redelivery_dropped' ELSE 'dead_lettered' END,
                  epoch, ?3,
                  ?4 || CASE
                    WHEN ${settled} THEN '; harmless: the step is already ' || state || ', the message had nothing left to run'
                    WHEN ${WAITING} THEN '; harmless: ' || ${WAITING_DETAIL}
                    ELSE '; the step still needs a run: the reaper re-sends it' END
           FROM steps WHERE execution_id = ?1 AND vertex_id = ?2`,
        )
        .bind(m.step.executionId, m.step.vertexId, now, `message ${m.messageId} reached ${m.queue} after ${m.attempts} attempts`),
    );
  }
  return statements;
}

// ---------------------------------------------------------------------------------------------
// Reads for the API

export interface ExecutionRow {
  id: string;
  workspace: string;
  workflow_id: string;
  version: string;
  entry_vertex_id: string;
  trigger_kind: string;
  identity_kind: string;
  status: "RUNNING" | "COMPLETED" | "FAILED";
  payload: string;
  duplicate_deliveries: number;
  last_duplicate_at: number | null;
  started_over_from: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

export interface StepRow {
  vertex_id: string;
  state: StepState;
  epoch: number;
  attempt: number;
  available_at: number;
  lease_until: number | null;
  idempotency_key: string | null;
  request: string | null;
  output: string | null;
  next_vertices: string | null;
  error: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
  /** Re-sends of this step's message by the reaper; the next is not due before `next_resend_at`. */
  resends: number;
  next_resend_at: number | null;
}

export interface StepEventRow {
  vertex_id: string;
  type: StepEventType;
  epoch: number | null;
  at: number;
  detail: string | null;
}

/** The execution (in this workspace), its steps and their events: one round trip. */
export async function readTraceRows(
  db: D1Database,
  workspace: string,
  executionId: string,
): Promise<{ execution: ExecutionRow; steps: StepRow[]; events: StepEventRow[] } | null> {
  const [execution, steps, events] = await db.batch([
    db.prepare(`SELECT * FROM executions WHERE id = ?1 AND workspace = ?2`).bind(executionId, workspace),
    db
      .prepare(
        `SELECT vertex_id, state, epoch, attempt, available_at, lease_until, idempotency_key, request, output, next_vertices,
                error, created_at, updated_at, finished_at, resends, next_resend_at
         FROM steps WHERE execution_id = ?1 AND workspace = ?2 ORDER BY created_at, rowid`,
      )
      .bind(executionId, workspace),
    db
      .prepare(
        `SELECT ev.vertex_id, ev.type, ev.epoch, ev.at, ev.detail FROM step_events ev
         WHERE ev.execution_id = ?1 AND EXISTS (SELECT 1 FROM executions e WHERE e.id = ?1 AND e.workspace = ?2)
         ORDER BY ev.id`,
      )
      .bind(executionId, workspace),
  ]);
  const head = ((execution?.results ?? []) as ExecutionRow[])[0];
  if (!head) return null;
  return { execution: head, steps: (steps?.results ?? []) as StepRow[], events: (events?.results ?? []) as StepEventRow[] };
}

export interface ExecutionListFilter {
  workflowId?: string;
  status?: "RUNNING" | "COMPLETED" | "FAILED";
  /** Keyset cursor: strictly older than (createdAt, id). */
  before?: { createdAt: number; id: string };
  limit: number;
}

/** Executions of a workspace, newest first, keyset-paginated on (created_at, id). */
export async function listExecutionRows(db: D1Database, workspace: string, f: ExecutionListFilter): Promise<ExecutionRow[]> {
  const { results } = await db
    .prepare(
      `SELECT * FROM executions
       WHERE workspace = ?1
         AND (?2 IS NULL OR workflow_id = ?2)
         AND (?3 IS NULL OR status = ?3)
         AND (?4 IS NULL OR created_at < ?4 OR (created_at = ?4 AND id < ?5))
       ORDER BY created_at DESC, id DESC
       LIMIT ?6`,
    )
    .bind(workspace, f.workflowId ?? null, f.status ?? null, f.before?.createdAt ?? null, f.before?.id ?? null, f.limit)
    .all<ExecutionRow>();
  return results;
}

/** One execution of a workspace (with its payload), or null. */
export async function readExecutionRow(db: D1Database, workspace: string, executionId: string): Promise<ExecutionRow | null> {
  return db.prepare(`SELECT * FROM executions WHERE id = ?1 AND workspace = ?2`).bind(executionId, workspace).first<ExecutionRow>();
}
