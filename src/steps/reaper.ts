/**
 * The reaper: heals what a crash or a lost message left behind, in bounded sweeps.
 * - EXECUTING steps whose lease expired (worker presumed dead) go back to DISPATCHED and are re-sent;
 * - DISPATCHED steps overdue by `overdueMs` (their message was lost after the commit, or
 *   dead-lettered) are re-sent, backing off per step: after the n-th re-send the next waits
 *   `min(overdueMs · 2^n, maxResendWaitMs)` (a message stuck in a backlog is not joined by one
 *   more every sweep).
 * A re-sent message for a step that is in fact fine costs one claim attempt that misses.
 * MAP items (docs/steps.md "MAP") get the same two sweeps over their rows, re-sent as item messages.
 */
import {
  DEFAULT_MAX_RESEND_WAIT_MS,
  redispatchExpiredItemLeases,
  redispatchExpiredLeases,
  redispatchOverdue,
  redispatchOverdueItems,
} from "../ledger";
import { sendItemMessages, sendStepMessages } from "./dispatch";
import { sendUndoMessages } from "./compensate";
import type { StepRuntime } from "./runtime";
import { errorMessage, log, type LogLine } from "../lib/log";
import { shardOfEnv } from "../shards/shard-env";

export interface ReapReport {
  expiredLeases: number;
  overdue: number;
}

export async function reap(rt: StepRuntime): Promise<ReapReport> {
  const now = rt.now();
  const expired = await redispatchExpiredLeases(rt.db, now, rt.reapLimit);
  const overdue = await redispatchOverdue(rt.db, now, rt.overdueMs, rt.reapLimit, rt.maxResendWaitMs);
  const expiredItems = await redispatchExpiredItemLeases(rt.db, now, rt.reapLimit);
  const overdueItems = await redispatchOverdueItems(
    rt.db,
    now,
    rt.overdueMs,
    rt.reapLimit,
    rt.maxResendWaitMs ?? DEFAULT_MAX_RESEND_WAIT_MS,
  );
  await sendStepMessages(rt.queue, [...expired, ...overdue]);
  // The item rows are a MAP's items and a compensation's undo steps (docs/steps.md "Compensation"): each its own message.
  const recovered = [...expiredItems, ...overdueItems];
  await sendItemMessages(
    rt.queue,
    recovered.filter((r) => r.kind !== "undo"),
  );
  await sendUndoMessages(
    rt.queue,
    recovered.filter((r) => r.kind === "undo").map((r) => ({ executionId: r.executionId, vertexId: r.vertexId, place: r.item })),
  );
  return { expiredLeases: expired.length + expiredItems.length, overdue: overdue.length + overdueItems.length };
}

/** A reap that re-sent anything is a warning (something crashed or lost a message); an idle one logs nothing. */
export function reapLogLine(report: ReapReport): LogLine | null {
  if (report.expiredLeases + report.overdue === 0) return null;
  return { level: "warn", event: "reaper.redispatched", fields: { expiredLeases: report.expiredLeases, overdue: report.overdue } };
}

/** When this isolate last reaped each shard opportunistically: a busy shard's batches must not use up a quiet one's turn. */
const lastOpportunisticReap = new Map<number, number>();

/** After a queue batch: reap its shard at most every `reapEveryMs` per isolate (cron is the guaranteed cadence). */
export function maybeReap(rt: StepRuntime, ctx: ExecutionContext): void {
  if (rt.reapEveryMs === null) return;
  const now = rt.now();
  const shard = shardOfEnv(rt.env);
  if (now - (lastOpportunisticReap.get(shard) ?? 0) < rt.reapEveryMs) return;
  lastOpportunisticReap.set(shard, now);
  ctx.waitUntil(
    reap(rt).then(
      (report) => log.line(reapLogLine(report)),
      (error: unknown) => log.error("reaper.failed", { message: "opportunistic reap failed", error: errorMessage(error) }),
    ),
  );
}
