/**
 * The fenced writes of a claimed `work_items` row during its run — a MAP's item or an undo step
 * (./map-items.ts, ./undo-steps.ts): the step's own statements (key persist, first send, heartbeat,
 * counted retry, "in progress" re-check) over the row source `ITEM_ROWS`. The fence names the row by
 * its row key where a step's names its vertex (`itemKeyFence`, `undoKeyFence`); a false or null
 * answer is a fenced-out write, as for a step.
 */
import { recordKeySend, type KeyGuard, type KeySend } from "./key-sends";
import { extendLease } from "./step-claim";
import { persistIdempotencyKey, type PersistedKey } from "./step-key";
import { scheduleInProgressRecheck, scheduleRetry, type RetryInput, type ScheduledRetry } from "./step-schedule";
import type { Fence } from "./step-sql";
import { ITEM_ROWS } from "./work-rows";

/** The key on the row (its attempt's row, written at its end, reads it there), with its first send. Null: fenced out. */
export function persistRowKey(
  db: D1Database,
  fence: Fence,
  key: string,
  now: number,
  destination: string,
  guarded: KeyGuard,
): Promise<PersistedKey | null> {
  return persistIdempotencyKey(db, fence, key, now, destination, guarded, ITEM_ROWS);
}

/** A persisted key's first send to a destination not on record yet. */
export function recordRowKeySend(
  db: D1Database,
  fence: Fence,
  at: number,
  destination: string,
  guarded: KeyGuard,
): Promise<KeySend | null> {
  return recordKeySend(db, fence, at, destination, guarded, ITEM_ROWS);
}

/** The fenced heartbeat of the row's long call. */
export function extendRowLease(db: D1Database, fence: Fence, now: number, leaseMs: number): Promise<boolean> {
  return extendLease(db, fence, now, leaseMs, ITEM_ROWS);
}

/** The counted retry. False: fenced out. */
export function scheduleRowRetry(db: D1Database, fence: Fence, r: ScheduledRetry): Promise<boolean> {
  return scheduleRetry(db, fence, r, ITEM_ROWS);
}

/** The destination said "in progress" (or a wait): asked again later, not counted. False: fenced out. */
export function scheduleRowInProgressRecheck(
  db: D1Database,
  fence: Fence,
  r: Omit<RetryInput, "error"> & { attempt: number; detail: string },
): Promise<boolean> {
  return scheduleInProgressRecheck(db, fence, r, ITEM_ROWS);
}
