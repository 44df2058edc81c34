/**
 * A MAP's items (SPEC section 16, docs/steps.md "MAP"; migrations/0028): the rows of `work_items`
 * of kind `map_item`, claimed, fenced, leased and settled by the step's own statements over the
 * item row source (./work-rows.ts) — the claim batch, the key persist, the heartbeat, the retry are
 * the step's, parameterised — plus what only a MAP has: the list persisted once with its first
 * items started, the item settle that starts the next item and wakes the MAP when nothing is left,
 * the MAP's read of its items, and the reaper's twins over items.
 *
 * Binds as every worker statement: ?1 execution id, ?2 the row's name (a step's vertex id, an
 * item's row key), ?3 epoch (the fence) or now (a claim), then the rest.
 */
import { sealedSecretsColumn } from "../secrets/store";
import { finishAttempt, markLostAttempts, trimAttempts, type AttemptEnd, type AttemptResponse } from "./attempts";
import { LabelledBatch } from "./batch";
import { CHAINED_CLAIM_COLUMNS } from "./chain-claim";
import { selectList } from "./columns";
import { countAttemptEnd, countClaim, isReplayed } from "./execution-counters";
import type { ExecutionStatus } from "./execution-types";
import { keySendsColumn } from "./key-sends";
import { claimStep, IN_PROGRESS_SINCE, recordLeaseExpiry, recordRedeliveryDropped, type ClaimedStep } from "./step-claim";
import { recordFencedOut } from "./step-events";
import {
  MAX_STEP_INPUT_BYTES,
  readStepInputs,
  toStepInputs,
  type StepInputs,
  type StepInputsBound,
  type StepInputsRow,
} from "./step-inputs";
import { fenceParams, STEP_FENCE, type Fence, type StepRef } from "./step-sql";
import { inFlight, mapDone, stopped } from "./map-sql";
import { fenceOn, ITEM_ROWS, itemRowKey } from "./work-rows";

export { itemRowKey, parseRowKey } from "./work-rows";

/** One item of one MAP step: what a queue message names (src/steps/messages.ts `item`). */
export interface ItemRef {
  executionId: string;
  /** The MAP's vertex id. */
  vertexId: string;
  /** The item's index in the persisted list, from 0. */
  item: number;
}

/** What an item's worker holds after its claim. */
export interface ItemFence extends ItemRef {
  epoch: number;
}

export type ItemState = "PENDING" | "DISPATCHED" | "EXECUTING" | "COMPLETED" | "FAILED" | "CANCELLED";

/** The item as the step statements name it: its row key where a step's vertex id goes. */
export const itemKeyRef = (r: ItemRef): StepRef => ({ executionId: r.executionId, vertexId: itemRowKey(r.vertexId, r.item) });
export const itemKeyFence = (f: ItemFence): Fence => ({ ...itemKeyRef(f), epoch: f.epoch });

// ---------------------------------------------------------------------------------------------
// The MAP: its list persisted once, items started, its items read

/** The most bytes the persisted list's JSON may hold (D1: 2,000,000 bytes per value, and the row of every item). */
export const MAX_MAP_LIST_BYTES = 1_000_000;

export interface MapStart {
  now: number;
  /**
   * The list to persist, as a JSON array of each element's JSON text (so the element is stored as
   * written, whatever its type); null: the items exist already, only start PENDING ones.
   */
  elementsJson: string | null;
  concurrency: number;
  stopOnFailure: boolean;
}

/**
 * `startMapItems`: under the MAP step's fence, ONE batch — the list's items inserted (one
 * `INSERT … SELECT … FROM json_each(?)`, PENDING, only where none is on record: a second persist
 * is a no-op), then PENDING items started into the free slots (DISPATCHED, lowest index first, none
 * while a FAILED item stops the MAP). Returns the started items (their messages go after the
 * commit), or null when the fence did not hold.
 */
