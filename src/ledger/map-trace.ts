/**
 * The reads of a MAP's items for the trace and the items route (docs/steps.md "MAP"): the first
 * page of each MAP's items with its counts by state (in the trace's one batch, ./trace-reads.ts),
 * and a page after a cursor with its items' attempts and events
 * (`GET /v1/executions/{id}/steps/{vertexId}/items`). A MAP of 1,000 items is read one page at a
 * time: its later items' attempts and events are left out of the trace's reads (`ITEMS_BEYOND_PAGE`).
 * Reads only, scoped to the caller's workspace in SQL.
 */
import { ATTEMPT_RECORD, RUNNING_FROM_ROW, RUNNING_UNRECORDED, type AttemptRecord } from "./attempts";
import { LabelledBatch } from "./batch";
import { selectList } from "./columns";
import { bounded, byteLength } from "./execution-records";
import type { ItemState } from "./map-items";
import type { StepEventType } from "./step-events";
import { ITEM_ROWS } from "./work-rows";

/** Items per page: the trace's first page, and the items route's. */
export const MAP_ITEMS_PAGE = 100;

export interface ItemRecord {
  vertexId: string;
  index: number;
  state: ItemState;
  epoch: number;
  attempt: number;
  availableAt: number;
  leaseUntil: number | null;
  idempotencyKey: string | null;
  /** The list element (JSON text). */
  itemJson: string;
  /** The output (JSON text); null too when over `TRACE_VALUE_MAX_BYTES` (see `outputBytes`). */
  outputJson: string | null;
  outputBytes: number | null;
  /** What the item passes on to the MAP's output (JSON text, at most maxCollectBytes). */
  collectedJson: string | null;
  error: string | null;
  createdAt: number;
  finishedAt: number | null;
  /** The item's wait for a connector's permit (JSON, `work_items.permit_wait`); null if it never waited. */
  permitWaitJson: string | null;
}

/** A MAP's items counted by state. */
export interface ItemCountRecord {
  vertexId: string;
  state: ItemState;
  count: number;
}

export interface ItemEventRecord {
  /** The item's row key (`<vertex>#<index>`). */
  vertexId: string;
  type: StepEventType;
  epoch: number | null;
  at: number;
  detail: string | null;
}

export const ITEM_RECORD = selectList<ItemRecord>({
  vertexId: "w.vertex_id",
  index: "w.item_index",
  state: "w.state",
  epoch: "w.epoch",
  attempt: "w.attempt",
  availableAt: "w.available_at",
  leaseUntil: "w.lease_until",
  idempotencyKey: "w.idempotency_key",
  itemJson: bounded("w.item"),
  outputJson: bounded("w.output"),
  outputBytes: byteLength("w.output"),
  collectedJson: "w.collected",
  error: "w.error",
  createdAt: "w.created_at",
  finishedAt: "w.finished_at",
  permitWaitJson: "w.permit_wait",
});

/**
 * A row of `step_attempts` or `step_events` (its `vertex_id` column: `column`) that belongs to a
 * MAP item past the first page: the trace leaves it out (a row key holds `#`, a vertex id never).
 */
export const ITEMS_BEYOND_PAGE = (column: string) =>
  `(instr(${column}, '#') > 0 AND CAST(substr(${column}, instr(${column}, '#') + 1) AS INTEGER) >= ${MAP_ITEMS_PAGE})`;

/* The first page of every MAP's items is read with the undo steps, in one statement: ./undo-trace.ts `readWorkItemsOfSet`. */

/** `readItemCountsOfSet`: every MAP's items counted by state (a range of `work_items_by_state` per execution). */
export function readItemCountsOfSet(db: D1Database, owned: string, params: unknown[]): D1PreparedStatement {
  return db
    .prepare(
      `SELECT execution_id AS executionId, vertex_id AS vertexId, state, count(*) AS count FROM work_items
       WHERE execution_id IN ${owned} AND kind = 'map_item'
       GROUP BY execution_id, vertex_id, state`,
    )
    .bind(...params);
}

