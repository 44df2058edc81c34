/** The periodic task of ingress: start the workflows scheduled on this cron, then sweep expired identities. */
import { identityWalk, sweepExpiredIdentities, type SweepReport } from "../ledger";
import { PartialFailure, type PeriodicTask } from "../lib/periodic-task";
import { fireSchedules, type ScheduleReport } from "./schedule";
import { ingressDeps } from "./start";
import { errorMessage, log } from "../lib/log";

export interface IngressCronReport {
  cron: string;
  /** A failed listing reports nothing started (its runs are retried on later ticks). */
  schedules: ScheduleReport;
  /** `null` when the sweep failed. */
  identities: SweepReport | null;
}

export const ingressTask: PeriodicTask<IngressCronReport> = {
  name: "ingress",
  async run(env, tick) {
    const deps = ingressDeps(env);
    // Independent jobs: a failing schedule listing must not stop the sweep, nor the reverse.
    const [schedules, sweep] = await Promise.allSettled([
      fireSchedules(deps, tick.cron, tick.scheduledTime, { scheduleRefusal: tick.scheduleRefusal }),
      sweepExpiredIdentities(deps.db, deps.now(), identityWalk(tick.shards ?? 1)),
    ]);
    if (schedules.status === "rejected") log.error("cron.schedules_failed", { cron: tick.cron, error: errorMessage(schedules.reason) });
    if (sweep.status === "rejected") log.error("cron.identity_sweep_failed", { cron: tick.cron, error: errorMessage(sweep.reason) });
    const report: IngressCronReport = {
      cron: tick.cron,
      schedules:
        schedules.status === "fulfilled"
          ? schedules.value
          : { scheduledAt: tick.scheduledTime, recorded: 0, started: [], failed: [], skipped: 0, expired: 0 },
      identities: sweep.status === "fulfilled" ? sweep.value : null,
    };
    // Schedules that did not start are the task failing (`cron.task_failed`); a sweep that did not
    // run is only its own line above: the next tick sweeps, and the claim takes over expired rows anyway.
    if (schedules.status === "rejected") throw new PartialFailure(report, schedules.reason);
    return report;
  },
  logLine({ cron, schedules, identities }) {
    const deleted = identities?.deleted ?? 0;
    if (schedules.started.length === 0 && schedules.failed.length === 0 && schedules.expired === 0 && deleted === 0) return null;
    return {
      level: "info",
      event: "cron.ingress_report",
      fields: {
        cron,
        started: schedules.started.filter((s) => !s.deduplicated).length,
        duplicateTicks: schedules.started.filter((s) => s.deduplicated).length,
        failed: schedules.failed.length, // retried next tick
        skipped: schedules.skipped,
        expired: schedules.expired,
        identitiesSwept: deleted,
        identitiesDrained: identities?.drained ?? false,
      },
    };
  },
};
