/**
 * Cron: each subsystem's periodic work, run independently so that one failing does not stop
 * the others.
 */
import { ledgerCron } from "./http/idempotency/cron";
import { ingressCron } from "./ingress/cron";
import { stepsCron } from "./steps/cron";
import { errorMessage, log } from "./lib/log";

export async function runScheduled(controller: ScheduledController, env: Env, ctx: ExecutionContext): Promise<void> {
  const now = controller.scheduledTime;
  const tasks: Array<[string, () => Promise<unknown>]> = [
    ["ledger sweep", () => ledgerCron(env, now)],
    ["ingress", () => ingressCron(controller, env, ctx)],
    ["steps reaper", () => stepsCron(env, ctx, now)],
  ];
  const results = await Promise.allSettled(tasks.map(([, run]) => run()));
  results.forEach((result, i) => {
    if (result.status === "rejected") log.error("cron.task_failed", { task: tasks[i]![0], error: errorMessage(result.reason) });
  });
}
