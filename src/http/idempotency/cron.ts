/**
 * Cron entry of the Idempotency-Key middleware: the retention sweep, drained in bounded batches.
 *
 * Retention is stored per row (`expires_at`, written from the middleware's `retentionMs`), so
 * the sweep needs no window of its own: the advertised window and the swept window are the
 * same setting by construction.
 */
import { sweepIdempotencyKeys, sweepInBatches, type SweepReport } from "../../ledger";
import { log } from "../../lib/log";

export const CRON_SWEEP = { batchSize: 500, maxBatches: 20 } as const;

export async function ledgerCron(
  env: Env,
  now: number,
  {
    db = env.DB,
    batchSize = CRON_SWEEP.batchSize,
    maxBatches = CRON_SWEEP.maxBatches,
  }: { db?: D1Database; batchSize?: number; maxBatches?: number } = {},
): Promise<SweepReport> {
  const report = await sweepInBatches((limit) => sweepIdempotencyKeys(db, now, limit), { batchSize, maxBatches });
  if (report.deleted > 0 || !report.drained) {
    log.info("idempotency.swept", { trigger: "cron", deleted: report.deleted, batches: report.batches, drained: report.drained });
  }
  return report;
}
