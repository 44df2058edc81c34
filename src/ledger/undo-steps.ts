/**
 * A compensation's undo steps (SPEC section 18, docs/steps.md "Compensation"; migrations/0031): the
 * rows of `work_items` of kind `undo`, inserted by the trigger `executions_compensation_starts` when
 * the settle that ends the execution decides COMPENSATING. Claimed, fenced, leased and retried by
 * the step's own statements over the item row source (./work-rows.ts `ITEM_ROWS`), named by their
 * row key `<vertex>#undo#<place>`; run one at a time in `item_index` (place) order. Only the settle
 * is their own: the next undo started, the execution COMPENSATED or COMPENSATION_FAILED, the undone
 * step's key burnt.
 *
 * Binds as every worker statement: ?1 execution id, ?2 the row key, ?3 epoch (the fence) or now (a claim).
 */
import { sealedSecretsColumn } from "../secrets/store";
import { finishAttempt, markLostAttempts, trimAttempts, type AttemptEnd, type AttemptResponse } from "./attempts";
import { LabelledBatch } from "./batch";
import { selectList } from "./columns";
import { countAttemptEnd, countClaim, isReplayed } from "./execution-counters";
import type { ExecutionStatus } from "./execution-types";
import { keySendsColumn } from "./key-sends";
import { claimStep, IN_PROGRESS_SINCE, recordLeaseExpiry, recordRedeliveryDropped, type ClaimedStep } from "./step-claim";
import { recordFencedOut } from "./step-events";
import { readStepInputs, toStepInputs, type StepInputs, type StepInputsBound, type StepInputsRow } from "./step-inputs";
import { fenceParams, type Fence, type StepRef } from "./step-sql";
import { fenceOn, ITEM_ROWS } from "./work-rows";

/** One undo step: what its queue message names (src/steps/messages.ts `undo`). */
export interface UndoRef {
  executionId: string;
  /** The step it undoes. */
  vertexId: string;
  /** Its place in the compensation's order (0 runs first). */
  place: number;
}

export interface UndoFence extends UndoRef {
  epoch: number;
}

/** The row key of an undo step: `<vertex>#undo#<place>`. */
export const undoRowKey = (vertexId: string, place: number): string => `${vertexId}#undo#${place}`;
const undoKeyRef = (r: UndoRef): StepRef => ({ executionId: r.executionId, vertexId: undoRowKey(r.vertexId, r.place) });
export const undoKeyFence = (f: UndoFence): Fence => ({ ...undoKeyRef(f), epoch: f.epoch });

export type UndoState = "PENDING" | "DISPATCHED" | "EXECUTING" | "COMPLETED" | "FAILED" | "CANCELLED";

/** The undo, its execution, the pinned definition and the step it undoes: what the runner needs, and why a claim missed. */
export interface UndoRun {
  executionId: string;
  workspace: string;
  workflowId: string;
  version: string;
  entryVertexId: string;
  triggerKind: string;
  startedOverFrom: string | null;
  executionStatus: ExecutionStatus;
  definitionJson: string;
  undoState: UndoState | null;
  leaseUntil: number | null;
  availableAt: number | null;
  inProgressSince: number | null;
  sealedSecretsJson: string | null;
  keySendsJson: string | null;
  undoCreatedAt: number | null;
  /** The undone step's output (JSON): `output` in the undo's expressions — a MAP item's own, for an item's undo. */
  stepOutputJson: string | null;
  /** The key the undone step (or item) sent: an undo key equal to it fails before sending. */
  stepKey: string | null;
  /** For the undo of a MAP's item: its index in the list, and its persisted value (JSON). */
  undoItem: number | null;
  itemJson: string | null;
}

