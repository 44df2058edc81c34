/**
 * Cron: the periodic tasks, one per subsystem (the stats rollup among them), run on every tick by src/lib/periodic-task.ts
 * (independently: one failing does not stop the others), on every shard in turn within one
 * budget (src/shards/cron.ts).
 */
import { historyTask } from "./history/cron";
import { storageTask } from "./history/storage-task";
import { idempotencySweepTask } from "./http/idempotency/cron";
import { ingressTask } from "./ingress/cron";
import { reaperTask, wakeTask } from "./steps/cron";
import type { AnyPeriodicTask } from "./lib/periodic-task";
import { placementAuditTask } from "./shards/audit";
import { runOnEveryShard } from "./shards/cron";
import { statsRollupTask } from "./stats/rollup-task";
import { notificationsTask } from "./notifications/cron";
import { tickTimeOf } from "./lib/clock";

export const PERIODIC_TASKS: ReadonlyArray<AnyPeriodicTask> = [
  idempotencySweepTask,
  ingressTask,
  reaperTask,
  wakeTask,
  historyTask,
  storageTask,
  placementAuditTask,
  statsRollupTask,
  notificationsTask,
];

export async function runScheduled(controller: ScheduledController, env: Env, ctx: ExecutionContext): Promise<void> {
  await runOnEveryShard(PERIODIC_TASKS, env, { cron: controller.cron, scheduledTime: tickTimeOf(env, controller.scheduledTime) }, ctx);
}
