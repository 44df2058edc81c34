/**
 * Cron: the periodic tasks, one per subsystem, run on every tick by src/lib/periodic-task.ts
 * (independently: one failing does not stop the others).
 */
import { historyTask } from "./history/cron";
import { storageTask } from "./history/storage-task";
import { idempotencySweepTask } from "./http/idempotency/cron";
import { ingressTask } from "./ingress/cron";
import { reaperTask } from "./steps/cron";
import { runPeriodicTasks, type AnyPeriodicTask } from "./lib/periodic-task";

export const PERIODIC_TASKS: ReadonlyArray<AnyPeriodicTask> = [idempotencySweepTask, ingressTask, reaperTask, historyTask, storageTask];

export async function runScheduled(controller: ScheduledController, env: Env, ctx: ExecutionContext): Promise<void> {
  await runPeriodicTasks(PERIODIC_TASKS, env, controller, ctx);
}
