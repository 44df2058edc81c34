/**
 * Scheduled starts. An ENTRY_POINT with `schedule` is started by the cron handler for every tick
 * of that cron string. The identity material is `[cron, scheduledTime]` (kind `schedule`), so the
 * same tick delivered twice (Cron Triggers are at-least-once) is one execution, and every tick is
 * a new one. The cron string must be listed in wrangler.toml `[triggers] crons`, or the Worker is
 * never invoked with it.
 */
import { entryPointOf } from "../definitions/schema";
import { listScheduledWorkflows } from "../definitions/store";
import { startWorkflowExecution, type IngressDeps, type StartResult } from "./start";

export interface ScheduleReport {
  started: StartResult[];
  failed: Array<{ workspace: string; workflowId: string; error: string }>;
}

export async function fireSchedules(deps: IngressDeps, cron: string, scheduledTime: number): Promise<ScheduleReport> {
  const due = (await listScheduledWorkflows(deps.db)).filter((w) => entryPointOf(w.definition).config.schedule === cron);
  const report: ScheduleReport = { started: [], failed: [] };
  const payload = { cron, scheduledTime: new Date(scheduledTime).toISOString() };
  // One workflow failing (say, an edge expression error) must not stop the others' ticks.
  const results = await Promise.allSettled(
    due.map((workflow) =>
      startWorkflowExecution(deps, {
        workflow,
        triggerKind: "schedule",
        payload,
        identity: { kind: "schedule", material: [cron, scheduledTime], scope: "production" },
      }),
    ),
  );
  results.forEach((result, i) => {
    if (result.status === "fulfilled") report.started.push(result.value);
    else {
      const w = due[i]!;
      const error = result.reason instanceof Error ? result.reason.message : String(result.reason);
      console.error(`scheduled start of ${w.workspace}/${w.workflowId} for ${cron} failed`, error);
      report.failed.push({ workspace: w.workspace, workflowId: w.workflowId, error });
    }
  });
  return report;
}