export async function startMapItems(db: D1Database, map: Fence, s: MapStart): Promise<number[] | null> {
  const batch = new LabelledBatch<"fence" | "insert" | "start">(db);
  batch.add("fence", db.prepare(`SELECT 1 AS ours FROM steps WHERE ${STEP_FENCE}`).bind(...fenceParams(map)));
  if (s.elementsJson !== null) {
    batch.add(
      "insert",
      db
        .prepare(
          `INSERT INTO work_items (execution_id, row_key, vertex_id, kind, item_index, workspace, state, available_at, item,
                                   created_at, updated_at)
           SELECT st.execution_id, st.vertex_id || '#' || j.key, st.vertex_id, 'map_item', j.key, st.workspace, 'PENDING', ?4,
                  j.value, ?4, ?4
           FROM steps st, json_each(?5) j
           WHERE st.execution_id = ?1 AND st.vertex_id = ?2 AND st.epoch = ?3 AND st.state = 'EXECUTING'
           ON CONFLICT DO NOTHING`,
        )
        .bind(...fenceParams(map), s.now, s.elementsJson),
    );
  }
  batch.add(
    "start",
    db
      .prepare(
        `UPDATE work_items SET state = 'DISPATCHED', available_at = ?4, updated_at = ?4
         WHERE execution_id = ?1 AND vertex_id = ?2 AND kind = 'map_item' AND state = 'PENDING'
           AND item_index IN (SELECT p.item_index FROM work_items p
                              WHERE p.execution_id = ?1 AND p.vertex_id = ?2 AND p.kind = 'map_item' AND p.state = 'PENDING'
                              ORDER BY p.item_index LIMIT max(0, ?5 - ${inFlight("?1", "?2")}))
           AND EXISTS (SELECT 1 FROM steps WHERE ${STEP_FENCE})
           AND NOT ${stopped("?1", "?2", "?6")}
         RETURNING item_index`,
      )
      .bind(...fenceParams(map), s.now, s.concurrency, s.stopOnFailure ? 1 : 0),
  );
  const results = await batch.run();
  if (results.first("fence") === null) return null;
  return results.rows<{ item_index: number }>("start").map((r) => r.item_index);
}

/** A MAP's items as its claim reads them: the counts by state and, in list order, what they passed on. */
export interface MapItemsRead {
  total: number;
  pending: number;
  dispatched: number;
  executing: number;
  completed: number;
  failed: number;
  cancelled: number;
  /** JSON array, in `item_index` order, of each item's collected value (null where it has none). */
  collectedJson: string;
  /** JSON array of `{ index, error }` of the FAILED items, in list order (each error at most 500 characters). */
  failedJson: string;
}

/**
 * `readMapItems`: the MAP's items — counts by state, and the collected values and failures in
 * list order (each item's `collected` is bounded by `maxCollectBytes`, their sum by the save-time
 * `map-output-too-large`). One statement over `work_items_by_state` and the primary key.
 * Binds ?1 execution id, ?2 vertex id.
 */
export async function readMapItems(db: D1Database, executionId: string, vertexId: string): Promise<MapItemsRead> {
  const row = await db
    .prepare(
      `SELECT count(*) AS total,
              coalesce(sum(state = 'PENDING'), 0) AS pending, coalesce(sum(state = 'DISPATCHED'), 0) AS dispatched,
              coalesce(sum(state = 'EXECUTING'), 0) AS executing, coalesce(sum(state = 'COMPLETED'), 0) AS completed,
              coalesce(sum(state = 'FAILED'), 0) AS failed, coalesce(sum(state = 'CANCELLED'), 0) AS cancelled,
              (SELECT json_group_array(json(coalesce(c.collected, 'null')))
                 FROM (SELECT collected FROM work_items WHERE execution_id = ?1 AND vertex_id = ?2 AND kind = 'map_item'
                       ORDER BY item_index) c) AS collectedJson,
              (SELECT json_group_array(json_object('index', f.item_index, 'error', substr(coalesce(f.error, ''), 1, 500)))
                 FROM (SELECT item_index, error FROM work_items WHERE execution_id = ?1 AND vertex_id = ?2 AND kind = 'map_item'
                         AND state = 'FAILED' ORDER BY item_index) f) AS failedJson
       FROM work_items WHERE execution_id = ?1 AND vertex_id = ?2 AND kind = 'map_item'`,
    )
    .bind(executionId, vertexId)
    .first<MapItemsRead>();
  return (
    row ?? {
      total: 0,
      pending: 0,
      dispatched: 0,
      executing: 0,
      completed: 0,
      failed: 0,
      cancelled: 0,
      collectedJson: "[]",
      failedJson: "[]",
    }
  );
}

