/**
 * The heartbeat of a long step: while a vertex's work runs, its lease is extended, fenced — a
 * long Gateway call keeps its step, and a worker that was taken over learns it (and logs it).
 */
import { extendLease, type Fence } from "../ledger";
import { errorMessage, log } from "../lib/log";
import type { StepRuntime } from "./runtime";

/** The most often a heartbeat writes (a lease is at least three of these: see `MIN_CHAIN_LEASE_MS`). */
export const MIN_HEARTBEAT_MS = 1000;

/**
 * Extend the lease while `work` runs: every third of the lease this claim holds (`leaseMs`: the
 * step lease, or a chained claim's CHAIN_LEASE_MS), by that same lease, so a short chained lease
 * cannot run out before its first heartbeat.
 */
export async function withHeartbeat<T>(
  rt: StepRuntime,
  fence: Fence,
  leaseMs: number,
  work: () => Promise<T>,
  /** The fenced lease extension (default: the step's; a MAP item passes its own). */
  extend: (now: number, leaseMs: number) => Promise<boolean> = (now, ms) => extendLease(rt.db, fence, now, ms),
): Promise<T> {
  const every = rt.heartbeatEveryMs ?? Math.max(MIN_HEARTBEAT_MS, Math.floor(leaseMs / 3));
  if (every === null || every <= 0) return work();
  const timer = setInterval(() => {
    extend(rt.now(), leaseMs)
      .then((ours) => {
        if (!ours) log.warn("step.heartbeat_fenced_out", { message: "the step was taken over", ...fence });
      })
      .catch((error) => log.error("step.heartbeat_failed", { ...fence, error: errorMessage(error) }));
  }, every);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
