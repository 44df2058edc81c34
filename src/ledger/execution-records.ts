/**
 * An execution as the API reads it: its record (camelCase, through the column map below:
 * ./columns.ts), the summary the list, the search and the trace read (every column but the
 * payload), one execution and its status — and the bound on how large a stored value any read
 * brings back (`TRACE_VALUE_MAX_BYTES`). Reads only, scoped to the caller's workspace in SQL.
 */
import { selectList, type Columns } from "./columns";
import type { ExecutionStatus } from "./execution-types";

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
  /** Messages for this execution's steps acked unrun: the step was settled, or waiting (migrations/0012). */
  redeliveriesStopped: number;
  /** Late writes of a worker that had lost its step, refused by the fence. */
  fencedOutWrites: number;
  /** Answers the destinations replayed from their own idempotency store (`Idempotent-Replayed: true`). */
  destinationReplays: number;
  /** The highest attempt any step of this execution was claimed at. */
  maxAttempt: number;
  startedOverFrom: string | null;
  /** The FAILED execution whose trigger identity this one took (reuse after failure). */
  previousExecutionId: string | null;
  /** The execution that took this one's trigger identity after it failed: this one is no longer retried or started over. */
  supersededBy: string | null;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
}

/** An execution as the list and the trace show it: the record without its payload (which neither shows). */
export type ExecutionSummaryRecord = Omit<ExecutionRecord, "payloadJson">;

/**
 * The most bytes (UTF-8, of its stored JSON) of a step's output or request the trace and the
 * stream read back; a larger value is left in D1 and shown as omitted, with its size (`outputBytes`).
 * A step's output may be 1.5 MB and an execution has many steps: unbounded, one trace could read
 * tens of MB into a 128 MB isolate.
 */
export const TRACE_VALUE_MAX_BYTES = 65_536;

/** A stored JSON value's size in bytes, computed in SQL without reading it back. */
export const byteLength = (column: string) => `length(CAST(${column} AS BLOB))`;
/** The column, or NULL when it is over `TRACE_VALUE_MAX_BYTES`. */
export const bounded = (column: string) => `CASE WHEN ${byteLength(column)} <= ${TRACE_VALUE_MAX_BYTES} THEN ${column} END`;

const EXECUTION_COLUMNS = {
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
  redeliveriesStopped: "redeliveries_stopped",
  fencedOutWrites: "fenced_out_writes",
  destinationReplays: "destination_replays",
  maxAttempt: "max_attempt",
  startedOverFrom: "started_over_from",
  previousExecutionId: "previous_execution_id",
  supersededBy: "superseded_by",
  createdAt: "created_at",
  updatedAt: "updated_at",
  finishedAt: "finished_at",
} as const;

const EXECUTION_RECORD = selectList<ExecutionRecord>(EXECUTION_COLUMNS);

/** What the list and the trace read: every column but the payload (up to 1 MiB each). */
export const EXECUTION_SUMMARY_RECORD = selectList<ExecutionSummaryRecord>(
  Object.fromEntries(Object.entries(EXECUTION_COLUMNS).filter(([field]) => field !== "payloadJson")) as Columns<ExecutionSummaryRecord>,
);

/**
 * The summary's column map over the executions table aliased `alias` (the search joins executions
 * with their tombstones: src/ledger/search.ts), each field's expression overridable.
 */
export function executionSummaryColumns(
  alias: string,
  overrides: Partial<Columns<ExecutionSummaryRecord>> = {},
): Columns<ExecutionSummaryRecord> {
  const columns = Object.entries(EXECUTION_COLUMNS).filter(([field]) => field !== "payloadJson");
  return {
    ...Object.fromEntries(columns.map(([field, column]) => [field, `${alias}.${column}`])),
    ...overrides,
  } as Columns<ExecutionSummaryRecord>;
}

/** One execution of a workspace. Binds ?1 execution id, ?2 workspace. */
const ONE_EXECUTION = `SELECT ${EXECUTION_RECORD} FROM executions WHERE id = ?1 AND workspace = ?2`;

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