// ---------------------------------------------------------------------------------------------
// An item's claim

/** The item, its execution and the pinned definition: what an item's runner needs, and why a claim missed. */
export interface ItemRun {
  executionId: string;
  workspace: string;
  workflowId: string;
  version: string;
  entryVertexId: string;
  triggerKind: string;
  startedOverFrom: string | null;
  executionStatus: ExecutionStatus;
  definitionJson: string;
  /** The item's state; null when the execution has no such item. */
  itemState: ItemState | null;
  leaseUntil: number | null;
  /** Set while the item is parked for a connector's permit (src/steps/map-item.ts): when it asks again. */
  parkedUntil: number | null;
  availableAt: number | null;
  /** The list element's JSON, persisted at the MAP's first claim. */
  itemJson: string | null;
  /** When the destination first answered "in progress" for this item since it was (re)started. */
  inProgressSince: number | null;
  sealedSecretsJson: string | null;
  keySendsJson: string | null;
  itemCreatedAt: number | null;
}

const ITEM_RUN = selectList<ItemRun>({
  executionId: "e.id",
  workspace: "e.workspace",
  workflowId: "e.workflow_id",
  version: "e.version",
  entryVertexId: "e.entry_vertex_id",
  triggerKind: "e.trigger_kind",
  startedOverFrom: "e.started_over_from",
  executionStatus: "e.status",
  definitionJson: "v.definition",
  itemState: "w.state",
  leaseUntil: "w.lease_until",
  parkedUntil: "w.parked_until",
  availableAt: "w.available_at",
  itemJson: "w.item",
  // ?2 is the item's row key: its events are recorded under it.
  inProgressSince: IN_PROGRESS_SINCE,
  sealedSecretsJson: sealedSecretsColumn("e.workspace", "v.definition"),
  keySendsJson: keySendsColumn("w"),
  itemCreatedAt: "w.created_at",
});

export interface ItemClaimOptions {
  message?: string;
  dropIfWaiting?: boolean;
  /** A permit waiter's wake-up: meeting the item settled is expected — no stopped redelivery counted. */
  permitWake?: boolean;
  inputs?: StepInputsBound;
}

export interface ItemClaimResult {
  claimed: ClaimedStep | null;
  run: ItemRun | null;
  /** The MAP's inputs (an item reads what its MAP reads), when this batch claimed the item. */
  inputs: StepInputs | null;
}

/**
 * `claimItemAndLoad`: the step's claim batch over the item — lease-expiry record, [redelivery-dropped
 * record], counters, `claimStep`, the attempts (a `running` row from before migrations/0041 marked
 * lost, the newest 20 kept — the claimed attempt has no row until it ends: ./attempts.ts), the
 * run (execution, definition, the item's value, its key's sends) and the MAP's inputs
 * read under the item's claim. One round trip.
 */
