/**
 * Key memory: hot and cold (docs/history.md). The hot rows' side of the cold tier (src/keys): the
 * guard's restore of a cold send onto the step's hot row, and the move's select and delete.
 */
import type { KeySend } from "./key-sends";
import { fenceParams, STEP_FENCE, type Fence } from "./step-sql";

/**
 * `restoreColdSend`: the key's first send on record in the cold tier, copied back onto the step's
 * hot row when that row is younger (written by this step, without the cold record in view) — so
 * every later attempt, a takeover, the trace and an operator's acknowledgement see the first send
 * without asking R2 again. Fenced: a stale worker changes nothing. Returns the hot row as it stands,
 * or null when fenced out. Binds the step fence ?1–?3, ?4 the destination, ?5 first sent, ?6 counted from.
 */
export async function restoreColdSend(db: D1Database, fence: Fence, destination: string, send: KeySend): Promise<KeySend | null> {
  const row = await db
    .prepare(
      `UPDATE destination_key_sends SET first_sent_at = ?5, counted_from = max(?6, ?5)
       WHERE (workspace, idempotency_key) IN
               (SELECT workspace, idempotency_key FROM steps WHERE ${STEP_FENCE} AND idempotency_key IS NOT NULL)
         AND destination = ?4 AND first_sent_at > ?5
       RETURNING first_sent_at AS firstSentAt, counted_from AS countedFrom`,
    )
    .bind(...fenceParams(fence), destination, send.firstSentAt, send.countedFrom)
    .first<KeySend>();
  if (row !== null) return row;
  // Not younger (already restored, or older all along): read it, fenced.
  return db
    .prepare(
      `SELECT ks.first_sent_at AS firstSentAt, ks.counted_from AS countedFrom
       FROM steps s JOIN destination_key_sends ks ON ks.workspace = s.workspace AND ks.idempotency_key = s.idempotency_key
       WHERE s.${STEP_FENCE.replaceAll(" AND ", " AND s.")} AND ks.destination = ?4`,
    )
    .bind(...fenceParams(fence), destination)
    .first<KeySend>();
}

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
       WHERE NOT EXISTS (SELECT 1 FROM steps s
                         WHERE s.workspace = ks.workspace AND s.idempotency_key = ks.idempotency_key AND s.idempotency_key IS NOT NULL)
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
         AND guarded = 1 AND counted_from <= ?2
         AND NOT EXISTS (SELECT 1 FROM steps s
                         WHERE s.workspace = ks.workspace AND s.idempotency_key = ks.idempotency_key AND s.idempotency_key IS NOT NULL)`,
    )
    .bind(JSON.stringify(rows), countedBefore);
}
