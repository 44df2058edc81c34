/**
 * The execution trace (SPEC section 4): every step with its state, attempts, epoch, lease, the
 * key it sent, the redacted request summary, the response summary, errors and events
 * (fenced-out writes, failed attempts, expired leases, operator retries, dead letters).
 * One round trip (src/ledger/steps.ts `readTraceRows`).
 */
import { listExecutionRows, readTraceRows, type ExecutionRow, type StepRow } from "../ledger/steps";

/**
 * Milliseconds as an ISO-8601 timestamp. The engine never stores a time a Date cannot hold (waits
 * are bounded, see src/steps/retry-policy.ts), but a trace must render whatever a row holds: a
 * value outside Date's range is shown as null rather than answering 500 for the whole trace.
 */
const iso = (ms: number | null | undefined): string | null => {
  if (ms === null || ms === undefined) return null;
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? null : date.toISOString();
};
const parsed = (text: string | null): unknown => (text === null ? null : (JSON.parse(text) as unknown));

export interface TraceEvent {
  type: string;
  epoch: number | null;
  at: string | null;
  detail: string | null;
}

export function executionSummary(e: ExecutionRow) {
  return {
    executionId: e.id,
    workflowId: e.workflow_id,
    version: e.version,
    status: e.status,
    trigger: e.trigger_kind,
    identity: e.identity_kind,
    duplicateDeliveries: e.duplicate_deliveries,
    lastDuplicateAt: iso(e.last_duplicate_at),
    startedOverFrom: e.started_over_from,
    createdAt: iso(e.created_at),
    finishedAt: iso(e.finished_at),
  };
}

function stepTrace(s: StepRow, events: TraceEvent[]) {
  return {
    vertexId: s.vertex_id,
    state: s.state,
    attempt: s.attempt,
    epoch: s.epoch,
    leaseUntil: iso(s.lease_until),
    availableAt: s.state === "DISPATCHED" ? iso(s.available_at) : null,
    // How often the reaper re-sent this step's message (it backs off: docs/steps.md "Reaper").
    resends: s.resends,
    nextResendAt: s.state === "DISPATCHED" ? iso(s.next_resend_at) : null,
    idempotencyKey: s.idempotency_key,
    request: parsed(s.request),
    output: parsed(s.output),
    nextVertices: parsed(s.next_vertices),
    error: s.error,
    createdAt: iso(s.created_at),
    finishedAt: iso(s.finished_at),
    events,
  };
}

export type Trace = ReturnType<typeof executionSummary> & { steps: Array<ReturnType<typeof stepTrace>> };

/** The trace of an execution in `workspace`; `null` when it does not exist there. */
export async function readTrace(db: D1Database, workspace: string, executionId: string): Promise<Trace | null> {
  const rows = await readTraceRows(db, workspace, executionId);
  if (!rows) return null;
  const byStep = new Map<string, TraceEvent[]>();
  for (const ev of rows.events) {
    const list = byStep.get(ev.vertex_id) ?? [];
    list.push({ type: ev.type, epoch: ev.epoch, at: iso(ev.at), detail: ev.detail });
    byStep.set(ev.vertex_id, list);
  }
  return { ...executionSummary(rows.execution), steps: rows.steps.map((s) => stepTrace(s, byStep.get(s.vertex_id) ?? [])) };
}

export interface ExecutionPage {
  items: Array<ReturnType<typeof executionSummary>>;
  nextCursor: string | null;
}

export function encodeCursor(row: { created_at: number; id: string }): string {
  return btoa(JSON.stringify([row.created_at, row.id]))
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

export async function listExecutions(
  db: D1Database,
  workspace: string,
  f: { workflowId?: string; status?: "RUNNING" | "COMPLETED" | "FAILED"; before?: { createdAt: number; id: string }; limit: number },
): Promise<ExecutionPage> {
  const rows = await listExecutionRows(db, workspace, { ...f, limit: f.limit + 1 });
  const page = rows.slice(0, f.limit);
  const last = page.at(-1);
  return { items: page.map(executionSummary), nextCursor: rows.length > f.limit && last ? encodeCursor(last) : null };
}
