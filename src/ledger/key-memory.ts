/**
 * Key memory: hot and cold (docs/history.md). The hot rows' side of the cold tier (src/keys): the
 * guard's restore of a cold send onto the step's hot row, and the move's select and delete.
 */
import type { KeySend } from "./key-sends";

/**
 * `restoreColdSend`: the key's first send on record in the cold tier, copied back onto its hot row
 * when that row is younger (written without the cold record in view) — so every later attempt, a
 * takeover, the trace and an operator's acknowledgement see the first send without asking R2 again.
 * Not fenced: it only ever makes the row older, to a fact on record (a stale worker writing it is
 * harmless), and a step and a MAP item restore it alike. Returns the hot row as it stands (null: none).
 * Binds ?1 workspace, ?2 key, ?3 destination, ?4 first sent, ?5 counted from.
 */
export async function restoreColdSend(
  db: D1Database,
  workspace: string,
  key: string,
  destination: string,
  send: KeySend,
): Promise<KeySend | null> {
  const params = [workspace, key, destination, send.firstSentAt, send.countedFrom];
  const row = await db
    .prepare(
      `UPDATE destination_key_sends SET first_sent_at = ?4, counted_from = max(?5, ?4)
       WHERE workspace = ?1 AND idempotency_key = ?2 AND destination = ?3 AND first_sent_at > ?4
       RETURNING first_sent_at AS firstSentAt, counted_from AS countedFrom`,
    )
    .bind(...params)
    .first<KeySend>();
  if (row !== null) return row;
  // Not younger (already restored, or older all along): as it stands.
  return db
    .prepare(
      `SELECT first_sent_at AS firstSentAt, counted_from AS countedFrom FROM destination_key_sends
       WHERE workspace = ?1 AND idempotency_key = ?2 AND destination = ?3`,
    )
    .bind(workspace, key, destination)
    .first<KeySend>();
}

/**
 * No kept step and no kept MAP item (undo step) holds the key of `ks`: its retries, a refusal's
 * acknowledgement and the trace read the hot row. Found by the partial indexes `steps_by_key` and
 * `work_items_by_key`, or — the rows they leave out since migrations/0043 (`key_first_send`) — by
 * the key's send rows that name them (their primary key begins with (workspace, key); then the
 * named row by its own). A send born unguarded is held this way while its execution lives: the
 * step or item that sent it holds its key until the removal.
 */
const HELD_BY_NO_STEP = `NOT EXISTS (SELECT 1 FROM steps s
    WHERE s.workspace = ks.workspace AND s.idempotency_key = ks.idempotency_key AND s.idempotency_key IS NOT NULL
      AND s.key_first_send IS NULL)
  AND NOT EXISTS (SELECT 1 FROM work_items w
    WHERE w.workspace = ks.workspace AND w.idempotency_key = ks.idempotency_key AND w.idempotency_key IS NOT NULL
      AND w.key_first_send IS NULL)
  AND NOT EXISTS (SELECT 1 FROM destination_key_sends n
    WHERE n.workspace = ks.workspace AND n.idempotency_key = ks.idempotency_key
      AND (EXISTS (SELECT 1 FROM steps s WHERE s.execution_id = n.execution_id AND s.vertex_id = n.vertex_id AND s.key_first_send = 1)
           OR EXISTS (SELECT 1 FROM work_items w
                      WHERE w.execution_id = n.execution_id AND w.row_key = n.vertex_id AND w.key_first_send = 1)))`;

/** A kept key send due to move cold, as the move reads it. */
export interface DueKeySend {
  workspace: string;
  key: string;
  destination: string;
  firstSentAt: number;
  countedFrom: number;
  /** `FORGETS_AT`: the move's cursor position. */
  forgetsAt: number;
  /** A kept step or MAP item still holds the key: it stays hot for now. */
  held: 0 | 1;
}

/** Where the move's scan of the due index stands: the last row it looked at (null: the head). */
export type MoveCursor = readonly [forgetsAt: number, workspace: string, key: string, destination: string] | null;

/**
 * When the destination may forget the key of the send `ks` (migrations/0036): where its retention
 * counts from plus the retention it declared (none declared: `counted_from`). The expression of
 * the partial index `destination_key_sends_cold_due`, written exactly as the index is.
 */
