/**
 * The identity sweep: expired rows of `execution_identities` deleted in bounded batches by cron
 * (src/ingress/cron.ts). An expired row is also taken over by the next claim (./identity-claim.ts).
 */
import { runBoundedDelete, sweepInBatches, type SweepReport, type SweepSpec } from "./sweep";

/** Expired identities, oldest first. An expired row is also taken over by a claim; either is fine. */
const EXPIRED_IDENTITIES: SweepSpec = {
  table: "execution_identities",
  key: "identity",
  where: "expires_at <= ?1",
  orderBy: "expires_at",
};

/** One bounded batch of the identity sweep. */
function sweepExpiredIdentitiesOnce(db: D1Database, now: number, limit: number): Promise<number> {
  return runBoundedDelete(db, EXPIRED_IDENTITIES, [now], limit);
}

/** The identity sweep: bounded batches until drained or `maxBatches` ran (the next cron tick continues). */
export function sweepExpiredIdentities(db: D1Database, now: number, opts = { batchSize: 500, maxBatches: 40 }): Promise<SweepReport> {
  return sweepInBatches((limit) => sweepExpiredIdentitiesOnce(db, now, limit), opts);
}
