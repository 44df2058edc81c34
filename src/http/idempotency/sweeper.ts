/**
 * The opportunistic retention sweep: one bounded batch, run after a response via
 * `ctx.waitUntil`, at most once per `intervalMs` per middleware instance in an isolate.
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
  let lastSweepAt: number | undefined;
  /** Schedules a sweep if one is due. Returns whether it did. Never on the request path. */
  return function maybeSweep(db: D1Database, now: number, waitUntil: WaitUntil | undefined): boolean {
    if (config === false || waitUntil === undefined) return false;
    // The first write an instance sees starts its interval: a cold isolate does not sweep at once.
    if (lastSweepAt === undefined) {
      lastSweepAt = now;
      return false;
    }
    if (now - lastSweepAt < config.intervalMs) return false;
    lastSweepAt = now;
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
