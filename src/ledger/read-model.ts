/**
 * The read model: what the API shows — an execution's trace (the execution, its steps, their
 * events), the list of executions, one execution, its status, a workflow's scheduled runs. Reads
 * only, always scoped to the caller's workspace in SQL; rows leave as camelCase records through
 * the named mappers below.
 */
import { LabelledBatch } from "./batch";
import type { ExecutionStatus } from "./executions";
import type { ScheduleRunStatus } from "./schedule-runs";
import type { StepEventType, StepState } from "./steps";

export interface ExecutionRecord {
  id: string;
  workspace: string;
  workflowId: string;
  version: string;
  entryVertexId: string;
  triggerKind: string;
  identityKind: string;
  status: ExecutionStatus;
  /** The trigger payload as stored (JSON text). */
  payloadJson: string;
  duplicateDeliveries: number;
  lastDuplicateAt: number | null;
  startedOverFrom: string | null;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
}

export interface StepRecord {
  vertexId: string;
  state: StepState;
  epoch: number;
  attempt: number;
  availableAt: number;
  leaseUntil: number | null;
  idempotencyKey: string | null;
  /** The redacted request summary (JSON text). */
  requestJson: string | null;
  outputJson: string | null;
  /** JSON array of the vertices whose edges this step took. */
  nextVerticesJson: string | null;
  error: string | null;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
  /** Re-sends of this step's message by the reaper; the next is not due before `nextResendAt`. */
  resends: number;
  nextResendAt: number | null;
}

export interface StepEventRecord {
  vertexId: string;
  type: StepEventType;
  epoch: number | null;
  at: number;
  detail: string | null;
}

export interface TraceRecords {
  execution: ExecutionRecord;
  steps: StepRecord[];
  events: StepEventRecord[];
}

interface ExecutionRow {
  id: string;
  workspace: string;
  workflow_id: string;
  version: string;
  entry_vertex_id: string;
  trigger_kind: string;
  identity_kind: string;
  status: ExecutionStatus;
  payload: string;
  duplicate_deliveries: number;
  last_duplicate_at: number | null;
  started_over_from: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
}

const EXECUTION_COLUMNS = `id, workspace, workflow_id, version, entry_vertex_id, trigger_kind, identity_kind, status, payload,
  duplicate_deliveries, last_duplicate_at, started_over_from, created_at, updated_at, finished_at`;

function toExecutionRecord(row: ExecutionRow): ExecutionRecord {
  return {
    id: row.id,
    workspace: row.workspace,
    workflowId: row.workflow_id,
    version: row.version,
    entryVertexId: row.entry_vertex_id,
    triggerKind: row.trigger_kind,
    identityKind: row.identity_kind,
    status: row.status,
    payloadJson: row.payload,
    duplicateDeliveries: row.duplicate_deliveries,
    lastDuplicateAt: row.last_duplicate_at,
    startedOverFrom: row.started_over_from,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    finishedAt: row.finished_at,
  };
}

interface StepRow {
  vertex_id: string;
  state: StepState;
  epoch: number;
  attempt: number;
  available_at: number;
  lease_until: number | null;
  idempotency_key: string | null;
  request: string | null;
  output: string | null;
  next_vertices: string | null;
  error: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
  resends: number;
  next_resend_at: number | null;
}

function toStepRecord(row: StepRow): StepRecord {
  return {
    vertexId: row.vertex_id,
    state: row.state,
    epoch: row.epoch,
    attempt: row.attempt,
    availableAt: row.available_at,
    leaseUntil: row.lease_until,
    idempotencyKey: row.idempotency_key,
    requestJson: row.request,
    outputJson: row.output,
    nextVerticesJson: row.next_vertices,
    error: row.error,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    finishedAt: row.finished_at,
    resends: row.resends,
    nextResendAt: row.next_resend_at,
  };
}

interface StepEventRow {
  vertex_id: string;
  type: StepEventType;
  epoch: number | null;
  at: number;
  detail: string | null;
}

function toStepEventRecord(row: StepEventRow): StepEventRecord {
  return { vertexId: row.vertex_id, type: row.type, epoch: row.epoch, at: row.at, detail: row.detail };
}

