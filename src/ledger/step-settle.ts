/**
 * Settle and dispatch: the one batch that ends a step's attempt COMPLETED or FAILED and, in the
 * same transaction, records its edges, makes every descendant's fan-in decision (a chained
 * successor inserted claimed: ./chain-claim.ts) and finishes the execution when nothing is left
 * running. The caller sends the queue messages for what it dispatched after the commit.
 *
 * Binds as every worker statement: ?1 execution id, ?2 vertex id, ?3 epoch, ?4 now, then the rest.
 */
import { entryAsPredecessor } from "./entry-step";
import { countAttemptEnd, isReplayed } from "./execution-counters";
import {
  completedOnStepParams,
  completedOnStepSet,
  finishAttempt,
  latestAttemptSeq,
  STEP_EVENT_MARK,
  type AttemptEnd,
  type AttemptResponse,
} from "./attempts";
import { LabelledBatch } from "./batch";
import { CHAINED_CLAIM_COLUMNS, MAX_CHAIN_CANDIDATES, type ChainedClaim, type ChainOffer } from "./chain-claim";
import { recordFencedOut } from "./step-events";
import { fenceParams, STEP_FENCE, type Fence } from "./step-sql";

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
  /** The response's headers and body are the output's own (a Gateway's answer): not stored twice (./attempts.ts). */
  responseInOutput?: boolean;
  /**
   * COMPLETED steps whose taken edges were not recorded (an entry row written by ingress before
   * its edges were: only executions from before migrations/0045 have an entry row at all):
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
  /**
   * A TRANSFORM successor the worker already evaluated (src/steps/inline-transform.ts): inserted
   * COMPLETED by its decision when this settle holds its fence and the execution has no FAILED step
   * — its output, edges and its one attempt on its row — else decided as any successor.
   */
  inline?: InlineCompletion | null;
}

/** A successor completed in its predecessor's settle: its output (JSON) and its taken edges. */
export interface InlineCompletion {
  vertexId: string;
  output: string;
  nextVertices: string[];
}

export interface SettleResult {
  /** False: the fence did not hold; nothing of this worker's was written (a fenced_out event was). */
  settled: boolean;
  /** Steps this batch inserted as DISPATCHED and did not claim: send one message each, after the commit. */
  dispatched: string[];
  /** The successor this batch claimed for the caller to run (`SettleInput.chain`), if any. */
  chained: ChainedClaim | null;
  /** True: `SettleInput.inline` was inserted COMPLETED. */
  inlined: boolean;
  skipped: string[];
  /** The execution's new status, if this batch finished it — or started its compensation (COMPENSATING: send the undo's message). */
  executionStatus: "COMPLETED" | "FAILED" | "COMPENSATING" | null;
}