const UNDO_RUN = selectList<UndoRun>({
  executionId: "e.id",
  workspace: "e.workspace",
  workflowId: "e.workflow_id",
  version: "e.version",
  entryVertexId: "e.entry_vertex_id",
  triggerKind: "e.trigger_kind",
  startedOverFrom: "e.started_over_from",
  executionStatus: "e.status",
  definitionJson: "v.definition",
  undoState: "w.state",
  leaseUntil: "w.lease_until",
  availableAt: "w.available_at",
  inProgressSince: IN_PROGRESS_SINCE,
  sealedSecretsJson: sealedSecretsColumn("e.workspace", "v.definition"),
  keySendsJson: keySendsColumn("w"),
  undoCreatedAt: "w.created_at",
  stepOutputJson: "iif(mi.row_key IS NULL, s.output, mi.output)",
  stepKey: "iif(mi.row_key IS NULL, s.idempotency_key, mi.idempotency_key)",
  undoItem: "mi.item_index",
  itemJson: "mi.item",
});

export interface UndoClaimResult {
  claimed: ClaimedStep | null;
  run: UndoRun | null;
  /** What the undone step could read (its inputs), when this batch claimed the undo. */
  inputs: StepInputs | null;
}

/**
 * `claimUndoAndLoad`: the step's claim batch over the undo row — lease-expiry record,
 * [redelivery-dropped record], counters, `claimStep`, the attempts (a `running` row from before
 * migrations/0041 marked lost, the newest 20 kept — the claimed attempt has no row until it ends:
 * ./attempts.ts), the run (execution, definition, the undone step's output and key,
 * the undo key's sends) and the undone step's inputs read under the undo's claim. One round trip.
 */
export async function claimUndoAndLoad(
  db: D1Database,
  ref: UndoRef,
  now: number,
  leaseMs: number,
  options: { message?: string; dropIfWaiting?: boolean; inputs: StepInputsBound },
): Promise<UndoClaimResult> {
  const key = undoKeyRef(ref);
  const drop = options.dropIfWaiting === true;
  const results = await new LabelledBatch<"leaseExpired" | "redeliveryDropped" | "counters" | "claim" | "attempts" | "run" | "inputs">(db)
    .add("leaseExpired", recordLeaseExpiry(db, key, now, ITEM_ROWS))
    .add("redeliveryDropped", recordRedeliveryDropped(db, key, now, options.message ?? "a message", drop, ITEM_ROWS))
    .add("counters", countClaim(db, key, now, drop, ITEM_ROWS))
    .add("claim", claimStep(db, key, now, leaseMs, ITEM_ROWS))
    .add("attempts", markLostAttempts(db, key, ITEM_ROWS))
    .add("attempts", trimAttempts(db, key, ITEM_ROWS))
    .add(
      "run",
      db
        .prepare(
          `SELECT ${UNDO_RUN}
           FROM executions e
           JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version
           LEFT JOIN work_items w ON w.execution_id = e.id AND w.row_key = ?2 AND w.kind = 'undo'
           LEFT JOIN steps s ON s.execution_id = e.id AND s.vertex_id = ?3
           LEFT JOIN work_items mi ON mi.execution_id = e.id AND mi.row_key = ?3 || '#' || json_extract(w.item, '$.item')
                                  AND mi.kind = 'map_item'
           WHERE e.id = ?1`,
        )
        .bind(key.executionId, key.vertexId, ref.vertexId),
    )
    .add(
      "inputs",
      readStepInputs(db, { executionId: ref.executionId, vertexId: ref.vertexId }, now, options.inputs, {
        rows: ITEM_ROWS,
        key: key.vertexId,
      }),
    )
    .run();
  const inputs = results.first<StepInputsRow>("inputs");
  return { claimed: results.first<ClaimedStep>("claim"), run: results.first<UndoRun>("run"), inputs: inputs ? toStepInputs(inputs) : null };
}

export type UndoSettleOutcome = { state: "COMPLETED"; output: string } | { state: "FAILED"; error: string; output: string | null };

export interface UndoSettleResult {
  /** False: fenced out; a fenced_out event was recorded and nothing else changed. */
  settled: boolean;
  /** The next undo this batch started (DISPATCHED: send its message after the commit). */
  next: UndoRef | null;
  /** The execution's status, if this batch ended the compensation. */
  executionStatus: "COMPENSATED" | "COMPENSATION_FAILED" | null;
}