export async function claimItemAndLoad(
  db: D1Database,
  ref: ItemRef,
  now: number,
  leaseMs: number,
  options: ItemClaimOptions = {},
): Promise<ItemClaimResult> {
  const key = itemKeyRef(ref);
  const drop = options.dropIfWaiting === true;
  const results = await new LabelledBatch<"leaseExpired" | "redeliveryDropped" | "counters" | "claim" | "attempts" | "run" | "inputs">(db)
    .add("leaseExpired", recordLeaseExpiry(db, key, now, ITEM_ROWS))
    .add("redeliveryDropped", recordRedeliveryDropped(db, key, now, options.message ?? "a message", drop, ITEM_ROWS, options.permitWake))
    .add("counters", countClaim(db, key, now, drop, ITEM_ROWS, options.permitWake))
    .add("claim", claimStep(db, key, now, leaseMs, ITEM_ROWS))
    .add("attempts", markLostAttempts(db, key, ITEM_ROWS))
    .add("attempts", trimAttempts(db, key, ITEM_ROWS))
    .add(
      "run",
      db
        .prepare(
          `SELECT ${ITEM_RUN}
           FROM executions e
           JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version
           LEFT JOIN work_items w ON w.execution_id = e.id AND w.row_key = ?2
           WHERE e.id = ?1`,
        )
        .bind(key.executionId, key.vertexId),
    )
    .add(
      "inputs",
      readStepInputs(
        db,
        { executionId: ref.executionId, vertexId: ref.vertexId },
        now,
        options.inputs ?? { maxBytes: MAX_STEP_INPUT_BYTES, analysisVersion: null },
        { rows: ITEM_ROWS, key: key.vertexId },
      ),
    )
    .run();
  const inputs = results.first<StepInputsRow>("inputs");
  return { claimed: results.first<ClaimedStep>("claim"), run: results.first<ItemRun>("run"), inputs: inputs ? toStepInputs(inputs) : null };
}

// ---------------------------------------------------------------------------------------------
// An item's settle: the next item started, the MAP woken when nothing is left

export type ItemSettleOutcome =
  { state: "COMPLETED"; output: string; collected: string } | { state: "FAILED"; error: string; output: string | null };

export interface ItemSettleInput {
  fence: ItemFence;
  now: number;
  outcome: ItemSettleOutcome;
  request: string | null;
  response?: AttemptResponse | null;
  concurrency: number;
  stopOnFailure: boolean;
  /** Claim the next item for this invocation (its chaining budget offered one), with this lease; null: dispatch it. */
  chainLeaseMs: number | null;
}

/** The item a settle started: DISPATCHED (send its message), or EXECUTING claimed for the caller to run. */
export interface StartedItem {
  item: number;
  state: "DISPATCHED" | "EXECUTING";
  /** The item's persisted value (JSON). */
  itemJson: string;
  claimed: ClaimedStep & { createdAt: number };
}

export interface ItemSettleResult {
  /** False: fenced out; a fenced_out event was recorded and nothing else changed. */
  settled: boolean;
  started: StartedItem | null;
  /** This batch found the MAP's items done and woke it: the caller claims the MAP. */
  mapWoken: boolean;
}

/**
 * `settleItem`: ONE batch — the fenced-out record, the counters, the attempt's end, the item
 * settled (fenced), then, only if that settle held (`HELD`): the lowest PENDING item started into
 * the slot it freed (claimed for the caller when the chain offered — its `claimed_at` set, its
 * attempt with no row until it ends, migrations/0041; else DISPATCHED) while the MAP step is
 * EXECUTING (a cancelled MAP starts nothing), fewer than `concurrency` items are in flight and
 * no FAILED item stops the MAP; and the MAP woken
 * (`UNPARK_NOW`) when its items are done. D1 runs batches one at a time: of N items settling at
 * once, only the batch that settles the last one sees none left and wakes the MAP.
 *
 * Binds ?1 execution id, ?2 the settled item's row key, ?3 its epoch, ?4 now, then per statement.
 */
