/** Cron entry of ingress: start the workflows scheduled on this cron, then sweep expired identities. */
import { sweepExpiredIdentities } from "../ledger/executions";
import { fireSchedules, type ScheduleReport } from "./schedule";
import { ingressDeps, type IngressDeps } from "./start";

export async function ingressCron(
  controller: ScheduledController,
  env: Env,
  _ctx: ExecutionContext,
  deps: IngressDeps = ingressDeps(env),
): Promise<void> {
  // Independent jobs: a failing schedule listing must not stop the sweep, nor the reverse.
  const [schedules, sweep] = await Promise.allSettled([
    fireSchedules(deps, controller.cron, controller.scheduledTime),
    sweepExpiredIdentities(deps.db, deps.now()),
  ]);
  if (schedules.status === "rejected") console.error(`ingress cron ${controller.cron}: schedules failed`, String(schedules.reason));
  if (sweep.status === "rejected") console.error(`ingress cron ${controller.cron}: identity sweep failed`, String(sweep.reason));
  const report: ScheduleReport =
    schedules.status === "fulfilled"
      ? schedules.value
      : { scheduledAt: controller.scheduledTime, recorded: 0, started: [], failed: [], skipped: 0, expired: 0 };
  const deleted = sweep.status === "fulfilled" ? sweep.value.deleted : 0;
  if (report.started.length > 0 || report.failed.length > 0 || report.expired > 0 || deleted > 0) {
    console.log(
      `ingress cron ${controller.cron}: ${report.started.filter((s) => !s.deduplicated).length} started, ` +
        `${report.started.filter((s) => s.deduplicated).length} duplicate ticks, ${report.failed.length} failed (retried next tick), ` +
        `${report.skipped} skipped, ${report.expired} expired; ` +
        `${deleted} expired identities swept${sweep.status === "fulfilled" && !sweep.value.drained ? " (more remain)" : ""}`,
    );
  }
  if (schedules.status === "rejected") throw schedules.reason;
}
