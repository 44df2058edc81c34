/**
 * The periodic task of the Idempotency-Key middleware: the retention sweep, drained in bounded batches.
 *
 * Retention is stored per row (`expires_at`, written from the middleware's `retentionMs`), so
 * the sweep needs no window of its own: the advertised window and the swept window are the
 * same setting by construction.
 */
import { sweepIdempotencyKeys, sweepInBatches, type SweepReport } from "../../ledger";
import type { PeriodicTask } from "../../lib/periodic-task";

export const CRON_SWEEP = { batchSize: 500, maxBatches: 20 } as const;

/** One cron's worth of sweeping at `now`; the batch bounds are parameters so a test can hit the ceiling. */
export async function ledgerCron(
  env: Env,
  now: number,
  {
    db = env.DB,
    batchSize = CRON_SWEEP.batchSize,
    maxBatches = CRON_SWEEP.maxBatches,
  }: { db?: D1Database; batchSize?: number; maxBatches?: number } = {},
): Promise<SweepReport> {
  return sweepInBatches((limit) => sweepIdempotencyKeys(db, now, limit), { batchSize, maxBatches });
}

export const idempotencySweepTask: PeriodicTask<SweepReport> = {
  name: "ledger sweep",
  run: (env, tick) => ledgerCron(env, tick.scheduledTime),
  logLine: ({ deleted, batches, drained }) =>
    deleted > 0 || !drained ? { level: "info", event: "idempotency.swept", fields: { trigger: "cron", deleted, batches, drained } } : null,
};
