/**
 * The trace's read of an execution's claimable rows that are not vertices (`work_items`): the
 * first page of each MAP's items (./map-trace.ts) and every undo step of a compensation
 * (./undo-steps.ts, docs/steps.md "Compensation") — ONE statement for both, so the trace's batch
 * (./trace-reads.ts) keeps its size whatever the execution holds. Their attempts and events are
 * read by the trace's other statements under their row keys (`<vertex>#<index>`, `<vertex>#undo#<place>`).
 * Reads only, scoped to the caller's workspace in SQL (`owned`).
 */
import { selectList } from "./columns";
import { bounded, byteLength } from "./execution-records";
import { ITEM_RECORD, MAP_ITEMS_PAGE, type ItemRecord } from "./map-trace";
import type { UndoState } from "./undo-steps";

/** An undo step as the trace shows it: the row of kind `undo` (migrations/0031). */
export interface UndoRecord {
  /** The step it undoes. */
  vertexId: string;
  /** Its row key (`<vertex>#undo#<place>`): its attempts and events are recorded under it. */
  rowKey: string;
  /** Its place in the compensation's order (0 ran first). */
  place: number;
  state: UndoState;
  epoch: number;
  attempt: number;
  availableAt: number;
  leaseUntil: number | null;
  idempotencyKey: string | null;
  /** The redacted request summary (JSON text); null too when over `TRACE_VALUE_MAX_BYTES` (see `requestBytes`). */
  requestJson: string | null;
  requestBytes: number | null;
  /** The undo call's output (JSON text); null too when over `TRACE_VALUE_MAX_BYTES` (see `outputBytes`). */
  outputJson: string | null;
  outputBytes: number | null;
  error: string | null;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
}

const UNDO_ONLY = selectList<Pick<UndoRecord, "rowKey" | "requestJson" | "requestBytes" | "updatedAt">>({
  rowKey: "w.row_key",
  requestJson: bounded("w.request"),
  requestBytes: byteLength("w.request"),
  updatedAt: "w.updated_at",
});

/** A row of `readWorkItemsOfSet`: an item or an undo step (its `kind` says which), with its execution. */
export type WorkItemTraceRow = ItemRecord &
  Pick<UndoRecord, "rowKey" | "requestJson" | "requestBytes" | "updatedAt"> & { executionId: string; kind: "map_item" | "undo" };

/**
 * `readWorkItemsOfSet`: the first page (`MAP_ITEMS_PAGE`) of every MAP's items and every undo step
 * of the executions `owned` names, in one statement (a range of `work_items`' primary key per
 * execution). Per MAP its items come in list order; the undo steps in their place order.
 */
export function readWorkItemsOfSet(db: D1Database, owned: string, params: unknown[]): D1PreparedStatement {
  return db
    .prepare(
      `SELECT w.execution_id AS executionId, w.kind AS kind, ${ITEM_RECORD}, ${UNDO_ONLY} FROM work_items w
       WHERE w.execution_id IN ${owned} AND ((w.kind = 'map_item' AND w.item_index < ${MAP_ITEMS_PAGE}) OR w.kind = 'undo')
       ORDER BY w.execution_id, w.kind, w.item_index, w.vertex_id`,
    )
    .bind(...params);
}

/** Split the rows: a MAP's items (as ./map-trace.ts reads them) and the undo steps. */
export function splitWorkItems(rows: readonly WorkItemTraceRow[]): {
  items: Array<ItemRecord & { executionId: string }>;
  undos: Array<UndoRecord & { executionId: string }>;
} {
  const items: Array<ItemRecord & { executionId: string }> = [];
  const undos: Array<UndoRecord & { executionId: string }> = [];
  for (const { kind, rowKey, requestJson, requestBytes, updatedAt, ...r } of rows) {
    if (kind === "undo") {
      undos.push({
        executionId: r.executionId,
        vertexId: r.vertexId,
        rowKey,
        place: r.index,
        state: r.state as UndoState,
        epoch: r.epoch,
        attempt: r.attempt,
        availableAt: r.availableAt,
        leaseUntil: r.leaseUntil,
        idempotencyKey: r.idempotencyKey,
        requestJson,
        requestBytes,
        outputJson: r.outputJson,
        outputBytes: r.outputBytes,
        error: r.error,
        createdAt: r.createdAt,
        updatedAt,
        finishedAt: r.finishedAt,
      });
    } else {
      items.push(r);
    }
  }
  return { items, undos };
}

/** The step an undo step's row key (`<vertex>#undo#<place>`) undoes, and its place; null for any other name. */
export function parseUndoRowKey(key: string): { vertexId: string; place: number } | null {
  const at = key.lastIndexOf("#undo#");
  if (at <= 0) return null;
  const place = Number(key.slice(at + "#undo#".length));
  return Number.isInteger(place) && place >= 0 ? { vertexId: key.slice(0, at), place } : null;
}
