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
 * No kept step and no kept MAP item holds the key of `ks` (by the partial indexes `steps_by_key` and
 * `work_items_by_key`): its retries, a refusal's acknowledgement and the trace read the hot row.
 */
const HELD_BY_NO_STEP = `NOT EXISTS (SELECT 1 FROM steps s
    WHERE s.workspace = ks.workspace AND s.idempotency_key = ks.idempotency_key AND s.idempotency_key IS NOT NULL)
  AND NOT EXISTS (SELECT 1 FROM work_items w
    WHERE w.workspace = ks.workspace AND w.idempotency_key = ks.idempotency_key AND w.idempotency_key IS NOT NULL)`;

/** A kept key send due to move cold, as the move reads it. */
export interface DueKeySend {
  workspace: string;
  key: string;
  destination: string;
  firstSentAt: number;
  countedFrom: number;
  executionId: string;
  vertexId: string;
}

/**
 * `selectColdDue`: kept (guarded = 1) key sends whose retention counts from `countedBefore` or
 * earlier — past the hot period — and that no kept step holds any more (a step that still holds
 * the key keeps it hot: its retries, a refusal's acknowledgement and the trace read the hot row).
 * Oldest first, through the partial index `destination_key_sends_guarded_age`; the scan is bounded
 * by `scan` index entries, so a head of rows still held costs a bounded read per pass.
 */
export async function selectColdDue(db: D1Database, countedBefore: number, limit: number, scan: number): Promise<DueKeySend[]> {
  const { results } = await db
    .prepare(
      `SELECT ks.workspace, ks.idempotency_key AS key, ks.destination, ks.first_sent_at AS firstSentAt,
              ks.counted_from AS countedFrom, ks.execution_id AS executionId, ks.vertex_id AS vertexId
       FROM (SELECT workspace, idempotency_key, destination FROM destination_key_sends
             WHERE guarded = 1 AND counted_from <= ?1 ORDER BY counted_from LIMIT ?3) head
       JOIN destination_key_sends ks
         ON ks.workspace = head.workspace AND ks.idempotency_key = head.idempotency_key AND ks.destination = head.destination
       WHERE ${HELD_BY_NO_STEP}
       ORDER BY ks.counted_from LIMIT ?2`,
    )
    .bind(countedBefore, limit, scan)
    .all<DueKeySend>();
  return results ?? [];
}

/**
 * `deleteMovedKeySends`: the hot rows of `rows` (bound as one JSON array of [workspace, key,
 * destination]) that are still due — no acknowledgement moved `counted_from` past `countedBefore`
 * and no step took the key meanwhile — for the move's batch, after their cold records were written.
 */
export function deleteMovedKeySends(db: D1Database, rows: ReadonlyArray<readonly [string, string, string]>, countedBefore: number) {
  return db
    .prepare(
      `DELETE FROM destination_key_sends AS ks
       WHERE (workspace, idempotency_key, destination) IN (SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2 FROM json_each(?1) j)
         AND guarded = 1 AND counted_from <= ?2 AND ${HELD_BY_NO_STEP}`,
    )
    .bind(JSON.stringify(rows), countedBefore);
}
