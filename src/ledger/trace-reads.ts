/**
 * The trace reads: an execution's trace records (the execution, its duplicate triggers, its steps,
 * their events and attempts, the pinned definition, the dedupe window, the waits of its
 * WAIT_FOR_EVENT steps) — for one execution (`GET /v1/executions/{id}`) or a set at once (the
 * archive's), in one batch whatever the size of the set. src/steps/trace.ts builds the trace from
 * them. Reads only, scoped to the caller's workspace in SQL.
 */
import { stepsWithEntry } from "./entry-step";
import { readAttemptsOfSet, type AttemptRecord } from "./attempts";
import { LabelledBatch } from "./batch";
import { selectList } from "./columns";
import { bounded, byteLength, EXECUTION_SUMMARY_RECORD, type ExecutionSummaryRecord } from "./execution-records";
import { keySendsColumn } from "./key-sends";
import { ITEMS_BEYOND_PAGE, readItemCountsOfSet, type ItemCountRecord, type ItemRecord } from "./map-trace";
import type { StepEventType } from "./step-events";
import type { StepState } from "./step-sql";
import { readWorkItemsOfSet, splitWorkItems, type UndoRecord, type WorkItemTraceRow } from "./undo-trace";

export interface StepRecord {
  vertexId: string;
  state: StepState;
  epoch: number;
  attempt: number;
  availableAt: number;
  leaseUntil: number | null;
  /** Set while the step is parked (a DELAY sleeping). */
  parkedUntil: number | null;
  /** The step's wait for a connector's permit (JSON, src/ledger/connector-permits.ts `PermitWait`), if it waited. */
  permitWaitJson: string | null;
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
  /** The first page of each MAP's items (./map-trace.ts); their attempts and events are in `attempts` and `events` under their row keys. */
  items: ItemRecord[];
  /** Each MAP's items counted by state. */
  itemCounts: ItemCountRecord[];
  /**
   * The compensation's undo steps (./undo-trace.ts), in their place order; their attempts and events
   * are in `attempts` and `events` under their row keys. Empty: the execution never compensated.
   */
  undos: UndoRecord[];
  /** An operator's "mark resolved" of its failed compensation (`compensation_resolutions`, JSON); null: none. */
  resolutionJson: string | null;
}

const STEP_RECORD = selectList<StepRecord>({
  vertexId: "vertex_id",
  state: "state",
  epoch: "epoch",
  attempt: "attempt",
  availableAt: "available_at",
  leaseUntil: "lease_until",
  parkedUntil: "parked_until",
  permitWaitJson: "permit_wait",
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
  keySendsJson: keySendsColumn("st"),
});

const STEP_EVENT_RECORD = selectList<StepEventRecord>({
  vertexId: "ev.vertex_id",
  type: "ev.type",
  epoch: "ev.epoch",
  at: "ev.at",
  detail: "ev.detail",
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
export const OWNED_IDS = `(SELECT o.id FROM executions o
  WHERE o.id IN (SELECT value ->> 0 FROM json_each(?1))
    AND (o.id, o.workspace) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?1)))`;

export const refsParam = (refs: readonly ExecutionRef[]): string => JSON.stringify(refs.map((r) => [r.id, r.workspace]));

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

/**
 * A row of the waits statement: the wait (its flag as SQLite's 0/1), and one of its events — each
 * member null for a wait with none, each flag 0/1.
 */
type WaitRow = Omit<WaitRecord, "timedOut" | "events"> & {
  executionId: string;
  timedOut: number;
} & { [Member in keyof WaitEventRecord]: (WaitEventRecord[Member] extends boolean ? number : WaitEventRecord[Member]) | null };

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

/** An execution's "mark resolved" record as a JSON object (its primary key: one search), or NULL. */
const RESOLUTION_OF = (id: string) => `(SELECT json_object('resolvedBy', r.resolved_by, 'note', r.note, 'failedUndo', r.failed_undo,
    'resolvedAt', r.resolved_at) FROM compensation_resolutions r WHERE r.execution_id = ${id})`;

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
          `SELECT ${EXECUTION_SUMMARY_RECORD}, ${RESOLUTION_OF("executions.id")} AS resolutionJson FROM executions
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
          // The entry of an execution started since migrations/0045 has no row: its execution row is that step.
          `SELECT execution_id AS executionId, ${STEP_RECORD}
           FROM ${stepsWithEntry(OWNED_IDS)} AS st ORDER BY execution_id, created_at, created_seq`,
        )
        .bind(param),
    )
    .add(
      "events",
      db
        .prepare(
          `SELECT ev.execution_id AS executionId, ${STEP_EVENT_RECORD} FROM step_events ev
           WHERE ev.execution_id IN ${OWNED_IDS} AND NOT ${ITEMS_BEYOND_PAGE("ev.vertex_id")} ORDER BY ev.execution_id, ev.id`,
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
    // A MAP's items (./map-trace.ts): the first page of each MAP, and its counts by state; the undo
    // steps of a compensation in the same statement (./undo-trace.ts).
    .add("items", readWorkItemsOfSet(db, OWNED_IDS, [param]))
    .add("itemCounts", readItemCountsOfSet(db, OWNED_IDS, [param]))
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
  const workItems = splitWorkItems(results.rows<WorkItemTraceRow>("items"));
  const items = byExecution(workItems.items);
  const undos = byExecution(workItems.undos);
  const itemCounts = byExecution(results.rows<Owned<ItemCountRecord>>("itemCounts"));
  const identities = new Map(
    results.rows<{ executionId: string; expiresAt: number }>("identities").map((i) => [i.executionId, i.expiresAt]),
  );
  for (const { resolutionJson, ...execution } of results.rows<ExecutionSummaryRecord & { resolutionJson: string | null }>("execution")) {
    out.set(execution.id, {
      execution,
      resolutionJson,
      duplicateTriggers: duplicates.get(execution.id) ?? [],
      steps: steps.get(execution.id) ?? [],
      events: events.get(execution.id) ?? [],
      attempts: attempts.get(execution.id) ?? [],
      definitionJson: definitions.get(versionKey(execution.workspace, execution.workflowId, execution.version)) ?? null,
      dedupeWindowEnd: identities.get(execution.id) ?? null,
      waits: waits.get(execution.id) ?? [],
      items: items.get(execution.id) ?? [],
      itemCounts: itemCounts.get(execution.id) ?? [],
      undos: undos.get(execution.id) ?? [],
    });
  }
  return out;
}

/** The statements of `readTraceRecordsForSet`'s batch, by label. */
const TRACE_SET_STATEMENTS = [
  "execution",
  "duplicates",
  "steps",
  "events",
  "attempts",
  "definitions",
  "identities",
  "waits",
  "items",
  "itemCounts",
] as const;

/** D1 statements one `readTraceRecordsForSet` sends (one batch), whatever the size of the set. */
export const TRACE_SET_QUERIES = TRACE_SET_STATEMENTS.length;
