/**
 * The placement audit (hourly, per shard): a workspace with rows on a shard WORKSPACE_SHARDS does
 * not place it on is logged (`shards.rows_misplaced`) — a move half done, a map edited without the
 * fence seeing it yet (a workspace not used since), a restore onto the wrong database.
 *
 * It reads the small tables every workspace writes before anything else (workflows, secrets),
 * never a scan of executions; bounded by `AUDIT_LIMIT` workspaces per shard.
 */
import type { PeriodicTask } from "../lib/periodic-task";
import { shardConfig, shardOf } from "./config";
import { workerEnv } from "./shard-env";

const AUDIT_LIMIT = 1000;

export interface AuditReport {
  shard: number;
  /** Workspaces with rows here that the map places on another shard. */
  misplaced: Array<{ workspace: string; placedOn: number }>;
}

export async function auditShard(env: Env, shard: number): Promise<AuditReport> {
  const config = shardConfig(workerEnv(env));
  const { results } = await env.DB.prepare(
    `SELECT workspace FROM workflows UNION SELECT workspace FROM workspace_secrets ORDER BY workspace LIMIT ${AUDIT_LIMIT}`,
  ).all<{ workspace: string }>();
  const misplaced = results.flatMap(({ workspace }) => {
    const placedOn = shardOf(config, workspace);
    return placedOn === shard ? [] : [{ workspace, placedOn }];
  });
  return { shard, misplaced };
}

/** Once an hour: on the first of the deployment's cron strings (every tick runs every task), at minute 0. */
function auditDue(env: Env, tick: { cron: string; scheduledTime: number }): boolean {
  const first = String(env.CRONS ?? "")
    .split(",")[0]
    ?.trim();
  return tick.cron === first && new Date(tick.scheduledTime).getUTCMinutes() === 0;
}

export const placementAuditTask: PeriodicTask<AuditReport | null> = {
  name: "placement audit",
  run: async (env, tick) => (auditDue(env, tick) ? auditShard(env, tick.shard ?? 0) : null),
  logLine: (report) =>
    report && report.misplaced.length > 0
      ? {
          level: "error",
          event: "shards.rows_misplaced",
          fields: {
            shard: report.shard,
            workspaces: report.misplaced,
            message: "these workspaces have rows on a shard WORKSPACE_SHARDS does not place them on (docs/shards.md)",
          },
        }
      : null,
};
