/**
 * The trace of a compensation (docs/steps.md "Compensation"): per step, its undo — the undo step
 * with its state, place in the order, attempts, key, request, output or error and events — or,
 * once the execution compensated, why the step is not compensated (it declares no `compensate`,
 * or it did not complete). Pure: built from the ledger's records (src/ledger/undo-trace.ts).
 */
import type { GatewayVertex } from "../definitions/schema";
import { parseUndoRowKey, type AttemptRecord, type ExecutionStatus, type StepRecord, type UndoRecord } from "../ledger";
import { isoTime } from "../lib/iso-time";

const iso = (ms: number | null | undefined): string | null => isoTime(ms);
const parsed = (text: string | null): unknown => (text === null ? null : (JSON.parse(text) as unknown));

/** The statuses of an execution that compensated (or is compensating). */
export const COMPENSATION_STATUSES: ReadonlySet<ExecutionStatus> = new Set<ExecutionStatus>([
  "COMPENSATING",
  "COMPENSATED",
  "COMPENSATION_FAILED",
]);

/** An undo's state, or `NOT_COMPENSATED` for a step the compensation leaves as it is. */
export type UndoTraceState = UndoRecord["state"] | "NOT_COMPENSATED";

interface TraceEventLike {
  type: string;
  epoch: number | null;
  at: string | null;
  detail: string | null;
}

/** Why a step of a compensated execution has no undo step. */
export function notCompensatedReason(step: Pick<StepRecord, "state">, gateway: GatewayVertex | undefined): string {
  if (step.state !== "COMPLETED") return `not compensated: the step did not complete (${step.state}), so there is nothing to undo`;
  if (!gateway?.config.compensate) return "not compensated: the step declares no `compensate`, so what it did is left as it is";
  return "not compensated: no undo step was made for it (the compensation undoes at most 1,000 steps)";
}

/**
 * A step's undo: its undo step, or (the execution compensated and none undoes this step) a
 * `NOT_COMPENSATED` line with the reason; null when the execution never compensated.
 */
export function undoTrace(
  step: Pick<StepRecord, "state" | "vertexId">,
  undo: UndoRecord | undefined,
  facts: {
    compensated: boolean;
    gateway: GatewayVertex | undefined;
    events: TraceEventLike[];
    attempts: AttemptRecord[];
    attemptTrace: (a: AttemptRecord, row: { state: string; epoch: number }) => unknown;
  },
) {
  if (!undo) {
    if (!facts.compensated) return null;
    return {
      undoes: step.vertexId,
      state: "NOT_COMPENSATED" as UndoTraceState,
      reason: notCompensatedReason(step, facts.gateway),
      rowKey: null,
      place: null,
      attempt: 0,
      epoch: 0,
      idempotencyKey: null,
      request: null,
      output: null,
      outputOmitted: null,
      error: null,
      availableAt: null,
      createdAt: null,
      finishedAt: null,
      events: [] as TraceEventLike[],
      attempts: [] as unknown[],
    };
  }
  const over = (json: string | null, bytes: number | null) => (json === null && bytes !== null ? { bytes, limit: 65_536 } : null);
  const requestOver = over(undo.requestJson, undo.requestBytes);
  return {
    undoes: undo.vertexId,
    state: undo.state as UndoTraceState,
    reason: null as string | null,
    rowKey: undo.rowKey as string | null,
    place: undo.place as number | null,
    attempt: undo.attempt,
    epoch: undo.epoch,
    idempotencyKey: undo.idempotencyKey,
    request: requestOver ? { truncated: true, bytes: requestOver.bytes } : parsed(undo.requestJson),
    output: parsed(undo.outputJson),
    outputOmitted: over(undo.outputJson, undo.outputBytes),
    error: undo.error,
    availableAt: undo.state === "DISPATCHED" || undo.state === "PENDING" ? iso(undo.availableAt) : null,
    createdAt: iso(undo.createdAt) as string | null,
    finishedAt: iso(undo.finishedAt),
    events: facts.events,
    attempts: facts.attempts.map((a) => facts.attemptTrace(a, undo)),
  };
}

export type UndoTrace = NonNullable<ReturnType<typeof undoTrace>>;

/** An operator's "mark resolved" as the trace shows it: who, the note, when, the step whose undo had failed. */
function resolutionTrace(json: string | null) {
  if (json === null) return null;
  const r = JSON.parse(json) as { resolvedBy: string; note: string; failedUndo: string | null; resolvedAt: number };
  return {
    resolvedBy: r.resolvedBy,
    note: r.note,
    resolvedAt: iso(r.resolvedAt),
    failedUndoOf: r.failedUndo === null ? null : (parseUndoRowKey(r.failedUndo)?.vertexId ?? r.failedUndo),
  };
}

/**
 * The execution's compensation at a glance: the undone steps in their order, the undo steps counted
 * by state, and an operator's "mark resolved" (who, the note, when) if the compensation was settled by hand.
 */
export function compensationSummary(status: ExecutionStatus, undos: readonly UndoRecord[], resolutionJson: string | null = null) {
  if (undos.length === 0 && !COMPENSATION_STATUSES.has(status)) return null;
  const count = (...states: Array<UndoRecord["state"]>) => undos.filter((u) => states.includes(u.state)).length;
  return {
    order: undos.map((u) => u.vertexId),
    completed: count("COMPLETED"),
    failed: count("FAILED"),
    running: count("DISPATCHED", "EXECUTING"),
    pending: count("PENDING"),
    cancelled: count("CANCELLED"),
    resolution: resolutionTrace(resolutionJson),
  };
}
