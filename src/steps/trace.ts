/**
 * The execution trace (SPEC section 4): every step with its state, attempts, epoch, lease, the
 * key it sent, the redacted request summary, the response summary, errors and events
 * (fenced-out writes, failed attempts, expired leases, operator retries, dead letters), every
 * attempt on record (`attempts[]`), per Gateway step its destination key declaration
 * (./key-trace.ts), and per WAIT_FOR_EVENT step its wait and the events that arrived for it
 * (./wait-trace.ts).
 * One round trip (src/ledger/trace-reads.ts `readTraceRecords`); `buildTrace` makes it from the records.
 */
import type { GatewayVertex, WaitForEventVertex } from "../definitions/schema";
import {
  listExecutionRecords,
  itemRowKey,
  parseKeySends,
  readTraceRecords,
  TRACE_VALUE_MAX_BYTES,
  type AttemptRecord,
  type ExecutionListFilter,
  type ExecutionSummaryRecord,
  type StepRecord,
  type TraceRecords,
  type WaitRecord,
} from "../ledger";
import { isoTime } from "../lib/iso-time";
import { itemsCursor, itemTrace, mapCounts, type MapTrace } from "./map-trace";
import { destinationKeyTrace, gatewayVerticesOf } from "./key-trace";
import { waitTrace, waitVerticesOf } from "./wait-trace";
import { permitWaitTrace } from "../flow/permits";
import { COMPENSATION_STATUSES, compensationSummary, undoTrace } from "./undo-trace";

/**
 * Milliseconds as an ISO-8601 timestamp (src/lib/iso-time.ts). The engine never stores a time a
 * Date cannot hold (waits are bounded, see src/steps/retry-policy.ts), but a trace must render
 * whatever a row holds: a time it cannot show is null rather than a 500 for the whole trace.
 */
const iso = (ms: number | null | undefined): string | null => isoTime(ms);
const parsed = (text: string | null): unknown => (text === null ? null : (JSON.parse(text) as unknown));

export interface TraceEvent {
  type: string;
  epoch: number | null;
  at: string | null;
  detail: string | null;
}

export function executionSummary(e: ExecutionSummaryRecord) {
  return {
    executionId: e.id,
    workflowId: e.workflowId,
    version: e.version,
    status: e.status,
    trigger: e.triggerKind,
    identity: e.identityKind,
    duplicateDeliveries: e.duplicateDeliveries,
    lastDuplicateAt: iso(e.lastDuplicateAt),
    // Where each duplicate was stopped (docs/steps.md "Duplicates stopped"): the trigger's dedupe,
    // the claim (a redelivered message), the fence (a late write), the destination's own store.
    duplicatesStopped: {
      triggers: e.duplicateDeliveries,
      redeliveries: e.redeliveriesStopped,
      fencedOut: e.fencedOutWrites,
      destinationReplays: e.destinationReplays,
    },
    maxAttempt: e.maxAttempt,
    startedOverFrom: e.startedOverFrom,
    previousExecutionId: e.previousExecutionId,
    supersededBy: e.supersededBy,
    createdAt: iso(e.createdAt),
    finishedAt: iso(e.finishedAt),
  };
}

/** An attempt's stored answer: allowlisted headers and body, or (over the bound) a preview of it (src/ledger/attempts.ts). */
interface AttemptResponseSummary {
  headers?: Record<string, string>;
  body?: unknown;
  truncated?: true;
  bytes?: number;
  preview?: string;
}

/**
 * One attempt of a step (docs/steps.md "Every attempt on record"). An attempt still open whose
 * step has moved on — another epoch, or no longer EXECUTING (the reaper re-dispatched it after its
 * lease expired) — is shown `lost` even before the next claim records it so.
 */
export function attemptTrace(a: AttemptRecord, step: { state: string; epoch: number }) {
  const open = step.state === "EXECUTING" && step.epoch === a.epoch;
  return {
    epoch: a.epoch,
    attempt: a.attempt,
    outcome: a.outcome === "running" && !open ? "lost" : a.outcome,
    startedAt: iso(a.startedAt),
    finishedAt: iso(a.finishedAt),
    durationMs: a.finishedAt === null ? null : a.finishedAt - a.startedAt,
    idempotencyKey: a.idempotencyKey,
    request: parsed(a.requestJson),
    response: a.responseStatus === null ? null : { status: a.responseStatus, ...(parsed(a.responseJson) as AttemptResponseSummary) },
    error: a.error,
    // The delay chosen and why (`backoff`, `retry-after`, `in-progress`); due from the attempt's end.
    retryDelay: a.delayMs === null ? null : { ms: a.delayMs, reason: a.delayReason, until: iso((a.finishedAt ?? a.startedAt) + a.delayMs) },
  };
}

/**
 * A stored value over `TRACE_VALUE_MAX_BYTES` is not read back (src/ledger/execution-records.ts): the
 * trace says so, with its size, instead of showing it.
 */
