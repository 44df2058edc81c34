/**
 * The read model: what the API shows — an execution's trace (the execution, its steps, their
 * events and attempts), the list of executions, one execution, its status, a workflow's scheduled runs. Reads
 * only, always scoped to the caller's workspace in SQL; rows leave as camelCase records through
 * the column maps below (./columns.ts).
 */
import { readAttempts, type AttemptRecord } from "./attempts";
import { LabelledBatch } from "./batch";
import { selectList } from "./columns";
import { keySendsColumn } from "./key-sends";
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
  /** The FAILED execution whose trigger identity this one took (reuse after failure). */
  previousExecutionId: string | null;
  /** The execution that took this one's trigger identity after it failed: this one is no longer retried or started over. */
  supersededBy: string | null;
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
  /** When the step's key was first sent to each destination (`parseKeySends`); '{}' without a key. */
  keySendsJson: string | null;
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
  /** The steps' attempts on record (at most `MAX_ATTEMPTS_KEPT` per step), per step oldest first. */
  attempts: AttemptRecord[];
  /** The pinned version's definition (JSON text): what the trace says of each step's declaration (its destination key). */
  definitionJson: string | null;
}

const EXECUTION_RECORD = selectList<ExecutionRecord>({
  id: "id",
  workspace: "workspace",
  workflowId: "workflow_id",
  version: "version",
  entryVertexId: "entry_vertex_id",
  triggerKind: "trigger_kind",
  identityKind: "identity_kind",
  status: "status",
  payloadJson: "payload",
  duplicateDeliveries: "duplicate_deliveries",
  lastDuplicateAt: "last_duplicate_at",
  startedOverFrom: "started_over_from",
  previousExecutionId: "previous_execution_id",
  supersededBy: "superseded_by",
  createdAt: "created_at",
  updatedAt: "updated_at",
  finishedAt: "finished_at",
});

/** One execution of a workspace. Binds ?1 execution id, ?2 workspace. */
const ONE_EXECUTION = `SELECT ${EXECUTION_RECORD} FROM executions WHERE id = ?1 AND workspace = ?2`;

const STEP_RECORD = selectList<StepRecord>({
  vertexId: "vertex_id",
  state: "state",
  epoch: "epoch",
  attempt: "attempt",
  availableAt: "available_at",
  leaseUntil: "lease_until",
  idempotencyKey: "idempotency_key",
  requestJson: "request",
  outputJson: "output",
  nextVerticesJson: "next_vertices",
  error: "error",
  createdAt: "created_at",
  updatedAt: "updated_at",
  finishedAt: "finished_at",
  resends: "resends",
  nextResendAt: "next_resend_at",
  keySendsJson: keySendsColumn("steps"),
});

const STEP_EVENT_RECORD = selectList<StepEventRecord>({
  vertexId: "ev.vertex_id",
  type: "ev.type",
  epoch: "ev.epoch",
  at: "ev.at",
  detail: "ev.detail",
});

const SCHEDULE_RUN_RECORD = selectList<ScheduleRunRecord>({
  cron: "cron",
  scheduledAt: "scheduled_at",
  status: "status",
  attempts: "attempts",
  executionId: "execution_id",
  error: "error",
  updatedAt: "updated_at",
});

/** The execution (in this workspace), its steps, their events and attempts: one round trip. Null: not in this workspace. */
export async function readTraceRecords(db: D1Database, workspace: string, executionId: string): Promise<TraceRecords | null> {
  const results = await new LabelledBatch<"execution" | "steps" | "events" | "attempts" | "definition">(db)
    .add("execution", db.prepare(ONE_EXECUTION).bind(executionId, workspace))
    .add(
      "steps",
      db
        .prepare(
          `SELECT ${STEP_RECORD}
           FROM steps WHERE execution_id = ?1 AND workspace = ?2 ORDER BY created_at, rowid`,
        )
        .bind(executionId, workspace),
    )
    .add(
      "events",
      db
        .prepare(
          `SELECT ${STEP_EVENT_RECORD} FROM step_events ev
           WHERE ev.execution_id = ?1 AND EXISTS (SELECT 1 FROM executions e WHERE e.id = ?1 AND e.workspace = ?2)
           ORDER BY ev.id`,
        )
        .bind(executionId, workspace),
    )
    .add("attempts", readAttempts(db, executionId, workspace))
    .add(
      "definition",
      db
        .prepare(
          `SELECT v.definition AS definitionJson FROM executions e
           JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version
           WHERE e.id = ?1 AND e.workspace = ?2`,
        )
        .bind(executionId, workspace),
    )
    .run();
  const execution = results.first<ExecutionRecord>("execution");
  if (!execution) return null;
  return {
    execution,
    steps: results.rows<StepRecord>("steps"),
    events: results.rows<StepEventRecord>("events"),
    attempts: results.rows<AttemptRecord>("attempts"),
    definitionJson: results.first<{ definitionJson: string }>("definition")?.definitionJson ?? null,
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
      `SELECT ${EXECUTION_RECORD} FROM executions
       WHERE workspace = ?1
         AND (?2 IS NULL OR workflow_id = ?2)
         AND (?3 IS NULL OR status = ?3)
         AND (?4 IS NULL OR created_at < ?4 OR (created_at = ?4 AND id < ?5))
       ORDER BY created_at DESC, id DESC
       LIMIT ?6`,
    )
    .bind(workspace, f.workflowId ?? null, f.status ?? null, f.before?.createdAt ?? null, f.before?.id ?? null, f.limit)
    .all<ExecutionRecord>();
  return results;
}

/** One execution of a workspace (with its payload), or null. */
export async function readExecution(db: D1Database, workspace: string, executionId: string): Promise<ExecutionRecord | null> {
  return db.prepare(ONE_EXECUTION).bind(executionId, workspace).first<ExecutionRecord>();
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

/** The workflow's most recent scheduled runs, newest minute first (a primary-key range). */
export async function recentScheduleRuns(
  db: D1Database,
  workspace: string,
  workflowId: string,
  limit: number,
): Promise<ScheduleRunRecord[]> {
  const { results } = await db
    .prepare(
      `SELECT ${SCHEDULE_RUN_RECORD} FROM schedule_runs
       WHERE workspace = ?1 AND workflow_id = ?2 ORDER BY scheduled_at DESC LIMIT ?3`,
    )
    .bind(workspace, workflowId, limit)
    .all<ScheduleRunRecord>();
  return results;
}