/**
 * `settleUndo`: ONE batch — the fenced-out record, the counters, the attempt's end, the undo
 * settled (fenced), then only if that settle held (`held`): a COMPLETED undo burns the key of the
 * step it undid (`burnt_keys`: any later send of it in the workspace fails before sending) and
 * starts the next PENDING undo (lowest place: one at a time) while the execution is COMPENSATING;
 * the execution ends COMPENSATED when no undo is left unsettled, or COMPENSATION_FAILED at once when
 * this undo FAILED (the undo steps after it stay PENDING, never sent).
 * Binds ?1 execution id, ?2 row key, ?3 epoch, ?4 now, ?5 state, then per statement.
 */
export async function settleUndo(
  db: D1Database,
  input: { fence: UndoFence; now: number; outcome: UndoSettleOutcome; request: string | null; response?: AttemptResponse | null },
): Promise<UndoSettleResult> {
  const fence = undoKeyFence(input.fence);
  const { now } = input;
  const o = input.outcome;
  const end: AttemptEnd = {
    outcome: o.state === "COMPLETED" ? "completed" : "failed",
    request: input.request,
    response: input.response ?? null,
    error: o.state === "FAILED" ? o.error : null,
    delay: null,
  };
  const held = `EXISTS (SELECT 1 FROM work_items h WHERE h.execution_id = ?1 AND h.row_key = ?2 AND h.epoch = ?3
                  AND h.state = ?5 AND h.finished_at = ?4)`;
  const base = [...fenceParams(fence), now, o.state] as const;
  const results = await new LabelledBatch<"fencedOut" | "counters" | "attempt" | "settle" | "burn" | "next" | "finish">(db)
    .add(
      "fencedOut",
      recordFencedOut(db, fence, now, `late ${o.state.toLowerCase()} of an undo step rejected: it was taken over`, ITEM_ROWS),
    )
    .add("counters", countAttemptEnd(db, fence, isReplayed(input.response?.headers), ITEM_ROWS))
    .add("attempt", finishAttempt(db, fence, now, end, ITEM_ROWS))
    .add(
      "settle",
      db
        .prepare(
          `UPDATE work_items
             SET state = ?5, output = ?6, collected = iif(?5 = 'COMPLETED', 'true', NULL), error = ?7, request = coalesce(?8, request),
                 lease_until = NULL, finished_at = ?4, updated_at = ?4
           WHERE ${fenceOn(ITEM_ROWS)}
           RETURNING item_index`,
        )
        .bind(...base, o.output, o.state === "FAILED" ? o.error : null, input.request),
    )
    .add(
      "burn",
      db
        .prepare(
          // The undone key: the step's, or for an item's undo the item's (its row `<map>#<index>`), each by its primary key.
          `INSERT INTO burnt_keys (workspace, idempotency_key, execution_id, vertex_id, undo_key, burnt_at)
           SELECT u.workspace, u.undone_key, u.execution_id, u.undone, u.undo_key, ?4
           FROM (SELECT w.workspace, w.execution_id, coalesce(w.idempotency_key, '') AS undo_key,
                        iif(json_extract(w.item, '$.item') IS NULL, w.vertex_id,
                            w.vertex_id || '#' || json_extract(w.item, '$.item')) AS undone,
                        iif(json_extract(w.item, '$.item') IS NULL,
                            (SELECT s.idempotency_key FROM steps s WHERE s.execution_id = w.execution_id AND s.vertex_id = w.vertex_id),
                            (SELECT mi.idempotency_key FROM work_items mi
                             WHERE mi.execution_id = w.execution_id AND mi.row_key = w.vertex_id || '#' || json_extract(w.item, '$.item'))
                        ) AS undone_key
                 FROM work_items w WHERE w.execution_id = ?1 AND w.row_key = ?2 AND ?5 = 'COMPLETED' AND ${held}) u
           WHERE u.undone_key IS NOT NULL
           ON CONFLICT DO NOTHING`,
        )
        .bind(...base),
    )
    .add(
      "next",
      db
        .prepare(
          `UPDATE work_items SET state = 'DISPATCHED', available_at = ?4, updated_at = ?4
           WHERE execution_id = ?1 AND kind = 'undo' AND state = 'PENDING'
             AND item_index = (SELECT min(p.item_index) FROM work_items p
                               WHERE p.execution_id = ?1 AND p.kind = 'undo' AND p.state = 'PENDING')
             AND ?5 = 'COMPLETED' AND ${held}
             AND EXISTS (SELECT 1 FROM executions e WHERE e.id = ?1 AND e.status = 'COMPENSATING')
           RETURNING execution_id AS executionId, vertex_id AS vertexId, item_index AS place`,
        )
        .bind(...base),
    )
    .add(
      "finish",
      db
        .prepare(
          `UPDATE executions
             SET status = iif(?5 = 'FAILED', 'COMPENSATION_FAILED', 'COMPENSATED'), finished_at = ?4, updated_at = ?4
           WHERE id = ?1 AND status = 'COMPENSATING' AND ${held}
             AND (?5 = 'FAILED' OR NOT EXISTS (SELECT 1 FROM work_items u WHERE u.execution_id = ?1 AND u.kind = 'undo'
                                                 AND u.state IN ('PENDING', 'DISPATCHED', 'EXECUTING')))
           RETURNING status`,
        )
        .bind(...base),
    )
    .run();
  return {
    settled: results.first("settle") !== null,
    next: results.first<UndoRef>("next"),
    executionStatus: results.first<{ status: "COMPENSATED" | "COMPENSATION_FAILED" }>("finish")?.status ?? null,
  };
}

