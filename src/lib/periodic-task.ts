/**
 * The one shape of every periodic task (each subsystem's `cron.ts` exports one), and how a list of
 * them runs on a cron tick (src/scheduled.ts names the list).
 *
 * A task does its work and returns a report; it does not log the report itself. The runner
 * writes the line the task makes of it, so every task's outcome reaches the log the same way,
 * and the run stays a plain function a test can call and assert on.
 */
import { errorMessage, log, type LogLine } from "./log";

/**
 * What a tick hands every task: the cron string it was delivered for and its scheduled time (the
 * task's clock), and — when cron runs the tasks per shard (src/shards/cron.ts) — the shard, how
 * many shards the tick covers, the D1 queries the tick's allocator gives this shard's unbounded
 * task (the history sweep), and whose schedules may fire on it.
 */
export type Tick = Pick<ScheduledController, "cron" | "scheduledTime"> & {
  shard?: number;
  /** How many shards the tick runs over (each a share of the invocation's 1,000 queries). */
  shards?: number;
  sweepQueries?: number;
  /**
   * Why `workspace`'s schedules must not fire on this shard (placed elsewhere by WORKSPACE_SHARDS,
   * or fenced: src/shards/placement.ts `scheduleRefusal`), or null when they may.
   */
  scheduleRefusal?: (workspace: string) => Promise<string | null>;
};

export interface PeriodicTask<Report> {
  /** Stable: the `task` field of `cron.task_failed`, so a log search finds one task's failures. */
  readonly name: string;
  run(env: Env, tick: Tick, ctx: ExecutionContext): Promise<Report>;
  /** The report's log line, or `null` when the run found nothing to do: an idle minute logs nothing. */
  logLine(report: Report): LogLine | null;
}

/**
 * Thrown by a task that did part of its work and failed the rest (ingress: the identity sweep ran,
 * the schedules did not). The runner logs the report of the part that ran, then the failure.
 */
export class PartialFailure<Report> extends Error {
  constructor(
    readonly report: Report,
    cause: unknown,
  ) {
    super(errorMessage(cause), { cause });
    this.name = "PartialFailure";
  }
}

/** A list holds tasks of different reports; `logLine` is a method, so each still type-checks as one. */
export type AnyPeriodicTask = PeriodicTask<unknown>;

/**
 * Runs every task at once and resolves when all have settled. A task that throws is logged as
 * `cron.task_failed` and stops nothing else: the tasks are independent (a broken schedule must not
 * hold up the sweeps or the reaper), and each retries on the next tick anyway.
 */
export async function runPeriodicTasks(tasks: ReadonlyArray<AnyPeriodicTask>, env: Env, tick: Tick, ctx: ExecutionContext): Promise<void> {
  await Promise.all(tasks.map((task) => runOne(task, env, tick, ctx)));
}

async function runOne(task: AnyPeriodicTask, env: Env, tick: Tick, ctx: ExecutionContext): Promise<void> {
  try {
    log.line(task.logLine(await task.run(env, tick, ctx)));
  } catch (error) {
    if (error instanceof PartialFailure) log.line(task.logLine(error.report));
    log.error("cron.task_failed", {
      task: task.name,
      ...(tick.shard === undefined ? {} : { shard: tick.shard }),
      error: errorMessage(error),
    });
  }
}