export async function settleItem(db: D1Database, input: ItemSettleInput): Promise<ItemSettleResult> {
  const fence = itemKeyFence(input.fence);
  const { now } = input;
  const o = input.outcome;
  const end: AttemptEnd = {
    outcome: o.state === "COMPLETED" ? "completed" : "failed",
    request: input.request,
    response: input.response ?? null,
    error: o.state === "FAILED" ? o.error : null,
    delay: null,
  };
  // This batch's settle held: the item is settled under this epoch, now.
  const held = `EXISTS (SELECT 1 FROM work_items h WHERE h.execution_id = ?1 AND h.row_key = ?2 AND h.epoch = ?3
                  AND h.state IN ('COMPLETED', 'FAILED') AND h.finished_at = ?4)`;
  const params = [
    ...fenceParams(fence),
    now,
    input.fence.vertexId,
    input.concurrency,
    input.stopOnFailure ? 1 : 0,
    input.chainLeaseMs,
  ] as const;
  const batch = new LabelledBatch<"fencedOut" | "counters" | "attempt" | "settle" | "start" | "wake">(db)
    .add(
      "fencedOut",
      recordFencedOut(
        db,
        fence,
        now,
        `late ${o.state.toLowerCase()} of item ${input.fence.item} rejected: it was taken over, re-dispatched or cancelled`,
        ITEM_ROWS,
      ),
    )
    .add("counters", countAttemptEnd(db, fence, isReplayed(input.response?.headers), ITEM_ROWS))
    .add("attempt", finishAttempt(db, fence, now, end, ITEM_ROWS))
    .add(
      "settle",
      db
        .prepare(
          `UPDATE work_items
             SET state = ?5, output = ?6, collected = ?7, error = ?8, request = coalesce(?9, request),
                 lease_until = NULL, finished_at = ?4, updated_at = ?4
           WHERE ${fenceOn(ITEM_ROWS)}
           RETURNING item_index`,
        )
        .bind(
          ...fenceParams(fence),
          now,
          o.state,
          o.output,
          o.state === "COMPLETED" ? o.collected : null,
          o.state === "FAILED" ? o.error : null,
          input.request,
        ),
    )
    .add(
      "start",
      db
        .prepare(
          // ?5 vertex id, ?6 concurrency, ?7 stop on failure, ?8 the chained lease (NULL: dispatch).
          `UPDATE work_items
             SET state = iif(?8 IS NULL, 'DISPATCHED', 'EXECUTING'), epoch = epoch + (?8 IS NOT NULL),
                 attempt = attempt + (?8 IS NOT NULL), lease_until = iif(?8 IS NULL, NULL, ?4 + ?8), available_at = ?4, updated_at = ?4,
                 claimed_at = iif(?8 IS NULL, claimed_at, ?4)
           WHERE execution_id = ?1 AND state = 'PENDING'
             AND row_key = (SELECT p.row_key FROM work_items p
                            WHERE p.execution_id = ?1 AND p.vertex_id = ?5 AND p.kind = 'map_item' AND p.state = 'PENDING'
                            ORDER BY p.item_index LIMIT 1)
             AND ${held}
             AND EXISTS (SELECT 1 FROM steps m WHERE m.execution_id = ?1 AND m.vertex_id = ?5 AND m.state = 'EXECUTING')
             AND ${inFlight("?1", "?5")} < ?6
             AND NOT ${stopped("?1", "?5", "?7")}
           RETURNING item_index AS item, state, item AS itemJson, ${CHAINED_CLAIM_COLUMNS}`,
        )
        .bind(...params),
    );
  batch.add(
    "wake",
    db
      .prepare(
        `UPDATE steps SET parked_until = ?4, lease_until = ?4, updated_at = ?4
         WHERE execution_id = ?1 AND vertex_id = ?5 AND state = 'EXECUTING' AND parked_until > ?4
           AND ${held} AND ${mapDone("?1", "?5", "?7")}
         RETURNING vertex_id`,
      )
      .bind(...params.slice(0, 7)),
  );
  const results = await batch.run();
  const started = results.first<
    { item: number; state: "DISPATCHED" | "EXECUTING"; itemJson: string } & ClaimedStep & { createdAt: number; vertexId: string }
  >("start");
  return {
    settled: results.first("settle") !== null,
    started: started
      ? {
          item: started.item,
          state: started.state,
          itemJson: started.itemJson,
          claimed: {
            epoch: started.epoch,
            attempt: started.attempt,
            retryBase: started.retryBase,
            leaseUntil: started.leaseUntil,
            idempotencyKey: started.idempotencyKey,
            createdAt: started.createdAt,
          },
        }
      : null,
    mapWoken: results.first("wake") !== null,
  };
}