export const FORGETS_AT = "counted_from + coalesce(retention_ms, 0)";
const KS_FORGETS_AT = "ks.counted_from + coalesce(ks.retention_ms, 0)";

/**
 * `selectColdDue`: kept (guarded = 1) key sends whose destination forgets them at `forgottenBy`
 * or earlier (`FORGETS_AT`; the move passes now − KEY_MEMORY_HOT: a send stays hot for its declared
 * retention plus that margin) in index order after the move's cursor (`key_move_cursor`), at most
 * `scan` of them, each marked `held` when a kept step or MAP item still holds its key (it stays
 * hot: its retries, a refusal's acknowledgement and the trace read the row). Through the partial
 * index `destination_key_sends_cold_due` (then the primary key): every entry in the range is due,
 * whatever its retention. The cursor makes held rows cost one look per cycle: a head of keys whose
 * executions are kept for 30 days never stalls the move of the keys behind it.
 */
export async function selectColdDue(db: D1Database, forgottenBy: number, scan: number, after: MoveCursor): Promise<DueKeySend[]> {
  const { results } = await db
    .prepare(
      `SELECT ks.workspace, ks.idempotency_key AS key, ks.destination, ks.first_sent_at AS firstSentAt,
              ks.counted_from AS countedFrom, ${KS_FORGETS_AT} AS forgetsAt,
              CASE WHEN ${HELD_BY_NO_STEP} THEN 0 ELSE 1 END AS held
       FROM destination_key_sends ks
       WHERE ks.guarded = 1 AND ${KS_FORGETS_AT} <= ?1
         AND (${KS_FORGETS_AT}, ks.workspace, ks.idempotency_key, ks.destination) > (?3, ?4, ?5, ?6)
       ORDER BY ${KS_FORGETS_AT}, ks.workspace, ks.idempotency_key, ks.destination LIMIT ?2`,
    )
    .bind(forgottenBy, scan, ...(after ?? [-1, "", "", ""]))
    .all<DueKeySend>();
  return results ?? [];
}

/** `readMoveCursor`: where the last pass of the move stopped (null: at the head). */
export async function readMoveCursor(db: D1Database): Promise<MoveCursor> {
  const row = await db
    .prepare("SELECT counted_from AS c, workspace AS w, idempotency_key AS k, destination AS d FROM key_move_cursor WHERE id = 0")
    .first<{ c: number; w: string; k: string; d: string }>();
  return row === null ? null : [row.c, row.w, row.k, row.d];
}

/** `saveMoveCursor`: the move's scan goes on after `cursor` next time (null: from the head). */
export function saveMoveCursor(db: D1Database, cursor: MoveCursor): D1PreparedStatement {
  if (cursor === null) return db.prepare("DELETE FROM key_move_cursor");
  return db
    .prepare(
      `INSERT INTO key_move_cursor (id, counted_from, workspace, idempotency_key, destination) VALUES (0, ?1, ?2, ?3, ?4)
       ON CONFLICT (id) DO UPDATE SET counted_from = excluded.counted_from, workspace = excluded.workspace,
         idempotency_key = excluded.idempotency_key, destination = excluded.destination`,
    )
    .bind(...cursor);
}

/**
 * `deleteMovedKeySends`: the hot rows of `rows` (bound as one JSON array of [workspace, key,
 * destination]) that are still due — no acknowledgement moved `counted_from` (nor a longer
 * retention the forget time) past `forgottenBy` and no step took the key meanwhile — for the
 * move's batch, after their cold records were written.
 */
export function deleteMovedKeySends(db: D1Database, rows: ReadonlyArray<readonly [string, string, string]>, forgottenBy: number) {
  return db
    .prepare(
      `DELETE FROM destination_key_sends AS ks
       WHERE (workspace, idempotency_key, destination) IN (SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2 FROM json_each(?1) j)
         AND guarded = 1 AND ${FORGETS_AT} <= ?2 AND ${HELD_BY_NO_STEP}`,
    )
    .bind(JSON.stringify(rows), forgottenBy);
}
