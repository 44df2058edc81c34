/**
 * The periodic task of the storage figures (SPEC section 12, "Size"): on every tick it reads the
 * database's size (one statement: src/ledger `readStorage`), counts the executions again when the
 * count is an hour old (`recountExecutions`, one more statement), and, at or above 80 % of D1's limit
 * (`STORAGE_HIGH_FRACTION`), the runner writes `storage.high` at warn level; below, nothing.
 *
 * `storageHighLine` is the one place the line is decided: `GET /v1/operator/storage`
 * (src/http/routes/operator.ts) writes the same line when an operator's read finds the database
 * that full.
 */
import { readStorage, recountDue, recountExecutions, STORAGE_HIGH_FRACTION, type StorageFigures } from "../ledger";
import type { LogLine } from "../lib/log";
import type { PeriodicTask } from "../lib/periodic-task";
import { shardOfEnv } from "../shards/shard-env";

/** Who read the figures: the cron task or an operator's request. */
export type StorageReader = "cron" | "operator";

/** `storage.high` (warn) when the shard's database uses at least 80 % of its limit; `null` below. */
export function storageHighLine(figures: StorageFigures, trigger: StorageReader, shard = 0): LogLine | null {
  if (!(figures.usedFraction >= STORAGE_HIGH_FRACTION)) return null;
  const percent = Math.floor(figures.usedFraction * 1000) / 10;
  return {
    level: "warn",
    event: "storage.high",
    fields: {
      trigger,
      shard,
      sizeBytes: figures.sizeBytes,
      limitBytes: figures.limitBytes,
      usedFraction: figures.usedFraction,
      executionsRetained: figures.executionsRetained,
      bytesPerExecution: figures.bytesPerExecution,
      message: `the database uses ${percent} % of D1's limit; every write fails when it is full (shorten retention, or move workspaces)`,
    },
  };
}

export const storageTask: PeriodicTask<StorageFigures & { shard: number }> = {
  name: "storage figures",
  run: async (env, tick) => {
    const figures = await readStorage(env.DB);
    const fresh = recountDue(figures, tick.scheduledTime) ? await recountExecutions(env.DB, tick.scheduledTime) : figures;
    return { ...fresh, shard: shardOfEnv(env) };
  },
  logLine: (figures) => storageHighLine(figures, "cron", figures.shard),
};
