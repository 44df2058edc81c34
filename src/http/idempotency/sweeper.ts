/**
 * The opportunistic retention sweep: one bounded batch, run after a response via
 * `ctx.waitUntil`, at most once per `intervalMs` per middleware instance and database in an isolate.
 *
 * Why this cadence and not every request: rows are only created by first executions, so a
 * sweep per request would mostly find nothing and still cost a write transaction. One batch
 * per interval per isolate keeps up with any isolate that creates fewer than `batchSize` keys
 * per interval; cron (src/http/idempotency/cron.ts) drains the rest every minute.
 */
import { sweepIdempotencyKeys } from "../../ledger";
import { errorMessage, log } from "../../lib/log";

export type WaitUntil = (promise: Promise<unknown>) => void;

export function createSweeper(config: false | { batchSize: number; intervalMs: number }) {
  // One interval per database (a deployment on several shards gives each its own: a busy shard's
  // writes must not use up a quiet one's turn). A binding is one object per isolate.
  const lastSweepAt = new WeakMap<D1Database, number>();
  /** Schedules a sweep if one is due. Returns whether it did. Never on the request path. */
  return function maybeSweep(db: D1Database, now: number, waitUntil: WaitUntil | undefined): boolean {
    if (config === false || waitUntil === undefined) return false;
    // The first write an instance sees on a database starts its interval: a cold isolate does not sweep at once.
    const last = lastSweepAt.get(db);
    if (last === undefined) {
      lastSweepAt.set(db, now);
      return false;
    }
    if (now - last < config.intervalMs) return false;
    lastSweepAt.set(db, now);
    waitUntil(
      sweepIdempotencyKeys(db, now, config.batchSize).then(
        (deleted) => {
          if (deleted > 0) log.info("idempotency.swept", { trigger: "opportunistic", deleted });
        },
        (error: unknown) => log.error("idempotency.sweep_failed", { trigger: "opportunistic", error: errorMessage(error) }),
      ),
    );
    return true;
  };
}