export interface ItemsPage {
  items: ItemRecord[];
  counts: ItemCountRecord[];
  /**
   * The page's items' attempts (row key as `vertexId`), per item oldest first; a running one, which
   * has no row until it ends (migrations/0041), read from its EXECUTING item.
   */
  attempts: AttemptRecord[];
  events: ItemEventRecord[];
  /** The index to continue after, or null on the last page. */
  nextAfter: number | null;
}

/**
 * `readItemsPage`: one MAP's items after index `after` (-1: from the first), at most `limit`, with
 * their attempts and events and the MAP's counts — one batch. Null: no such execution in this
 * workspace. Binds ?1 execution id, ?2 workspace, ?3 vertex id, ?4 after, ?5 limit + 1.
 */
export async function readItemsPage(
  db: D1Database,
  workspace: string,
  executionId: string,
  vertexId: string,
  after: number,
  limit: number,
): Promise<ItemsPage | null> {
  const owned = `EXISTS (SELECT 1 FROM executions e WHERE e.id = ?1 AND e.workspace = ?2)`;
  const page = `SELECT w.row_key FROM work_items w
    WHERE w.execution_id = ?1 AND w.vertex_id = ?3 AND w.kind = 'map_item' AND w.item_index > ?4 ORDER BY w.item_index LIMIT ?5`;
  const params = [executionId, workspace, vertexId, after, limit + 1] as const;
  const results = await new LabelledBatch<"execution" | "items" | "counts" | "attempts" | "events">(db)
    .add("execution", db.prepare(`SELECT 1 AS found FROM executions WHERE id = ?1 AND workspace = ?2`).bind(executionId, workspace))
    .add(
      "items",
      db
        .prepare(
          `SELECT ${ITEM_RECORD} FROM work_items w
           WHERE w.execution_id = ?1 AND w.vertex_id = ?3 AND w.kind = 'map_item' AND w.item_index > ?4 AND ${owned}
           ORDER BY w.item_index LIMIT ?5`,
        )
        .bind(...params),
    )
    .add(
      "counts",
      db
        .prepare(
          `SELECT vertex_id AS vertexId, state, count(*) AS count FROM work_items
           WHERE execution_id = ?1 AND vertex_id = ?3 AND kind = 'map_item' AND ${owned} AND ?4 = ?4 AND ?5 = ?5
           GROUP BY state`,
        )
        .bind(...params),
    )
    .add(
      "attempts",
      db
        .prepare(
          `SELECT ${ATTEMPT_RECORD} FROM step_attempt_rows a
           WHERE a.execution_id = ?1 AND a.vertex_id IN (${page}) AND ${owned}
           UNION ALL
           SELECT ${RUNNING_FROM_ROW("r", ITEM_ROWS)} FROM work_items r
           WHERE r.execution_id = ?1 AND r.row_key IN (${page}) AND ${owned} AND ${RUNNING_UNRECORDED("r", ITEM_ROWS)}
           ORDER BY 1, 2`,
        )
        .bind(...params),
    )
    .add(
      "events",
      db
        .prepare(
          `SELECT ev.vertex_id AS vertexId, ev.type, ev.epoch, ev.at, ev.detail FROM step_events ev
           WHERE ev.execution_id = ?1 AND ev.vertex_id IN (${page}) AND ${owned}
           ORDER BY ev.id`,
        )
        .bind(...params),
    )
    .run();
  if (results.first("execution") === null) return null;
  const items = results.rows<ItemRecord>("items");
  const more = items.length > limit;
  const shown = more ? items.slice(0, limit) : items;
  return {
    items: shown,
    counts: results.rows<ItemCountRecord>("counts"),
    attempts: results.rows<AttemptRecord>("attempts"),
    events: results.rows<ItemEventRecord>("events"),
    nextAfter: more ? shown.at(-1)!.index : null,
  };
}