/** The execution (in this workspace), its steps and their events: one round trip. Null: not in this workspace. */
export async function readTraceRecords(db: D1Database, workspace: string, executionId: string): Promise<TraceRecords | null> {
  const results = await new LabelledBatch<"execution" | "steps" | "events">(db)
    .add(
      "execution",
      db.prepare(`SELECT ${EXECUTION_COLUMNS} FROM executions WHERE id = ?1 AND workspace = ?2`).bind(executionId, workspace),
    )
    .add(
      "steps",
      db
        .prepare(
          `SELECT vertex_id, state, epoch, attempt, available_at, lease_until, idempotency_key, request, output, next_vertices,
                  error, created_at, updated_at, finished_at, resends, next_resend_at
           FROM steps WHERE execution_id = ?1 AND workspace = ?2 ORDER BY created_at, rowid`,
        )
        .bind(executionId, workspace),
    )
    .add(
      "events",
      db
        .prepare(
          `SELECT ev.vertex_id, ev.type, ev.epoch, ev.at, ev.detail FROM step_events ev
           WHERE ev.execution_id = ?1 AND EXISTS (SELECT 1 FROM executions e WHERE e.id = ?1 AND e.workspace = ?2)
           ORDER BY ev.id`,
        )
        .bind(executionId, workspace),
    )
    .run();
  const execution = results.first<ExecutionRow>("execution");
  if (!execution) return null;
  return {
    execution: toExecutionRecord(execution),
    steps: results.rows<StepRow>("steps").map(toStepRecord),
    events: results.rows<StepEventRow>("events").map(toStepEventRecord),
  };
}

export interface ExecutionListFilter {
  workflowId?: string;
  status?: ExecutionStatus;
  /** Keyset cursor: strictly older than (createdAt, id). */
  before?: { createdAt: number; id: string };
  limit: number;
}

/** Executions of a workspace, newest first, keyset-paginated on (created_at, id). */
export async function listExecutionRecords(db: D1Database, workspace: string, f: ExecutionListFilter): Promise<ExecutionRecord[]> {
  const { results } = await db
    .prepare(
      `SELECT ${EXECUTION_COLUMNS} FROM executions
       WHERE workspace = ?1
         AND (?2 IS NULL OR workflow_id = ?2)
         AND (?3 IS NULL OR status = ?3)
         AND (?4 IS NULL OR created_at < ?4 OR (created_at = ?4 AND id < ?5))
       ORDER BY created_at DESC, id DESC
       LIMIT ?6`,
    )
    .bind(workspace, f.workflowId ?? null, f.status ?? null, f.before?.createdAt ?? null, f.before?.id ?? null, f.limit)
    .all<ExecutionRow>();
  return results.map(toExecutionRecord);
}

/** One execution of a workspace (with its payload), or null. */
export async function readExecution(db: D1Database, workspace: string, executionId: string): Promise<ExecutionRecord | null> {
  const row = await db
    .prepare(`SELECT ${EXECUTION_COLUMNS} FROM executions WHERE id = ?1 AND workspace = ?2`)
    .bind(executionId, workspace)
    .first<ExecutionRow>();
  return row ? toExecutionRecord(row) : null;
}

/** Just the status (cheap polling). `null` when absent from this workspace. */
export async function readExecutionStatus(db: D1Database, workspace: string, executionId: string): Promise<ExecutionStatus | null> {
  const row = await db
    .prepare(`SELECT status FROM executions WHERE id = ?1 AND workspace = ?2`)
    .bind(executionId, workspace)
    .first<{ status: ExecutionStatus }>();
  return row?.status ?? null;
}

export interface ScheduleRunRecord {
  cron: string;
  scheduledAt: number;
  status: ScheduleRunStatus;
  attempts: number;
  executionId: string | null;
  error: string | null;
  updatedAt: number;
}

interface ScheduleRunRow {
  cron: string;
  scheduled_at: number;
  status: ScheduleRunStatus;
  attempts: number;
  execution_id: string | null;
  error: string | null;
  updated_at: number;
}

function toScheduleRunRecord(row: ScheduleRunRow): ScheduleRunRecord {
  return {
    cron: row.cron,
    scheduledAt: row.scheduled_at,
    status: row.status,
    attempts: row.attempts,
    executionId: row.execution_id,
    error: row.error,
    updatedAt: row.updated_at,
  };
}

/** The workflow's most recent scheduled runs, newest minute first (a primary-key range). */
export async function recentScheduleRuns(
  db: D1Database,
  workspace: string,
  workflowId: string,
  limit: number,
): Promise<ScheduleRunRecord[]> {
  const { results } = await db
    .prepare(
      `SELECT cron, scheduled_at, status, attempts, execution_id, error, updated_at FROM schedule_runs
       WHERE workspace = ?1 AND workflow_id = ?2 ORDER BY scheduled_at DESC LIMIT ?3`,
    )
    .bind(workspace, workflowId, limit)
    .all<ScheduleRunRow>();
  return results.map(toScheduleRunRecord);
}
