/**
 * The row sources the ledger's claim, fence and settle statements run over (private to
 * src/ledger): the step rows (`steps`, named by `vertex_id`) and the claimable rows that are not a
 * vertex (`work_items`, named by `row_key`: a MAP's items today, docs/steps.md "MAP";
 * migrations/0028). Both have the same state, epoch, attempt, lease and key columns under the same
 * CHECKs, so a statement written once for `steps` runs over `work_items` with the table and the
 * key column swapped — and the same bind order: ?1 execution id, ?2 the row's name, ?3 epoch (the
 * fence) or now (a claim).
 *
 * A row key stands where a vertex id goes in the tables keyed by step (`step_attempts`,
 * `step_events`, `destination_key_sends`): `<vertex>#<index>` for a map item. `#` is outside the
 * vertex-id alphabet (src/definitions/schema.ts), so a row key never equals a vertex id.
 */
export interface RowSource {
  readonly table: "steps" | "work_items";
  /** The column naming a row within its execution. */
  readonly key: "vertex_id" | "row_key";
}

export const STEP_ROWS: RowSource = { table: "steps", key: "vertex_id" };
export const ITEM_ROWS: RowSource = { table: "work_items", key: "row_key" };

/** THE FENCE (src/ledger/step-sql.ts `STEP_FENCE`) over a row source. Binds ?1 execution id, ?2 the row's name, ?3 epoch. */
export const fenceOn = (rows: RowSource): string => `execution_id = ?1 AND ${rows.key} = ?2 AND epoch = ?3 AND state = 'EXECUTING'`;

/** The kinds of `work_items` rows (the migration's CHECK lists the same). */
export type WorkItemKind = "map_item";

/** The row key of a MAP's item: `<vertex>#<index>`. */
export function itemRowKey(vertexId: string, index: number): string {
  return `${vertexId}#${index}`;
}

/** The MAP vertex and the item index a row key names; null for a vertex id (no `#`). */
export function parseRowKey(key: string): { vertexId: string; item: number } | null {
  const at = key.lastIndexOf("#");
  if (at <= 0) return null;
  const item = Number(key.slice(at + 1));
  return Number.isInteger(item) && item >= 0 ? { vertexId: key.slice(0, at), item } : null;
}
