/**
 * The duplicates stopped per workflow over a workspace's recent executions (`GET /v1/stats`; the
 * hourly series is ./stats-rollup.ts).
 */

export interface WorkflowStats {
  workflowId: string;
  executions: number;
  triggers: number;
  redeliveries: number;
  fencedOut: number;
  destinationReplays: number;
}

/**
 * Duplicates stopped per workflow, summed over the workspace's executions created at or after
 * `since`: one query over `executions_by_workspace` (workspace, created_at).
 */
export async function sumDuplicatesStopped(db: D1Database, workspace: string, since: number): Promise<WorkflowStats[]> {
  const { results } = await db
    .prepare(
      `SELECT workflow_id AS workflowId, count(*) AS executions, sum(duplicate_deliveries) AS triggers,
              sum(redeliveries_stopped) AS redeliveries, sum(fenced_out_writes) AS fencedOut,
              sum(destination_replays) AS destinationReplays
       FROM executions WHERE workspace = ?1 AND created_at >= ?2
       GROUP BY workflow_id ORDER BY workflow_id`,
    )
    .bind(workspace, since)
    .all<WorkflowStats>();
  return results;
}
