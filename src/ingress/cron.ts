/** Cron entry of ingress: start the workflows scheduled on this cron, then sweep expired identities. */
import { sweepExpiredIdentities } from "../ledger";
import { fireSchedules, type ScheduleReport } from "./schedule";
import { ingressDeps, type IngressDeps } from "./start";
import { errorMessage, log } from "../lib/log";

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
  if (schedules.status === "rejected") log.error("cron.schedules_failed", { cron: controller.cron, error: errorMessage(schedules.reason) });
  if (sweep.status === "rejected") log.error("cron.identity_sweep_failed", { cron: controller.cron, error: errorMessage(sweep.reason) });
  const report: ScheduleReport =
    schedules.status === "fulfilled"
      ? schedules.value
      : { scheduledAt: controller.scheduledTime, recorded: 0, started: [], failed: [], skipped: 0, expired: 0 };
  const deleted = sweep.status === "fulfilled" ? sweep.value.deleted : 0;
  if (report.started.length > 0 || report.failed.length > 0 || report.expired > 0 || deleted > 0) {
    log.info("cron.ingress_report", {
      cron: controller.cron,
      started: report.started.filter((s) => !s.deduplicated).length,
      duplicateTicks: report.started.filter((s) => s.deduplicated).length,
      failed: report.failed.length, // retried next tick
      skipped: report.skipped,
      expired: report.expired,
      identitiesSwept: deleted,
      identitiesDrained: sweep.status === "fulfilled" ? sweep.value.drained : false,
    });
  }
  if (schedules.status === "rejected") throw schedules.reason;
}