/** The undo steps DISPATCHED now (the first, just after the decision): their messages to send. */
export async function dispatchedUndos(db: D1Database, executionId: string): Promise<UndoRef[]> {
  const { results } = await db
    .prepare(
      `SELECT execution_id AS executionId, vertex_id AS vertexId, item_index AS place FROM work_items
       WHERE execution_id = ?1 AND kind = 'undo' AND state = 'DISPATCHED' ORDER BY item_index`,
    )
    .bind(executionId)
    .all<UndoRef>();
  return results;
}

/**
 * Why a key may not be sent again: a compensation undid the call it keyed (`burnt_keys`), or an
 * operator marked its failed compensation resolved (`undo_key` empty, `compensation_resolutions`),
 * so the destination would replay the undone call as if it stood. Null when the key is not burnt.
 * Read only after a persist wrote nothing (./step-key.ts refuses a burnt key), never on the send path.
 */
export async function burntKeyReason(db: D1Database, workspace: string, key: string): Promise<string | null> {
  const row = await db
    .prepare(
      `SELECT b.execution_id AS executionId, b.vertex_id AS vertexId, b.undo_key AS undoKey, r.resolved_by AS resolvedBy, r.note
       FROM burnt_keys b LEFT JOIN compensation_resolutions r ON r.execution_id = b.execution_id
       WHERE b.workspace = ?1 AND b.idempotency_key = ?2`,
    )
    .bind(workspace, key)
    .first<{ executionId: string; vertexId: string; undoKey: string; resolvedBy: string | null; note: string | null }>();
  if (!row) return null;
  const how =
    row.undoKey === "" && row.resolvedBy !== null
      ? `an operator (${row.resolvedBy}) marked its failed compensation resolved ("${row.note ?? ""}")`
      : `its undo (key ${row.undoKey}) reversed it`;
  return (
    `key ${key} was compensated: step ${row.vertexId} of execution ${row.executionId} sent it and ${how}, ` +
    "so sending it again would have the destination replay an undone call as if it stood; nothing was sent. " +
    "Use a new key for a new attempt at this business operation (not retried)"
  );
}
