/**
 * The read model: what the API shows — an execution's trace (the execution, its steps, their
 * events and attempts, the waits of its WAIT_FOR_EVENT steps), the list of executions, one
 * execution, its status, a workflow's scheduled runs. Reads only, always scoped to the caller's
 * workspace in SQL; rows leave as camelCase records through the column maps below (./columns.ts).
 */
import { readAttemptsOfSet, type AttemptRecord } from "./attempts";
import { LabelledBatch } from "./batch";
import { selectList, type Columns } from "./columns";
import { keySendsColumn } from "./key-sends";
import type { ChangePosition } from "./execution-changes";
import type { ExecutionStatus } from "./execution-types";
import type { ScheduleRunStatus } from "./schedule-runs";
import type { StepEventType } from "./step-events";
import type { StepState } from "./step-sql";

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
const byteLength = (column: string) => `length(CAST(${column} AS BLOB))`;
/** The column, or NULL when it is over `TRACE_VALUE_MAX_BYTES`. */
const bounded = (column: string) => `CASE WHEN ${byteLength(column)} <= ${TRACE_VALUE_MAX_BYTES} THEN ${column} END`;

export interface StepRecord {
  vertexId: string;
  state: StepState;
  epoch: number;
  attempt: number;
  availableAt: number;
  leaseUntil: number | null;
  /** Set while the step is parked (a DELAY sleeping). */
  parkedUntil: number | null;
  idempotencyKey: string | null;
  /** The redacted request summary (JSON text); null too when over `TRACE_VALUE_MAX_BYTES` (see `requestBytes`). */
  requestJson: string | null;
  requestBytes: number | null;
  /** The output (JSON text); null too when over `TRACE_VALUE_MAX_BYTES` (see `outputBytes`). */
  outputJson: string | null;
  /** The stored output's size in bytes (null: no output). */
  outputBytes: number | null;
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

/** A duplicate trigger the execution absorbed (the first 100: migrations/0013). */
export interface DuplicateTriggerRecord {
  seq: number;
  at: number;
  triggerKind: string;
  identityKind: string;
}

const DUPLICATE_TRIGGER_RECORD = selectList<DuplicateTriggerRecord>({
  seq: "d.value ->> 0",
  at: "d.value ->> 1",
  triggerKind: "d.value ->> 2",
  identityKind: "d.value ->> 3",
});

/** The most events the trace lists per wait (the newest on its name and correlation value). */
export const TRACE_WAIT_EVENTS_MAX = 20;

/** An event on a wait's (workspace, name, correlation value), as the trace lists it. */
export interface WaitEventRecord {
  eventId: string;
  receivedAt: number;
  /** The event source it came through; null for `POST /v1/events`. */
  source: string | null;
  duplicates: number;
  bufferedUntil: number;
  /** A wait took it (this one or another). */
  taken: boolean;
  /** This registration of the wait took it. */
  takenHere: boolean;
}

/** A WAIT_FOR_EVENT step's registration (`event_waits`, migrations/0020) and the events on it, newest first. */
export interface WaitRecord {
  vertexId: string;
  name: string;
  /** The correlation value as canonical JSON. */
  matchValue: string;
  consume: "one" | "all";
  registeredAt: number;
  timeoutAt: number;
  timedOut: boolean;
  /** At most `TRACE_WAIT_EVENTS_MAX`, newest first. */
  events: WaitEventRecord[];
}

export interface TraceRecords {
  execution: ExecutionSummaryRecord;
  duplicateTriggers: DuplicateTriggerRecord[];
  steps: StepRecord[];
  events: StepEventRecord[];
  /** The steps' attempts on record (at most `MAX_ATTEMPTS_KEPT` per step), per step oldest first. */
  attempts: AttemptRecord[];
  /** The pinned version's definition (JSON text): what the trace says of each step's declaration (its destination key). */
  definitionJson: string | null;
  /**
   * When the trigger identity's dedupe window ends (ms): the identity row's `expires_at`, while that
   * row still names this execution. Null for a forced start (no identity), and once the row is gone
   * (swept after its window) or names another execution (a new window, a reuse after failure).
   * A cancel that released the identity shows here as an end in the past.
   */
  dedupeWindowEnd: number | null;
  /** The registered waits of the execution's WAIT_FOR_EVENT steps (a step not registered yet has none). */
  waits: WaitRecord[];
}

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
const EXECUTION_SUMMARY_RECORD = selectList<ExecutionSummaryRecord>(
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

const STEP_RECORD = selectList<StepRecord>({
  vertexId: "vertex_id",
  state: "state",
  epoch: "epoch",
  attempt: "attempt",
  availableAt: "available_at",
  leaseUntil: "lease_until",
  parkedUntil: "parked_until",
  idempotencyKey: "idempotency_key",
  requestJson: bounded("request"),
  requestBytes: byteLength("request"),
  outputJson: bounded("output"),
  outputBytes: byteLength("output"),
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

/**
 * The execution (in this workspace), its steps, their events and attempts: one round trip (the set
 * read below, for a set of one — the trace `GET` answers and the archive's are read the same way).
 * Null: not in this workspace.
 */
export async function readTraceRecords(db: D1Database, workspace: string, executionId: string): Promise<TraceRecords | null> {
  return (await readTraceRecordsForSet(db, [{ id: executionId, workspace }])).get(executionId) ?? null;
}

/** An execution named with its workspace: a set read matches both, so another workspace's id reads nothing. */
export interface ExecutionRef {
  id: string;
  workspace: string;
}

/**
 * The ids of `?1` (a JSON array of `[id, workspace]` pairs) that are executions of the workspace
 * paired with them: the primary key finds each id, and the pair must match as a whole.
 */
const OWNED_IDS = `(SELECT o.id FROM executions o
  WHERE o.id IN (SELECT value ->> 0 FROM json_each(?1))
    AND (o.id, o.workspace) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?1)))`;

const refsParam = (refs: readonly ExecutionRef[]): string => JSON.stringify(refs.map((r) => [r.id, r.workspace]));

/** A row of a set read: the record, with the execution it belongs to. */
type Owned<Row> = Row & { executionId: string };

/** Rows grouped by their execution, the record without `executionId`, in the order read. */
function byExecution<Row>(rows: Array<Owned<Row>>): Map<string, Row[]> {
  const grouped = new Map<string, Row[]>();
  for (const { executionId, ...record } of rows) {
    const list = grouped.get(executionId);
    if (list) list.push(record as Row);
    else grouped.set(executionId, [record as Row]);
  }
  return grouped;
}

/** A row of the waits statement: the wait, and one of its events (all null for a wait with none). */
interface WaitRow {
  executionId: string;
  vertexId: string;
  name: string;
  matchValue: string;
  consume: "one" | "all";
  registeredAt: number;
  timeoutAt: number;
  timedOut: number;
  eventId: string | null;
  receivedAt: number | null;
  source: string | null;
  duplicates: number | null;
  bufferedUntil: number | null;
  taken: number | null;
  takenHere: number | null;
}

/**
 * The registered waits of the set's executions (the primary key of `event_waits`), each with the
 * newest `TRACE_WAIT_EVENTS_MAX` events on its (workspace, name, correlation hash) — a range of
 * the `events_match` index walked backwards per wait, never the workspace's events — and whether
 * a wait took each one (`consumed_at`) and whether this registration did (its consumption row,
 * by `wait_key`). A wait with no event is one row with the event's columns null.
 */
const WAITS_OF_SET = `SELECT w.execution_id AS executionId, w.vertex_id AS vertexId, w.name AS name, w.match_value AS matchValue,
         w.consume AS consume, w.registered_at AS registeredAt, w.timeout_at AS timeoutAt, w.timed_out AS timedOut,
         e.event_id AS eventId, e.received_at AS receivedAt, e.source AS source, e.duplicates AS duplicates,
         e.buffered_until AS bufferedUntil, e.consumed_at IS NOT NULL AS taken,
         EXISTS (SELECT 1 FROM event_consumptions c WHERE c.wait_key = w.wait_key AND c.event_rowid = e.rowid) AS takenHere
  FROM event_waits w
  LEFT JOIN events e ON e.rowid IN (
    SELECT b.rowid FROM events b
    WHERE b.workspace = w.workspace AND b.name = w.name AND b.match_hash = w.match_hash
    ORDER BY b.received_at DESC, b.rowid DESC LIMIT ${TRACE_WAIT_EVENTS_MAX})
  WHERE w.execution_id IN ${OWNED_IDS}
  ORDER BY w.execution_id, w.vertex_id, e.received_at DESC, e.rowid DESC`;

/** The waits statement's rows as records: one per wait, its events in the order read (newest first). */
function waitRecords(rows: WaitRow[]): Map<string, WaitRecord[]> {
  const out = new Map<string, WaitRecord[]>();
  let last: WaitRecord | null = null;
  let lastExecution: string | null = null;
  for (const r of rows) {
    if (!last || lastExecution !== r.executionId || last.vertexId !== r.vertexId) {
      last = {
        vertexId: r.vertexId,
        name: r.name,
        matchValue: r.matchValue,
        consume: r.consume,
        registeredAt: r.registeredAt,
        timeoutAt: r.timeoutAt,
        timedOut: r.timedOut === 1,
        events: [],
      };
      lastExecution = r.executionId;
      const list = out.get(r.executionId);
      if (list) list.push(last);
      else out.set(r.executionId, [last]);
    }
    if (r.eventId !== null && r.receivedAt !== null && r.bufferedUntil !== null) {
      last.events.push({
        eventId: r.eventId,
        receivedAt: r.receivedAt,
        source: r.source,
        duplicates: r.duplicates ?? 0,
        bufferedUntil: r.bufferedUntil,
        taken: r.taken === 1,
        takenHere: r.takenHere === 1,
      });
    }
  }
  return out;
}

/**
 * `readTraceRecordsForSet`: the trace's records of a set of executions at once — ONE batch of
 * eight statements, each over the same bound JSON array (`json_each(?1)`), however many executions
 * the set holds: never a statement per execution. `readTraceRecords` (GET's read) is this read for
 * a set of one, so the trace the archive builds is the one `GET /v1/executions/{id}` answers.
 * An execution that is not in its ref's workspace (or no longer exists) is absent from the map.
 * The pinned definitions are read once per version, not once per execution.
 */
export async function readTraceRecordsForSet(db: D1Database, refs: readonly ExecutionRef[]): Promise<Map<string, TraceRecords>> {
  const out = new Map<string, TraceRecords>();
  if (refs.length === 0) return out;
  const param = refsParam(refs);
  const results = await new LabelledBatch<(typeof TRACE_SET_STATEMENTS)[number]>(db)
    .add(
      "execution",
      db
        .prepare(
          `SELECT ${EXECUTION_SUMMARY_RECORD} FROM executions
           WHERE id IN (SELECT value ->> 0 FROM json_each(?1))
             AND (id, workspace) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?1))`,
        )
        .bind(param),
    )
    .add(
      "duplicates",
      db
        .prepare(
          `SELECT e.id AS executionId, ${DUPLICATE_TRIGGER_RECORD} FROM executions e CROSS JOIN json_each(e.duplicate_log) d
           WHERE e.id IN ${OWNED_IDS} ORDER BY e.id, d.key`,
        )
        .bind(param),
    )
    .add(
      "steps",
      db
        .prepare(
          `SELECT execution_id AS executionId, ${STEP_RECORD}
           FROM steps WHERE execution_id IN ${OWNED_IDS} ORDER BY execution_id, created_at, rowid`,
        )
        .bind(param),
    )
    .add(
      "events",
      db
        .prepare(
          `SELECT ev.execution_id AS executionId, ${STEP_EVENT_RECORD} FROM step_events ev
           WHERE ev.execution_id IN ${OWNED_IDS} ORDER BY ev.execution_id, ev.id`,
        )
        .bind(param),
    )
    .add("attempts", readAttemptsOfSet(db, OWNED_IDS, [param]))
    .add(
      "definitions",
      db
        .prepare(
          `SELECT DISTINCT v.workspace AS workspace, v.workflow_id AS workflowId, v.version AS version, v.definition AS definitionJson
           FROM executions e
           JOIN workflow_versions v ON v.workspace = e.workspace AND v.workflow_id = e.workflow_id AND v.version = e.version
           WHERE e.id IN ${OWNED_IDS}`,
        )
        .bind(param),
    )
    .add(
      "identities",
      db
        .prepare(
          `SELECT e.id AS executionId, i.expires_at AS expiresAt FROM executions e
           JOIN execution_identities i ON i.identity = e.identity AND i.execution_id = e.id
           WHERE e.id IN ${OWNED_IDS}`,
        )
        .bind(param),
    )
    .add("waits", db.prepare(WAITS_OF_SET).bind(param))
    .run();
  const duplicates = byExecution(results.rows<Owned<DuplicateTriggerRecord>>("duplicates"));
  const steps = byExecution(results.rows<Owned<StepRecord>>("steps"));
  const events = byExecution(results.rows<Owned<StepEventRecord>>("events"));
  const attempts = byExecution(results.rows<Owned<AttemptRecord>>("attempts"));
  const versionKey = (workspace: string, workflowId: string, version: string) => JSON.stringify([workspace, workflowId, version]);
  const definitions = new Map(
    results
      .rows<{ workspace: string; workflowId: string; version: string; definitionJson: string }>("definitions")
      .map((d) => [versionKey(d.workspace, d.workflowId, d.version), d.definitionJson]),
  );
  const waits = waitRecords(results.rows<WaitRow>("waits"));
  const identities = new Map(
    results.rows<{ executionId: string; expiresAt: number }>("identities").map((i) => [i.executionId, i.expiresAt]),
  );
  for (const execution of results.rows<ExecutionSummaryRecord>("execution")) {
    out.set(execution.id, {
      execution,
      duplicateTriggers: duplicates.get(execution.id) ?? [],
      steps: steps.get(execution.id) ?? [],
      events: events.get(execution.id) ?? [],
      attempts: attempts.get(execution.id) ?? [],
      definitionJson: definitions.get(versionKey(execution.workspace, execution.workflowId, execution.version)) ?? null,
      dedupeWindowEnd: identities.get(execution.id) ?? null,
      waits: waits.get(execution.id) ?? [],
    });
  }
  return out;
}

/** The statements of `readTraceRecordsForSet`'s batch, by label. */
const TRACE_SET_STATEMENTS = ["execution", "duplicates", "steps", "events", "attempts", "definitions", "identities", "waits"] as const;

/** D1 statements one `readTraceRecordsForSet` sends (one batch), whatever the size of the set. */
export const TRACE_SET_QUERIES = TRACE_SET_STATEMENTS.length;

/**
 * What one execution's trace may weigh when read, estimated in SQL without reading the values
 * back: the bytes of the stored values the trace shows (each step's request and output as
 * bounded by `TRACE_VALUE_MAX_BYTES`, its error, every attempt's request, response and error,
 * every event's detail) plus a fixed allowance per row for the members around them (per registered
 * wait, room for the events it lists). An estimate, not the JSON's exact size (escaping, the
 * summary's own members): the archive uses it to refuse a trace too large to hold in memory before
 * reading it, and to read a set in bounded parts.
 */
export const TRACE_ROW_ALLOWANCE = {
  execution: 1_500,
  step: 700,
  attempt: 450,
  event: 150,
  duplicate: 120,
  /** A registered wait: its `wait` member and the most events it lists (`TRACE_WAIT_EVENTS_MAX`), counted as if all were there. */
  wait: 300 + TRACE_WAIT_EVENTS_MAX * 200,
} as const;

const boundedBytes = (column: string) =>
  `CASE WHEN ${byteLength(column)} <= ${TRACE_VALUE_MAX_BYTES} THEN ${byteLength(column)} ELSE 0 END`;

/**
 * `readTraceSizes`: the estimated bytes of each execution's trace (`TRACE_ROW_ALLOWANCE`), for a
 * set of executions, in ONE statement over the same bound JSON array. Absent: not in its ref's
 * workspace, or gone.
 */
export async function readTraceSizes(db: D1Database, refs: readonly ExecutionRef[]): Promise<Map<string, number>> {
  if (refs.length === 0) return new Map();
  const a = TRACE_ROW_ALLOWANCE;
  const { results } = await db
    .prepare(
      `SELECT e.id AS id, ${a.execution}
         + (SELECT coalesce(sum(${boundedBytes("s.request")} + ${boundedBytes("s.output")}
                                + coalesce(${byteLength("s.error")}, 0) + ${a.step}), 0)
            FROM steps s WHERE s.execution_id = e.id)
         + (SELECT coalesce(sum(coalesce(${byteLength("t.request")}, 0) + coalesce(${byteLength("t.response")}, 0)
                                + coalesce(${byteLength("t.error")}, 0) + ${a.attempt}), 0)
            FROM step_attempts t WHERE t.execution_id = e.id)
         + (SELECT coalesce(sum(coalesce(${byteLength("ev.detail")}, 0) + ${a.event}), 0)
            FROM step_events ev WHERE ev.execution_id = e.id)
         + coalesce(json_array_length(e.duplicate_log), 0) * ${a.duplicate}
         + (SELECT count(*) * ${a.wait} FROM event_waits w WHERE w.execution_id = e.id) AS bytes
       FROM executions e WHERE e.id IN ${OWNED_IDS}`,
    )
    .bind(refsParam(refs))
    .all<{ id: string; bytes: number }>();
  return new Map(results.map((r) => [r.id, r.bytes]));
}

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
 * `executions_retried` for those filters, `executions_by_workflow` for a workflow and status, else
 * `executions_by_workspace` (test/steps/execution-list.test.ts reads the query plans).
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

/** A step as the stream compares it between polls (src/ingress/watch.ts). */
export interface StepProgressRecord {
  vertexId: string;
  state: StepState;
  attempt: number;
  epoch: number;
  /** Null when the caller already has it (see `readStreamProgress`), or over `TRACE_VALUE_MAX_BYTES`. */
  outputJson: string | null;
  outputBytes: number | null;
  error: string | null;
}

export interface StreamProgress {
  status: ExecutionStatus;
  steps: StepProgressRecord[];
  /**
   * The newest position of the execution's change order (src/ledger/execution-changes.ts) in the
   * same snapshot: `GET …/events` after it delivers exactly what was committed after this read.
   */
  position: ChangePosition;
}

interface StreamProgressRow extends Partial<StepProgressRecord> {
  status: ExecutionStatus;
  eventMark: number;
  attemptMark: number | null;
  attemptSeq: number | null;
}

/**
 * A stream poll: the status, every step's progress and the change position, in ONE statement.
 * `reported`: the (vertex, epoch) pairs whose final state the caller already holds — their output
 * and error are not read again (a settled step's output does not change at the same epoch). Null
 * when the execution is not in this workspace. Binds ?1 execution id, ?2 workspace, ?3 reported.
 */
export async function readStreamProgress(
  db: D1Database,
  workspace: string,
  executionId: string,
  reported: ReadonlyArray<readonly [string, number]>,
): Promise<StreamProgress | null> {
  const known = `EXISTS (SELECT 1 FROM json_each(?3) r
                         WHERE json_extract(r.value, '$[0]') = s.vertex_id AND json_extract(r.value, '$[1]') = s.epoch)`;
  const latestAttempt = `FROM step_attempts a WHERE a.execution_id = e.id ORDER BY a.ev_mark DESC, a.seq DESC LIMIT 1`;
  const { results } = await db
    .prepare(
      `SELECT e.status AS status,
              (SELECT coalesce(max(ev.id), 0) FROM step_events ev WHERE ev.execution_id = e.id) AS eventMark,
              (SELECT a.ev_mark ${latestAttempt}) AS attemptMark,
              (SELECT a.seq ${latestAttempt}) AS attemptSeq,
              s.vertex_id AS vertexId, s.state AS state, s.attempt AS attempt, s.epoch AS epoch,
              CASE WHEN ${known} THEN NULL ELSE ${bounded("s.output")} END AS outputJson,
              ${byteLength("s.output")} AS outputBytes,
              CASE WHEN ${known} THEN NULL ELSE s.error END AS error
       FROM executions e LEFT JOIN steps s ON s.execution_id = e.id AND s.workspace = e.workspace
       WHERE e.id = ?1 AND e.workspace = ?2
       ORDER BY s.created_at, s.rowid`,
    )
    .bind(executionId, workspace, JSON.stringify(reported))
    .all<StreamProgressRow>();
  const first = results[0];
  if (!first) return null;
  const events: ChangePosition = [first.eventMark, 0];
  const attempts: ChangePosition | null = first.attemptMark === null ? null : [first.attemptMark, first.attemptSeq ?? 0];
  const position = attempts && (attempts[0] > events[0] || (attempts[0] === events[0] && attempts[1] > events[1])) ? attempts : events;
  const steps = results
    .filter((r): r is StreamProgressRow & StepProgressRecord => r.vertexId !== null && r.vertexId !== undefined)
    .map(({ vertexId, state, attempt, epoch, outputJson, outputBytes, error }) => ({
      vertexId,
      state,
      attempt,
      epoch,
      outputJson,
      outputBytes,
      error,
    }));
  return { status: first.status, steps, position };
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
