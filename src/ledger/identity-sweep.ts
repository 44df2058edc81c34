/**
 * The identity sweep: expired rows of `execution_identities` deleted by cron (src/ingress/cron.ts).
 * An expired row is also taken over by the next claim (./identity-claim.ts): the claim tests
 * `expires_at` itself, so when a row is deleted changes nothing but the table's size.
 *
 * Since migrations/0046 the sweep has no index by expiry (one row written less per execution): it
 * walks the claims in key order, a bounded stretch per batch, from where its last tick stopped (the
 * `sweep_cursors` row 'identities'), and deletes the expired claims of each stretch; at the last key
 * the walk starts over. The identity is a SHA-256 in hex, so every claim is looked at once per walk,
 * and a walk takes (claims ÷ the claims a tick reads) ticks: an expired claim stays at most that long.
 * Cost: rows read, not written — each batch reads its stretch twice (finding its end, deleting in it).
 */
import type { SweepReport } from "./sweep";

const CURSOR = "identities";

/** The walk's position: the last key looked at, '' at the start of a walk. */
async function readPosition(db: D1Database): Promise<string> {
  const row = await db.prepare("SELECT position FROM sweep_cursors WHERE name = ?1").bind(CURSOR).first<{ position: string }>();
  return row?.position ?? "";
}

/**
 * One batch: the next `limit` claims after `position` in key order, the expired ones among them
 * deleted and the position moved to the last of them — or back to '' when the stretch reached the
 * last key (fewer than `limit` left). Returns what it deleted and where the walk is.
 */
async function sweepStretch(
  db: D1Database,
  position: string,
  now: number,
  limit: number,
): Promise<{ deleted: number; position: string; wrapped: boolean }> {
  const stretch = await db
    .prepare(
      `SELECT max(identity) AS last, count(*) AS n
       FROM (SELECT identity FROM execution_identities WHERE identity > ?1 ORDER BY identity LIMIT ?2)`,
    )
    .bind(position, limit)
    .first<{ last: string | null; n: number }>();
  const wrapped = (stretch?.n ?? 0) < limit;
  const next = wrapped ? "" : stretch!.last!;
  const [deleted] = await db.batch([
    db
      .prepare("DELETE FROM execution_identities WHERE identity > ?1 AND identity <= ?2 AND expires_at <= ?3")
      .bind(position, stretch?.last ?? position, now),
    db
      .prepare(
        `INSERT INTO sweep_cursors (name, position, walk_started_at, updated_at) VALUES (?1, ?2, iif(?2 = '', ?3, NULL), ?3)
         ON CONFLICT (name) DO UPDATE SET position = excluded.position,
           walk_started_at = coalesce(excluded.walk_started_at, walk_started_at), updated_at = excluded.updated_at`,
      )
      .bind(CURSOR, next, now),
  ]);
  return { deleted: deleted!.meta.changes ?? 0, position: next, wrapped };
}

/**
 * The identity sweep: up to `maxBatches` stretches of `batchSize` claims from where the walk
 * stopped; it stops early when the walk reaches the last key (`drained`: every claim was looked at
 * since the walk began — the next tick begins another).
 */
/** A tick's walk: 20 stretches of 1,000 claims (41 queries, well under D1's 1,000 an invocation). */
export const IDENTITY_SWEEP = { batchSize: 1000, maxBatches: 20 };

export async function sweepExpiredIdentities(db: D1Database, now: number, opts = IDENTITY_SWEEP): Promise<SweepReport> {
  if (!Number.isInteger(opts.batchSize) || opts.batchSize < 1) throw new RangeError(`sweep batch size must be a positive integer`);
  let position = await readPosition(db);
  let deleted = 0;
  for (let batches = 1; batches <= opts.maxBatches; batches++) {
    const stretch = await sweepStretch(db, position, now, opts.batchSize);
    deleted += stretch.deleted;
    position = stretch.position;
    if (stretch.wrapped) return { deleted, batches, drained: true };
  }
  return { deleted, batches: opts.maxBatches, drained: false };
}
