/**
 * Scheduled starts. An ENTRY_POINT with `schedule` is started by the cron handler for every tick
 * of that cron string. The identity material is `[cron, scheduled minute]` (kind `schedule`; the
 * minute from src/ingress/tick.ts), so the same tick delivered twice (Cron Triggers are
 * at-least-once), also with a later timestamp, is one execution, and every tick is a new one. The
 * cron string must be listed in wrangler.toml `[triggers] crons`, or the Worker is never invoked
 * with it.
 *
 * At scale a tick does not start everything at once:
 * 1. the tick is recorded as one PENDING run per workflow on this cron (one INSERT … SELECT that
 *    reads only this cron's workflows);
 * 2. up to `SCHEDULE_STARTS_PER_TICK` open runs — of any cron and any recent minute — are claimed
 *    and started; what does not fit is left PENDING for the next invocation (the every-minute
 *    cron drains the backlog of a daily one);
 * 3. a start that throws leaves its run FAILED with the error (GET /v1/workflows/{id} shows it)
 *    and it is claimed again by later invocations while its minute is recent
 *    (`SCHEDULE_RECENT_MS`); then it is EXPIRED. A retried start is idempotent: its identity is
 *    the tick's, so a start that did commit before the failure is found, not repeated.
 */
import type { WorkflowDefinition } from "../definitions/schema";
import type { StoredWorkflow } from "../definitions/store";
import { claimScheduleRuns, finishScheduleRuns, recordTick, type ClaimedScheduleRun, type ScheduleRunOutcome } from "../ledger";
import { startWorkflowExecution, type IngressDeps, type StartResult } from "./start";
import { scheduledMinute } from "./tick";
import { isoTime } from "../lib/iso-time";
import { errorMessage, log } from "../lib/log";

/** Starts per cron invocation; the rest wait for the next one (documented in docs/ingress.md). */
export const SCHEDULE_STARTS_PER_TICK = 50;
/** A scheduled minute is retried / caught up for this long; after it, its open runs expire. */
export const SCHEDULE_RECENT_MS = 60 * 60_000;
/** Scheduled runs are kept this long for operators, then deleted. */
export const SCHEDULE_RUN_RETENTION_MS = 24 * 60 * 60_000;
/** An invocation that dies mid-start holds its claimed runs this long. */
const CLAIM_LEASE_MS = 60_000;
/** Starts in flight at once within one invocation. */
const START_CONCURRENCY = 10;
/** Rows per housekeeping sweep (expiry, retention). */
const SWEEP_LIMIT = 500;

export interface ScheduleOptions {
  startsPerTick?: number;
  /**
   * Why `workspace`'s schedules must not fire on this tick's shard, or null when they may
   * (src/shards/placement.ts `scheduleRefusal`). A run of a workspace placed elsewhere, or fenced
   * (the map moved it, the record did not: a move under way), is skipped with the reason, never
   * started here: the map and the placement record, not leftover or copied rows, decide where a
   * workspace's schedules fire. A refusal that throws (a database error) fails the run: retried.
   */
  scheduleRefusal?: (workspace: string) => Promise<string | null>;
}

export interface ScheduleReport {
  /** The tick's scheduled minute (ms). */
  scheduledAt: number;
  /** Runs this delivery recorded (0 for a redelivered tick). */
  recorded: number;
  started: StartResult[];
  failed: Array<{ workspace: string; workflowId: string; scheduledAt: number; error: string }>;
  skipped: number;
  expired: number;
}

export async function fireSchedules(
  deps: IngressDeps,
  cron: string,
  scheduledTime: number,
  options: ScheduleOptions = {},
): Promise<ScheduleReport> {
  const now = deps.now();
  const scheduledAt = scheduledMinute(cron, scheduledTime);
  const recorded = await recordTick(deps.db, cron, scheduledAt, now);
  // Recent relative to the tick as well as the clock, so a replayed old tick still starts.
  const reference = Math.min(now, scheduledAt);
  const since = reference - SCHEDULE_RECENT_MS;
  const claimed = await claimScheduleRuns(deps.db, {
    now,
    since,
    leaseMs: CLAIM_LEASE_MS,
    limit: options.startsPerTick ?? SCHEDULE_STARTS_PER_TICK,
  });

  const report: ScheduleReport = { scheduledAt, recorded, started: [], failed: [], skipped: 0, expired: 0 };
  const outcomes: ScheduleRunOutcome[] = [];
  for (let i = 0; i < claimed.length; i += START_CONCURRENCY) {
    const chunk = claimed.slice(i, i + START_CONCURRENCY);
    outcomes.push(...(await Promise.all(chunk.map((run) => startRun(deps, run, report, options.scheduleRefusal)))));
  }
  const swept = await finishScheduleRuns(deps.db, outcomes, {
    now,
    since,
    keepAfter: reference - SCHEDULE_RUN_RETENTION_MS,
    limit: SWEEP_LIMIT,
  });
  report.expired = swept.expired;
  return report;
}

/** Start one claimed run; never throws (one workflow failing must not stop the others' ticks). */
async function startRun(
  deps: IngressDeps,
  run: ClaimedScheduleRun,
  report: ScheduleReport,
  scheduleRefusal?: (workspace: string) => Promise<string | null>,
): Promise<ScheduleRunOutcome> {
  if (!run.workflow) {
    report.skipped++;
    return { rowid: run.rowid, status: "SKIPPED", error: `the workflow no longer has the schedule "${run.cron}"` };
  }
  const workflow: StoredWorkflow = {
    workspace: run.workspace,
    workflowId: run.workflowId,
    version: run.workflow.version,
    // Stored definitions passed validation when saved; they are parsed, not re-validated.
    definition: JSON.parse(run.workflow.definition) as WorkflowDefinition,
    createdAt: run.workflow.createdAt,
  };
  try {
    const refused = scheduleRefusal ? await scheduleRefusal(run.workspace) : null;
    if (refused !== null) {
      report.skipped++;
      return { rowid: run.rowid, status: "SKIPPED", error: refused };
    }
    const result = await startWorkflowExecution(deps, {
      workflow,
      triggerKind: "schedule",
      payload: { cron: run.cron, scheduledTime: isoTime(run.scheduledAt) },
      identity: { kind: "schedule", material: [run.cron, run.scheduledAt], scope: "production" },
    });
    report.started.push(result);
    return { rowid: run.rowid, status: "STARTED", executionId: result.executionId };
  } catch (reason) {
    const error = errorMessage(reason);
    log.error("schedule.start_failed", {
      workspace: run.workspace,
      workflowId: run.workflowId,
      cron: run.cron,
      scheduledAt: isoTime(run.scheduledAt),
      attempt: run.attempts,
      error,
    });
    report.failed.push({ workspace: run.workspace, workflowId: run.workflowId, scheduledAt: run.scheduledAt, error });
    return { rowid: run.rowid, status: "FAILED", error };
  }
}
