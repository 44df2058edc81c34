/**
 * The database's storage figures (SPEC section 12, "Size"): its size, its limit, the executions it
 * retains and the bytes each takes on average. One cheap statement: the counter rows
 * `history_counters('executions', 'executions_counted_at')`, whose D1 result carries
 * `meta.size_after`, the database's size in bytes after the statement. The count is the storage
 * task's, at most `EXECUTIONS_RECOUNT_MS` old (`recountExecutions`, migrations/0024): a trigger kept
 * it exact before, at the price of a row written on every execution's insert and removal.
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
  /** The rows of `executions` when the storage task last counted them (`executionsCountedAt`). */
  executionsRetained: number;
  /** When that was (ms since the epoch); null before the first count after migrations/0024. */
  executionsCountedAt: number | null;
  /**
   * `sizeBytes / executionsRetained`, rounded to a byte; `null` with no execution retained. The whole database is spread over
   * the executions: indexes, workflows, the schema itself.
   */
  bytesPerExecution: number | null;
  /** `sizeBytes / limitBytes`. */
  usedFraction: number;
}

/** How old the count of executions may get before the storage task counts again. */
export const EXECUTIONS_RECOUNT_MS = 60 * 60_000;

interface CounterRow {
  name: string;
  value: number;
}

function figuresOf(rows: readonly CounterRow[], sizeBytes: number): StorageFigures {
  const value = (name: string) => rows.find((r) => r.name === name)?.value;
  const executionsRetained = value("executions");
  // Written by migrations/0017 and 0024 and never deleted: absent means a migration has not run.
  if (executionsRetained === undefined) throw new Error("history_counters has no 'executions' row: apply migrations/0017_history.sql");
  const countedAt = value("executions_counted_at") ?? 0;
  return {
    sizeBytes,
    limitBytes: D1_MAX_DATABASE_BYTES,
    executionsRetained,
    executionsCountedAt: countedAt > 0 ? countedAt : null,
    bytesPerExecution: executionsRetained > 0 ? Math.round(sizeBytes / executionsRetained) : null,
    usedFraction: sizeBytes / D1_MAX_DATABASE_BYTES,
  };
}

/** Reads the figures: one statement (binds nothing), two rows read. */
export async function readStorage(db: D1Database): Promise<StorageFigures> {
  const result = await db
    .prepare("SELECT name, value FROM history_counters WHERE name IN ('executions', 'executions_counted_at')")
    .all<CounterRow>();
  return figuresOf(result.results, result.meta.size_after);
}

/** The figures' count is older than `EXECUTIONS_RECOUNT_MS` (or was never taken): time to count again. */
export const recountDue = (figures: StorageFigures, now: number): boolean =>
  figures.executionsCountedAt === null || now - figures.executionsCountedAt >= EXECUTIONS_RECOUNT_MS;

/**
 * `recountExecutions`: counts the rows of `executions` and stores the count with its time, in ONE
 * statement, RETURNING the figures as they now are. `count(*)` walks the table's smallest index:
 * rows read, one per execution (a million executions: $0.001 at D1's price), never a row written
 * per execution. Run by the storage task at most every `EXECUTIONS_RECOUNT_MS`.
 */
export async function recountExecutions(db: D1Database, now: number): Promise<StorageFigures> {
  const result = await db
    .prepare(
      `UPDATE history_counters
         SET value = CASE name WHEN 'executions' THEN (SELECT count(*) FROM executions) ELSE ?1 END
       WHERE name IN ('executions', 'executions_counted_at')
       RETURNING name, value`,
    )
    .bind(now)
    .all<CounterRow>();
  return figuresOf(result.results, result.meta.size_after);
}