export function omitted(json: string | null, bytes: number | null): { bytes: number; limit: number } | null {
  return json === null && bytes !== null ? { bytes, limit: TRACE_VALUE_MAX_BYTES } : null;
}

/** The request summary, or where it was over the bound, the attempts' own marker (src/ledger/attempts.ts `boundedJson`). */
const requestOf = (s: StepRecord): unknown => {
  const over = omitted(s.requestJson, s.requestBytes);
  return over ? { truncated: true, bytes: over.bytes } : parsed(s.requestJson);
};

/** What the trace knows of a step's vertex: its declaration (from the pinned definition) and, for a wait, its registration. */
interface StepFacts {
  gateway: GatewayVertex | undefined;
  wait: WaitForEventVertex | undefined;
  registered: WaitRecord | undefined;
  readAt: number;
  map?: MapTrace | null;
  /** The step's undo (./undo-trace.ts), or why it is not compensated; null when the execution never compensated. */
  undo?: ReturnType<typeof undoTrace>;
}

function stepTrace(s: StepRecord, events: TraceEvent[], attempts: AttemptRecord[], facts: StepFacts) {
  const { gateway } = facts;
  return {
    vertexId: s.vertexId,
    state: s.state,
    attempt: s.attempt,
    epoch: s.epoch,
    leaseUntil: iso(s.leaseUntil),
    parkedUntil: iso(s.parkedUntil),
    availableAt: s.state === "DISPATCHED" ? iso(s.availableAt) : null,
    // How often the reaper re-sent this step's message (it backs off: docs/steps.md "Reaper").
    resends: s.resends,
    nextResendAt: s.state === "DISPATCHED" ? iso(s.nextResendAt) : null,
    idempotencyKey: s.idempotencyKey,
    destinationKey: destinationKeyTrace(gateway, {
      key: s.idempotencyKey,
      sends: parseKeySends(s.keySendsJson),
      request: requestOf(s),
    }),
    request: requestOf(s),
    output: parsed(s.outputJson),
    // Null, or the output's size when it is too large for the trace (`output` is then null).
    outputOmitted: omitted(s.outputJson, s.outputBytes),
    nextVertices: parsed(s.nextVerticesJson),
    // A WAIT_FOR_EVENT's wait (docs/steps.md "The trace of a wait"); null for every other step.
    wait: waitTrace(facts.wait, facts.registered, facts.readAt),
    // A wait for a limited connector's permit (docs/connectors.md "Limits"); null if it never waited.
    permitWait: permitWaitTrace(s.permitWaitJson, facts.readAt),
    // A MAP's items: counts by state and the first page (docs/steps.md "MAP"); null for every other step.
    map: facts.map ?? null,
    // Its undo step once the execution compensates (docs/steps.md "Compensation"), or why it is not compensated; else null.
    undo: facts.undo ?? null,
    error: s.error,
    createdAt: iso(s.createdAt),
    finishedAt: iso(s.finishedAt),
    events,
    attempts: attempts.map((a) => attemptTrace(a, s)),
  };
}

export type Trace = ReturnType<typeof executionSummary> & {
  dedupeWindowEnd: string | null;
  duplicateTriggers: Array<{ seq: number; at: string | null; trigger: string; identity: string }>;
  compensation: ReturnType<typeof compensationSummary>;
  steps: Array<ReturnType<typeof stepTrace>>;
};

/** The trace of an execution in `workspace`; `null` when it does not exist there. `now`: when it is read (see `buildTrace`). */
export async function readTrace(db: D1Database, workspace: string, executionId: string, now: number = Date.now()): Promise<Trace | null> {
  const rows = await readTraceRecords(db, workspace, executionId);
  return rows ? buildTrace(rows, now) : null;
}

/**
 * The trace of an execution from its records: pure, so the answer of `GET /v1/executions/{id}`
 * (`readTrace`) and the history archive (src/history/archive.ts, records read for a set at once
 * by `readTraceRecordsForSet`) are one object, built one way. `now` is the one fact not in the
 * records: whether an event nobody took is still `buffered` or `expired` (a wait's `events`).
 */
