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
 * A tick walks `identityWalk` stretches.
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

/** Claims read per stretch: one statement finds the stretch's end, one deletes in it. */
const STRETCH = 5000;

/**
 * A tick's walk on one of `shards` shards: 4 stretches of 5,000 claims on one shard (9 queries,
 * 20,000 claims), fewer per shard the more shards share the tick's 1,000 queries (src/shards/cron.ts)
 * — 2 on two or three, 1 from four on (3 queries a shard). Each shard holds its own workspaces' claims, so
 * the claims walked a tick stay about 20,000 in all, or 5,000 a shard past four.
 */
export function identityWalk(shards: number): { batchSize: number; maxBatches: number } {
  return { batchSize: STRETCH, maxBatches: Math.max(1, Math.ceil(4 / Math.max(1, shards))) };
}

/**
 * The identity sweep: up to `maxBatches` stretches of `batchSize` claims from where the walk
 * stopped; it stops early when the walk reaches the last key (`drained`: every claim was looked at
 * since the walk began — the next tick begins another).
 */
export async function sweepExpiredIdentities(db: D1Database, now: number, opts = identityWalk(1)): Promise<SweepReport> {
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