/** `settleStep`: EXECUTING (fenced) → COMPLETED | FAILED, with output, error and next vertices. */
function settleStep(db: D1Database, input: SettleInput): D1PreparedStatement {
  const o = input.outcome;
  // COMPLETED: the attempt is recorded on the step row itself (./attempts.ts completedOnStepSet).
  const completed = o.state === "COMPLETED";
  return db
    .prepare(
      `UPDATE steps
         SET state = ?5, output = ?6, error = ?7, next_vertices = ?8, request = coalesce(?9, request),
             lease_until = NULL, finished_at = ?4, updated_at = ?4${completed ? `, ${completedOnStepSet(10, 9)}` : ""}
       WHERE ${STEP_FENCE}
       RETURNING vertex_id`,
    )
    .bind(
      ...fenceParams(input.fence),
      input.now,
      o.state,
      o.output,
      o.state === "FAILED" ? o.error : null,
      completed ? JSON.stringify(o.nextVertices) : null,
      input.request,
      ...(completed ? completedOnStepParams(input.request, input.response ?? null, input.responseInOutput === true) : []),
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

/** The entry as a predecessor of the decision, when it has no row (migrations/0045): its edges are `executions.entry_next`. */
const ENTRY = entryAsPredecessor("?1", "?3", "?2");

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
 * lease, the row a claim would leave (its attempt has no row until it ends: migrations/0040,
 * ./attempts.ts) — while the batch's own settle held its fence (the
 * settled step is COMPLETED under its epoch, finished now) and no earlier decision of this batch
 * already took the claim (one chained step per settle). Only a row inserted now is ever claimed
 * this way: a fresh step, never attempted, with no key, sends or attempts on record.
 * The fence condition is defence in depth, not a reachable branch: a row is inserted only by the
 * batch that settles its last predecessor, and a fenced-out batch settles nothing (every COMPLETED
 * settle decides all its descendants in its own transaction), so a stale worker's decision always
 * finds the row on record. Planting its removal turns no test red, for that reason
 * (test/ledger/chain-claim.test.ts shows the stale twin claiming nothing).
 *
 * With `inline` (a TRANSFORM the worker evaluated: src/steps/inline-transform.ts), a DISPATCHED
 * decision is inserted COMPLETED instead, under the same fence and FAILED conditions as a claim (not
 * the one-claim one: it holds no claim): epoch and attempt 1, its output and taken edges, finished
 * now, and its attempt on the row (`att_seq`, `att_mark`: numbered after the settle's own, which
 * this batch wrote first). Later decisions of the batch read its edges, so its successors are
 * decided (and one of them claimed) in the same transaction.
 * Binds ?1 execution id, ?2 vertex id, ?3 predecessors, ?4 now, ?5 their count, ?6 the lease ms
 * or NULL (no claim), ?7 the settled vertex, ?8 its epoch, ?9 the inline output or NULL (not
 * inline), ?10 its taken edges.
 */
function decideStep(
  db: D1Database,
  settled: Fence,
  d: DescendantPlan,
  now: number,
  claim: { leaseMs: number } | null,
  inline: InlineCompletion | null,
): D1PreparedStatement {
  return db
    .prepare(
      `INSERT INTO steps (execution_id, vertex_id, workspace, state, epoch, attempt, available_at, lease_until,
                          created_at, created_seq, updated_at, finished_at, output, next_vertices, att_seq, att_mark)
       SELECT e.id, ?2, e.workspace, k.state,
              k.state IN ('EXECUTING', 'COMPLETED'), k.state IN ('EXECUTING', 'COMPLETED'), ?4,
              CASE WHEN k.state = 'EXECUTING' THEN ?4 + ?6 END,
              ?4, (SELECT coalesce(max(q.created_seq), -1) + 1 FROM steps q WHERE q.execution_id = ?1), ?4,
              CASE WHEN k.state IN ('SKIPPED', 'COMPLETED') THEN ?4 END,
              CASE WHEN k.state = 'COMPLETED' THEN ?9 END, CASE WHEN k.state = 'COMPLETED' THEN ?10 END,
              CASE WHEN k.state = 'COMPLETED' THEN ${latestAttemptSeq("?1")} + 1 END,
              CASE WHEN k.state = 'COMPLETED' THEN ${STEP_EVENT_MARK} END
       FROM executions e,
            (SELECT CASE WHEN NOT t.taken THEN 'SKIPPED' WHEN c.inline THEN 'COMPLETED' WHEN c.claim THEN 'EXECUTING'
                         ELSE 'DISPATCHED' END AS state
             FROM (SELECT EXISTS (
                     SELECT 1 FROM steps p, json_each(p.next_vertices) j
                     WHERE p.execution_id = ?1 AND p.state = 'COMPLETED'
                       AND p.vertex_id IN (SELECT value FROM json_each(?3)) AND j.value = ?2)
                     OR ${ENTRY.takes} AS taken) t,
                  (SELECT h.held AND ?9 IS NOT NULL AS inline,
                          h.held AND ?6 IS NOT NULL
                            AND NOT EXISTS (SELECT 1 FROM steps n WHERE n.execution_id = ?1 AND n.state = 'EXECUTING'
                                              AND n.epoch = 1 AND n.attempt = 1 AND n.created_at = ?4 AND n.updated_at = ?4) AS claim
                   FROM (SELECT EXISTS (SELECT 1 FROM steps g WHERE g.execution_id = ?1 AND g.vertex_id = ?7 AND g.epoch = ?8
                                          AND g.state = 'COMPLETED' AND g.finished_at = ?4)
                                -- Not in an execution that failed for good: its successors go DISPATCHED, so a wait among them is
                                -- cancelled as it is inserted when there is something to compensate (migrations/0034), not run inline.
                                AND NOT EXISTS (SELECT 1 FROM steps f WHERE f.execution_id = ?1 AND f.state = 'FAILED') AS held) h) c) k
       WHERE e.id = ?1
         AND (SELECT count(*) FROM steps p
              WHERE p.execution_id = ?1 AND p.state IN ('COMPLETED', 'SKIPPED')
                AND p.vertex_id IN (SELECT value FROM json_each(?3))) + ${ENTRY.count} = ?5
       ON CONFLICT (execution_id, vertex_id) DO NOTHING
       RETURNING ${DECIDED}`,
    )
    .bind(
      settled.executionId,
      d.vertexId,
      JSON.stringify(d.predecessors),
      now,
      d.predecessors.length,
      claim?.leaseMs ?? null,
      settled.vertexId,
      settled.epoch,
      inline?.output ?? null,
      inline ? JSON.stringify(inline.nextVertices) : null,
    );
}

/** What a decision returns: the state it decided, and for a step inserted claimed, the claim. */
interface Decided extends Omit<ChainedClaim, "keySendsJson"> {
  state: "DISPATCHED" | "SKIPPED" | "EXECUTING" | "COMPLETED";
}

const DECIDED = `${CHAINED_CLAIM_COLUMNS}, state`;

/**
 * `finishExecution`: RUNNING → COMPLETED | FAILED | COMPENSATING once nothing is dispatched or
 * executing. Derived from the step rows, so whichever settle batch commits last finishes the
 * execution — and decides its compensation once (docs/steps.md "Compensation"): a FAILED step and
 * a COMPLETED step whose vertex declares `compensate` (`UNDOABLE`) → COMPENSATING, no finish yet;
 * the move fires `executions_compensation_starts` (migrations/0031), which inserts the undo steps.
 */
function finishExecution(db: D1Database, executionId: string, now: number): D1PreparedStatement {
  const failed = `EXISTS (SELECT 1 FROM steps WHERE execution_id = ?1 AND state = 'FAILED')`;
  const compensating = `(${failed} AND ${UNDOABLE})`;
  return db
    .prepare(
      `UPDATE executions
         SET status = iif(${failed}, iif(${UNDOABLE}, 'COMPENSATING', 'FAILED'), 'COMPLETED'),
             finished_at = iif(${compensating}, NULL, ?2), updated_at = ?2
       WHERE id = ?1 AND status = 'RUNNING'
         AND NOT EXISTS (SELECT 1 FROM steps WHERE execution_id = ?1 AND state IN ('DISPATCHED', 'EXECUTING'))
       RETURNING status`,
    )
    .bind(executionId, now);
}

/**
 * The vertex ids of the execution's pinned definition that declare `compensate` (inside an UPDATE of
 * `executions`: its row's workspace, workflow and version). The same set as the trigger
 * `executions_compensation_starts` reads (migrations/0031).
 */
export const COMPENSABLE_VERTICES = `(SELECT json_extract(j.value, '$.id') FROM workflow_versions v, json_each(v.definition, '$.vertices') j
   WHERE v.workspace = executions.workspace AND v.workflow_id = executions.workflow_id AND v.version = executions.version
     AND json_extract(j.value, '$.type') = 'GATEWAY' AND json_type(j.value, '$.config.compensate') = 'object')`;

/** The MAP vertices of the pinned definition whose item step declares `compensate` (as `COMPENSABLE_VERTICES`). */
export const COMPENSABLE_MAPS = `(SELECT json_extract(j.value, '$.id') FROM workflow_versions v, json_each(v.definition, '$.vertices') j
   WHERE v.workspace = executions.workspace AND v.workflow_id = executions.workflow_id AND v.version = executions.version
     AND json_extract(j.value, '$.type') = 'MAP' AND json_type(j.value, '$.config.step.config.compensate') = 'object')`;

/** A COMPLETED step of execution ?1, or a COMPLETED item of one of its MAPs, has an undo to run. */
export const UNDOABLE = `(EXISTS (SELECT 1 FROM steps c
  WHERE c.execution_id = ?1 AND c.state = 'COMPLETED' AND c.vertex_id IN ${COMPENSABLE_VERTICES})
  OR EXISTS (SELECT 1 FROM work_items mc
  WHERE mc.execution_id = ?1 AND mc.kind = 'map_item' AND mc.state = 'COMPLETED' AND mc.vertex_id IN ${COMPENSABLE_MAPS}))`;

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
    // COMPLETED: the attempt goes on the step row (`settleStep`); a row is written only to close a
    // `running` row opened before migrations/0040.
    .add("attempt", finishAttempt(db, fence, now, attempt, undefined, o.state === "COMPLETED" ? "closing a running row" : "any"))
    .add("settle", settleStep(db, input));
  if (input.outcome.state === "COMPLETED") {
    for (const b of input.backfill) batch.add("backfill", backfillNextVertices(db, fence.executionId, b.vertexId, b.nextVertices));
    // The chain's candidates are claimed at their insert (`decideStep`): the first one this batch
    // decides DISPATCHED, in the order the decisions run (a fan-in's order: skips propagate).
    const candidates = new Set(input.chain?.candidates.slice(0, MAX_CHAIN_CANDIDATES) ?? []);
    for (const d of input.descendants) {
      const claim = input.chain && candidates.has(d.vertexId) ? { leaseMs: input.chain.leaseMs } : null;
      const inline = input.inline?.vertexId === d.vertexId ? input.inline : null;
      batch.add("decide", decideStep(db, fence, d, now, claim, inline));
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
    inlined: decided.some((row) => row.state === "COMPLETED"),
    dispatched: decided.filter((row) => row.state === "DISPATCHED").map((row) => row.vertexId),
    skipped: decided.filter((row) => row.state === "SKIPPED").map((row) => row.vertexId),
    executionStatus: results.first<{ status: "COMPLETED" | "FAILED" | "COMPENSATING" }>("finish")?.status ?? null,
  };
}
