/**
 * The destination key's persistence for a step: computed at the first attempt, stored once on
 * the step (or the work item: a MAP item, an undo step; the attempt's row is written at its end,
 * with the row's key: ./attempts.ts), its first send to the destination recorded (./key-sends.ts) — one
 * fenced batch. Every later attempt sends the stored key (the claim returns it).
 *
 * Binds as every worker statement: ?1 execution id, ?2 vertex id, ?3 epoch, ?4 now, then the rest.
 */
import { LabelledBatch } from "./batch";
import { upsertKeySend, type KeyGuard, type KeySend } from "./key-sends";
import { fenceParams, type Fence } from "./step-sql";
import { fenceOn, STEP_ROWS, type RowSource } from "./work-rows";

/** The key a step sends, and when it was first sent to the destination it goes to. */
export interface PersistedKey {
  key: string;
  send: KeySend;
}

/**
 * A step's (an item's) `key_first_send` as its key is written (migrations/0043): 1 when no send of
 * the key to the destination (?6) is on record yet — the send this batch records next names this
 * row, and the key search finds its execution by it, so `steps_by_key` (`work_items_by_key`) holds
 * no entry for it. Only when the key is written now (SET reads the row as it was). One batch is one
 * transaction: no other execution's send comes between.
 */
const firstSend = (rows: RowSource) => `, key_first_send = CASE WHEN idempotency_key IS NULL AND NOT EXISTS (
    SELECT 1 FROM destination_key_sends ks WHERE ks.workspace = ${rows.table}.workspace AND ks.idempotency_key = ?5 AND ks.destination = ?6)
  THEN 1 ELSE key_first_send END`;

/**
 * `persistIdempotencyKey`: store the destination key computed at the first attempt (on the step
 * or the work item) and record its first send to `destination` (the URL's origin) —
 * one batch, fenced. The key is written only if none is stored, so it is written once per step
 * and never changes; the value the row holds is the one to send. The send is recorded only if
 * none is on record for this workspace, key and destination: a start over finds the time of the
 * first execution's send. Null: fenced out.
 */
export async function persistIdempotencyKey(
  db: D1Database,
  fence: Fence,
  key: string,
  now: number,
  destination: string,
  guarded: KeyGuard,
  rows: RowSource = STEP_ROWS,
): Promise<PersistedKey | null> {
  const results = await new LabelledBatch<"key" | "send">(db)
    .add(
      "key",
      db
        .prepare(
          // A key a compensation undid is never persisted again (docs/steps.md "Compensation": burnt keys):
          // nothing is written, the send is not recorded, and the caller fails the step before it sends.
          `UPDATE ${rows.table} SET idempotency_key = coalesce(idempotency_key, ?5), updated_at = ?4${firstSend(rows)}
           WHERE ${fenceOn(rows)}
             AND (idempotency_key IS NOT NULL
                  OR NOT EXISTS (SELECT 1 FROM burnt_keys b WHERE b.workspace = ${rows.table}.workspace AND b.idempotency_key = ?5))
           RETURNING idempotency_key`,
        )
        .bind(...fenceParams(fence), now, key, destination),
    )
    .add("send", upsertKeySend(db, fence, now, destination, guarded, rows))
    .run();
  const stored = results.first<{ idempotency_key: string }>("key");
  const send = results.first<KeySend>("send");
  return stored && send ? { key: stored.idempotency_key, send } : null;
}
