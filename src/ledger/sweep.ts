/**
 * Bounded sweeps: the one shape every retention / cleanup delete in idemflow takes.
 *
 * A sweep is a single `DELETE … WHERE rowid IN (SELECT rowid … LIMIT n)` statement (the key for a
 * WITHOUT ROWID table; SQLite has
 * no `DELETE … LIMIT` on D1), so one call deletes at most `n` rows, holds the write lock for a
 * bounded time, and can run opportunistically after a response or from cron. Callers loop with
 * `sweepInBatches` when they want more than one batch, and always stop at a batch ceiling.
 *
 * Table names and predicates are trusted constants written in src/ledger, never user input.
 */

export interface SweepSpec {
  /** Table to sweep. */
  table: string;
  /** What names one of its rows: `rowid` (the default), or a WITHOUT ROWID table's primary key column. */
  key?: string;
  /** SQL predicate naming the rows that may go, with `?1`, `?2`… bound from `params`. */
  where: string;
  /** Which rows go first, e.g. `expires_at`. Index it. */
  orderBy: string;
}

/** Builds the one-statement bounded delete. The batch size is the last bound parameter. */
function boundedDelete(db: D1Database, spec: SweepSpec, params: unknown[], limit: number): D1PreparedStatement {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`sweep limit must be a positive integer, got ${limit}`);
  const limitParam = `?${params.length + 1}`;
  const key = spec.key ?? "rowid";
  const sql =
    `DELETE FROM ${spec.table} WHERE ${key} IN (` +
    `SELECT ${key} FROM ${spec.table} WHERE ${spec.where} ORDER BY ${spec.orderBy} LIMIT ${limitParam})`;
  return db.prepare(sql).bind(...params, limit);
}

/** Runs one bounded delete and returns how many rows it removed. */
export async function runBoundedDelete(db: D1Database, spec: SweepSpec, params: unknown[], limit: number): Promise<number> {
  const result = await boundedDelete(db, spec, params, limit).run();
  return result.meta.changes ?? 0;
}

export interface SweepReport {
  deleted: number;
  batches: number;
  /** True when the last batch came back short: nothing eligible is left right now. */
  drained: boolean;
}

/**
 * Repeats a one-batch sweep until a batch comes back short or `maxBatches` ran, so a cron tick
 * does bounded work even when a backlog has built up (the next tick continues).
 */
export async function sweepInBatches(
  sweepOnce: (limit: number) => Promise<number>,
  { batchSize, maxBatches }: { batchSize: number; maxBatches: number },
): Promise<SweepReport> {
  let deleted = 0;
  for (let batches = 1; batches <= maxBatches; batches++) {
    const n = await sweepOnce(batchSize);
    deleted += n;
    if (n < batchSize) return { deleted, batches, drained: true };
  }
  return { deleted, batches: maxBatches, drained: false };
}
