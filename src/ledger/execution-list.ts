/**
 * The list of a workspace's executions (`GET /v1/executions`): its filters, keyset-paginated, one
 * indexed query; the flag filters the search by business id shares (./search.ts).
 */
import { EXECUTION_SUMMARY_RECORD, type ExecutionSummaryRecord } from "./execution-records";
import type { ExecutionStatus } from "./execution-types";

export interface ExecutionListFilter {
  workflowId?: string;
  status?: ExecutionStatus;
  /** Created at or after (ms). */
  since?: number;
  /** Created before (ms). */
  until?: number;
  /** Only executions where a duplicate was stopped (any of `duplicatesStopped`). */
  hadDuplicates?: boolean;
  /** Only executions with a step claimed more than once (attempts > 1). */
  retried?: boolean;
  /** Keyset cursor: strictly older than (createdAt, id). */
  before?: { createdAt: number; id: string };
  limit: number;
}

/**
 * The two flag filters over columns prefixed `prefix` (`""` for the list, `"e."` for the search):
 * "a duplicate was stopped" — unprefixed, the same expression as the partial index
 * `executions_with_duplicates` (migrations/0012) — and "attempts > 1" (`executions_retried`).
 */
export const listFlags = (prefix: string) => ({
  hadDuplicates:
    ["duplicate_deliveries", "redeliveries_stopped", "fenced_out_writes", "destination_replays"].map((c) => prefix + c).join(" + ") +
    " > 0",
  retried: `${prefix}max_attempt > 1`,
});
const { hadDuplicates: HAD_DUPLICATES, retried: RETRIED } = listFlags("");

/**
 * Executions of a workspace, newest first, keyset-paginated on (created_at, id): ONE query. Only
 * the filters given are in its text (never `?n IS NULL OR …`), so SQLite can prove a partial
 * index's WHERE from the query's and walk it in order: `executions_with_duplicates` or
 * `executions_retried` for those filters, `executions_by_workflow` for a workflow and status,
 * `executions_by_status` for a status but COMPLETED, else `executions_by_workspace`
 * (test/steps/duplicates-stopped.test.ts reads the query plans).
 */
export async function listExecutionRecords(db: D1Database, workspace: string, f: ExecutionListFilter): Promise<ExecutionSummaryRecord[]> {
  const { sql, params } = listQuery(workspace, f);
  const { results } = await db
    .prepare(sql)
    .bind(...params)
    .all<ExecutionSummaryRecord>();
  return results;
}

/** The list's statement and its parameters (exported for the query-plan test). */
export function listQuery(workspace: string, f: ExecutionListFilter): { sql: string; params: unknown[] } {
  const params: unknown[] = [workspace];
  const param = (value: unknown) => `?${params.push(value)}`;
  const where = [`workspace = ?1`];
  if (f.workflowId !== undefined) where.push(`workflow_id = ${param(f.workflowId)}`);
  if (f.status !== undefined) where.push(`status = ${param(f.status)}`);
  // `executions_by_status` holds every execution but the COMPLETED ones (migrations/0033: an
  // execution that completes writes no entry); the term lets SQLite prove its WHERE. COMPLETED
  // walks `executions_by_workspace` (or `_by_workflow`) and skips the others.
  if (f.status !== undefined && f.status !== "COMPLETED") where.push(`status <> 'COMPLETED'`);
  if (f.since !== undefined) where.push(`created_at >= ${param(f.since)}`);
  if (f.until !== undefined) where.push(`created_at < ${param(f.until)}`);
  if (f.hadDuplicates) where.push(HAD_DUPLICATES);
  if (f.retried) where.push(RETRIED);
  if (f.before) {
    const at = param(f.before.createdAt);
    where.push(`(created_at < ${at} OR (created_at = ${at} AND id < ${param(f.before.id)}))`);
  }
  const sql =
    `SELECT ${EXECUTION_SUMMARY_RECORD} FROM executions WHERE ${where.join(" AND ")} ` +
    `ORDER BY created_at DESC, id DESC LIMIT ${param(f.limit)}`;
  return { sql, params };
}