export function buildTrace(rows: TraceRecords, now: number = Date.now()): Trace {
  const events = byVertex(rows.events, (ev): TraceEvent => ({ type: ev.type, epoch: ev.epoch, at: iso(ev.at), detail: ev.detail }));
  const attempts = byVertex(rows.attempts, (a) => a);
  const { workspace: ws, workflowId, version } = rows.execution;
  const versionKey = JSON.stringify([ws, workflowId, version]);
  const gateways = gatewayVerticesOf(rows.definitionJson, versionKey);
  const waits = waitVerticesOf(rows.definitionJson, versionKey);
  const registered = new Map(rows.waits.map((w) => [w.vertexId, w]));
  const maps = mapTraces(rows, events, attempts);
  const undos = new Map(rows.undos.map((u) => [u.vertexId, u]));
  const compensated = rows.undos.length > 0 || COMPENSATION_STATUSES.has(rows.execution.status);
  return {
    ...executionSummary(rows.execution),
    // Until when a trigger with the same identity is a duplicate of this execution (null: no identity held).
    dedupeWindowEnd: iso(rows.dedupeWindowEnd),
    // Each duplicate trigger the execution absorbed (the first 100; `duplicatesStopped.triggers` counts them all).
    duplicateTriggers: rows.duplicateTriggers.map((d) => ({ seq: d.seq, at: iso(d.at), trigger: d.triggerKind, identity: d.identityKind })),
    // The compensation at a glance (the undone steps in their order, the undo steps by state); null: it never compensated.
    compensation: compensationSummary(rows.execution.status, rows.undos, rows.resolutionJson),
    steps: rows.steps.map((s) =>
      stepTrace(s, events.get(s.vertexId) ?? [], attempts.get(s.vertexId) ?? [], {
        gateway: gateways.get(s.vertexId),
        wait: waits.get(s.vertexId),
        registered: registered.get(s.vertexId),
        readAt: now,
        map: maps.get(s.vertexId) ?? null,
        undo: undoOf(s, { undos, compensated, gateway: gateways.get(s.vertexId), events, attempts }),
      }),
    ),
  };
}

/** A step's undo: its undo step's row with the attempts and events under its row key, or why it has none. */
function undoOf(
  s: StepRecord,
  f: {
    undos: Map<string, TraceRecords["undos"][number]>;
    compensated: boolean;
    gateway: GatewayVertex | undefined;
    events: Map<string, TraceEvent[]>;
    attempts: Map<string, AttemptRecord[]>;
  },
) {
  const undo = f.undos.get(s.vertexId);
  return undoTrace(s, undo, {
    compensated: f.compensated,
    gateway: f.gateway,
    events: undo ? (f.events.get(undo.rowKey) ?? []) : [],
    attempts: undo ? (f.attempts.get(undo.rowKey) ?? []) : [],
    attemptTrace,
  });
}

/**
 * Each MAP step's items (docs/steps.md "MAP"): a MAP vertex of the pinned definition, or a step with
 * items on record. Their attempts and events are grouped under their row keys.
 */
function mapTraces(rows: TraceRecords, events: Map<string, TraceEvent[]>, attempts: Map<string, AttemptRecord[]>): Map<string, MapTrace> {
  const out = new Map<string, MapTrace>();
  const ids = new Set([...mapVerticesOf(rows.definitionJson), ...rows.itemCounts.map((c) => c.vertexId)]);
  for (const id of ids) {
    const counts = mapCounts(rows.itemCounts.filter((c) => c.vertexId === id));
    const page = rows.items.filter((i) => i.vertexId === id);
    out.set(id, {
      ...counts,
      items: page.map((i) => {
        const key = itemRowKey(id, i.index);
        return itemTrace(i, attempts.get(key) ?? [], events.get(key) ?? [], attemptTrace);
      }),
      nextCursor: counts.total > page.length && page.length > 0 ? itemsCursor(page.at(-1)!.index) : null,
    });
  }
  return out;
}

/** The MAP vertices of a pinned definition (JSON text), by id. */
function mapVerticesOf(definitionJson: string | null): string[] {
  if (definitionJson === null) return [];
  try {
    const { vertices } = JSON.parse(definitionJson) as { vertices?: Array<{ id?: unknown; type?: unknown }> };
    return (vertices ?? []).filter((v) => v.type === "MAP" && typeof v.id === "string").map((v) => v.id as string);
  } catch {
    return [];
  }
}

/** Records grouped by their step, in the order read. */
function byVertex<R extends { vertexId: string }, T>(records: readonly R[], map: (record: R) => T): Map<string, T[]> {
  const grouped = new Map<string, T[]>();
  for (const record of records) {
    const list = grouped.get(record.vertexId) ?? [];
    list.push(map(record));
    grouped.set(record.vertexId, list);
  }
  return grouped;
}

export interface ExecutionPage {
  items: Array<ReturnType<typeof executionSummary>>;
  nextCursor: string | null;
}

export function encodeCursor(row: { createdAt: number; id: string }): string {
  return btoa(JSON.stringify([row.createdAt, row.id]))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");
}

/** `null` when the cursor is not one we issued. */
export function decodeCursor(cursor: string): { createdAt: number; id: string } | null {
  try {
    const padded = cursor.replace(/-/g, "+").replace(/_/g, "/");
    const value = JSON.parse(atob(padded + "=".repeat((4 - (padded.length % 4)) % 4))) as unknown;
    if (Array.isArray(value) && typeof value[0] === "number" && typeof value[1] === "string") return { createdAt: value[0], id: value[1] };
  } catch {
    // fall through
  }
  return null;
}

export async function listExecutions(db: D1Database, workspace: string, f: ExecutionListFilter): Promise<ExecutionPage> {
  const rows = await listExecutionRecords(db, workspace, { ...f, limit: f.limit + 1 });
  const page = rows.slice(0, f.limit);
  const last = page.at(-1);
  return { items: page.map(executionSummary), nextCursor: rows.length > f.limit && last ? encodeCursor(last) : null };
}