// ---------------------------------------------------------------------------------------------
// Recovery: the reaper's twins over items

/**
 * `redispatchExpiredItemLeases`: EXECUTING items whose lease expired go back to DISPATCHED, due now,
 * with a `lease_expired` event under their row key (the step sweep's twin); the attempt each one
 * loses is written `lost` by this very UPDATE (the trigger `work_items_attempt_unrecorded`,
 * migrations/0041). RETURNING what to re-send.
 */
/** A row the reaper re-dispatched: a MAP's item, or an undo step (`kind` 'undo', `item` its place: docs/steps.md "Compensation"). */
export type RecoveredRow = ItemRef & { kind: "map_item" | "undo" };

export async function redispatchExpiredItemLeases(db: D1Database, now: number, limit: number): Promise<RecoveredRow[]> {
  const expired = `SELECT rowid FROM work_items WHERE state = 'EXECUTING' AND lease_until <= ?1 AND parked_until IS NULL
                   ORDER BY lease_until LIMIT ?2`;
  const results = await new LabelledBatch<"leaseExpired" | "redispatched">(db)
    .add(
      "leaseExpired",
      db
        .prepare(
          `INSERT INTO step_events (execution_id, vertex_id, type, epoch, at, detail)
           SELECT execution_id, row_key, 'lease_expired', epoch, ?1, 're-dispatched by the reaper'
           FROM work_items WHERE rowid IN (${expired})`,
        )
        .bind(now, limit),
    )
    .add(
      "redispatched",
      db
        .prepare(
          `UPDATE work_items SET state = 'DISPATCHED', lease_until = NULL, available_at = ?1, updated_at = ?1
           WHERE rowid IN (${expired}) AND state = 'EXECUTING'
           RETURNING execution_id AS executionId, vertex_id AS vertexId, item_index AS item, kind`,
        )
        .bind(now, limit),
    )
    .run();
  return results.rows<RecoveredRow>("redispatched");
}

/** `redispatchOverdueItems`: DISPATCHED items whose message is presumed lost, re-sent with the step sweep's back-off. */
export async function redispatchOverdueItems(
  db: D1Database,
  now: number,
  overdueMs: number,
  limit: number,
  maxWaitMs: number,
): Promise<RecoveredRow[]> {
  const due = `SELECT id FROM (
      SELECT * FROM (SELECT rowid AS id, available_at + ?2 AS due FROM work_items
                     WHERE state = 'DISPATCHED' AND next_resend_at IS NULL AND available_at <= ?1 - ?2
                     ORDER BY available_at LIMIT ?3)
      UNION ALL
      SELECT * FROM (SELECT rowid AS id, next_resend_at AS due FROM work_items
                     WHERE state = 'DISPATCHED' AND next_resend_at IS NOT NULL AND next_resend_at <= ?1
                     ORDER BY next_resend_at LIMIT ?3)
    ) ORDER BY due LIMIT ?3`;
  const { results } = await db
    .prepare(
      `UPDATE work_items
         SET resends = resends + 1, next_resend_at = ?1 + min(?2 << min(resends + 1, 30), ?4), updated_at = ?1
       WHERE rowid IN (${due}) AND state = 'DISPATCHED'
       RETURNING execution_id AS executionId, vertex_id AS vertexId, item_index AS item, kind`,
    )
    .bind(now, overdueMs, limit, maxWaitMs)
    .all<RecoveredRow>();
  return results;
}
