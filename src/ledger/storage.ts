/**
 * The database's storage figures (SPEC section 12, "Size"): its size, its limit, the executions it
 * retains and the bytes each takes on average. One cheap statement: the counter row
 * `history_counters('executions')` (migrations/0017, kept equal to the number of `executions` rows
 * by two triggers — never a `count(*)` scan), whose D1 result carries `meta.size_after`, the
 * database's size in bytes after the statement.
 *
 * The figures describe the whole database, every workspace in it: the HTTP layer serves them to an
 * operator token only (src/http/routes/operator.ts), never to a workspace token.
 *
 * What `size_after` counts: the database's pages in use. Locally (wrangler dev, the test pool)
 * workerd computes it as (page_count − freelist_count) × page_size, so the figure falls when rows
 * are deleted, while the SQLite file under .wrangler/state never shrinks (nothing vacuums it: the
 * freed pages stay in the file for reuse), so the file on disk only grows. Production D1 reclaims
 * the space.
 */

/**
 * D1's maximum database size on Workers Paid: "10 GB", which cannot be increased
 * (https://developers.cloudflare.com/d1/platform/limits/). The page does not define "GB"; it
 * writes its other sizes in decimal units ("2,000,000 bytes (2 MB)", "100,000 bytes (100 KB)"), so
 * 10 GB is read as 10 × 10^9 bytes. It is also the safe reading: it is the smaller of the two
 * (10 × 2^30 = 10,737,418,240), so `usedFraction` can only be overstated (by at most 7.4 %) and
 * the 80 % warning fires early, never late.
 */
export const D1_MAX_DATABASE_BYTES = 10_000_000_000;

/** The fraction of the limit at and above which the figures are `storage.high` (a warn log line). */
export const STORAGE_HIGH_FRACTION = 0.8;

export interface StorageFigures {
  /** The database's size in bytes (D1's `meta.size_after`). */
  sizeBytes: number;
  /** D1's maximum database size in bytes (`D1_MAX_DATABASE_BYTES`). */
  limitBytes: number;
  /** The rows of `executions`, from the counter the triggers keep. */
  executionsRetained: number;
  /**
   * `sizeBytes / executionsRetained`, rounded to a byte; `null` with no execution retained. The whole database is spread over
   * the executions: indexes, workflows, the schema itself.
   */
  bytesPerExecution: number | null;
  /** `sizeBytes / limitBytes`. */
  usedFraction: number;
}

/** Reads the figures: one statement (binds nothing), one row read. */
export async function readStorage(db: D1Database): Promise<StorageFigures> {
  const result = await db.prepare("SELECT value FROM history_counters WHERE name = 'executions'").all<{ value: number }>();
  // The row is written by migrations/0017 and never deleted; its absence means the migration has not run.
  const row = result.results[0];
  if (!row) throw new Error("history_counters has no 'executions' row: apply migrations/0017_history.sql");
  const sizeBytes = result.meta.size_after;
  const executionsRetained = row.value;
  return {
    sizeBytes,
    limitBytes: D1_MAX_DATABASE_BYTES,
    executionsRetained,
    bytesPerExecution: executionsRetained > 0 ? Math.round(sizeBytes / executionsRetained) : null,
    usedFraction: sizeBytes / D1_MAX_DATABASE_BYTES,
  };
}
