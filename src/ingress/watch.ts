/**
 * Watching an execution from the request that started it: `Prefer: wait=N` on test runs, and
 * the `text/event-stream` of stream runs. Both poll D1 (one statement per poll) — the steps run
 * elsewhere, on the queue consumer, so polling the rows is the only view of their progress.
 * Watching never affects the execution: when the client goes away, polling stops and the steps
 * carry on.
 */
import {
  eventId,
  parseUndoRowKey,
  readExecutionStatus,
  readStreamProgress,
  type ChangePosition,
  type ExecutionStatus,
  type StepProgressRecord,
  type StepState,
} from "../ledger";
import type { QueryReservation } from "../lib/query-count";
import { omitted } from "../steps/trace";
import type { StartResult } from "./start";

export const MAX_WAIT_SECONDS = 30;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** `Prefer: wait=N` (RFC 7240), clamped to MAX_WAIT_SECONDS; `undefined` when not asked. */
export function preferredWaitSeconds(prefer: string | null | undefined): number | undefined {
  if (!prefer) return undefined;
  for (const preference of prefer.split(",")) {
    const match = /^\s*wait\s*=\s*"?(\d+)"?\s*$/i.exec(preference.split(";")[0]!);
    if (match) return Math.min(Number(match[1]), MAX_WAIT_SECONDS);
  }
  return undefined;
}

/** Poll the status until it is final or `waitMs` passed. Returns whether it finished. */
export async function waitForExecution(
  db: D1Database,
  workspace: string,
  executionId: string,
  waitMs: number,
  pollMs = 150,
): Promise<boolean> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const status = await readExecutionStatus(db, workspace, executionId);
    if (!isLive(status)) return true;
    if (Date.now() >= deadline) return false;
    await sleep(Math.min(pollMs, Math.max(0, deadline - Date.now())));
  }
}

/** What the stream compares between polls: a step's progress (src/ledger/stream-progress.ts `readStreamProgress`). */
export interface StepProgress {
  vertexId: string;
  state: StepState;
  attempt: number;
  epoch: number;
  output: unknown;
  /** The output's size when it is too large to stream (`output` is then null), as in the trace. */
  outputOmitted?: { bytes: number; limit: number } | null;
  error: string | null;
}

export interface StreamEvent {
  event: string;
  data: Record<string, unknown>;
}

const FINAL: ReadonlySet<StepState> = new Set<StepState>(["COMPLETED", "FAILED", "SKIPPED", "CANCELLED"]);

/** RUNNING, or COMPENSATING (its undo steps run: docs/steps.md "Compensation"): the execution still changes. */
const isLive = (status: ExecutionStatus | null | undefined): boolean => status === "RUNNING" || status === "COMPENSATING";

/**
 * An undo step's events (its row key `<vertex>#undo#<place>`): `undo.started`, `undo.completed`,
 * `undo.failed` (`retrying: true` while it has attempts left), `undo.cancelled`, each naming the
 * step it undoes (`vertexId`) and its `place`.
 */
function undoEvents(before: StepProgress | undefined, step: StepProgress, undo: { vertexId: string; place: number }): StreamEvent[] {
  const events: StreamEvent[] = [];
  const base = { vertexId: undo.vertexId, place: undo.place, rowKey: step.vertexId, attempt: step.attempt, epoch: step.epoch };
  if (step.state !== "CANCELLED" && step.epoch > 0 && (before === undefined || step.epoch > before.epoch)) {
    events.push({ event: "undo.started", data: base });
  }
  if (FINAL.has(step.state) && before?.state !== step.state) {
    if (step.state === "COMPLETED") events.push({ event: "undo.completed", data: { ...base, output: step.output } });
    else if (step.state === "FAILED") events.push({ event: "undo.failed", data: { ...base, error: step.error } });
    else events.push({ event: "undo.cancelled", data: base });
  } else if (step.state === "DISPATCHED" && before?.state === "EXECUTING") {
    events.push({ event: "undo.failed", data: { ...base, error: step.error, retrying: true } });
  }
  return events;
}

/**
 * The events implied by a new snapshot of the steps, given what was already reported. Polling
 * can miss a short-lived state: a step seen COMPLETED with an epoch never seen EXECUTING still
 * gets its `step.started` (attempt, epoch) first, so every claim that is visible in the row shows.
 */
export function stepEvents(previous: ReadonlyMap<string, StepProgress>, steps: StepProgress[]): StreamEvent[] {
  const events: StreamEvent[] = [];
  for (const step of steps) {
    const before = previous.get(step.vertexId);
    const undo = parseUndoRowKey(step.vertexId);
    if (undo) {
      events.push(...undoEvents(before, step, undo));
      continue;
    }
    const base = { vertexId: step.vertexId, attempt: step.attempt, epoch: step.epoch };
    // A cancel moves the epoch too (to fence out a worker still running): that is no start.
    const claimed = step.state !== "CANCELLED" && step.epoch > 0 && (before === undefined || step.epoch > before.epoch);
    if (claimed) events.push({ event: "step.started", data: base });
    if (FINAL.has(step.state) && before?.state !== step.state) {
      if (step.state === "COMPLETED") {
        const over = step.outputOmitted ? { outputOmitted: step.outputOmitted } : {};
        events.push({ event: "step.completed", data: { ...base, output: step.output, ...over } });
      } else if (step.state === "FAILED") events.push({ event: "step.failed", data: { ...base, error: step.error } });
      else if (step.state === "CANCELLED") events.push({ event: "step.cancelled", data: base });
      else events.push({ event: "step.skipped", data: base });
    } else if (step.state === "DISPATCHED" && before?.state === "EXECUTING") {
      // Back to DISPATCHED after a claim: a retry is waiting (its error says why).
      events.push({ event: "step.failed", data: { ...base, error: step.error, retrying: true } });
    }
  }
  return events;
}

export function formatEvent(id: string, e: StreamEvent): string {
  return `id: ${id}\nevent: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;
}

/** The pause between polls. */
export const STREAM_POLL_MS = 250;
/**
 * Polls per stream at most (one statement each). The stream shares its invocation with the trigger
 * and the inline run of the first step: it reserves these in the invocation's query count before
 * the start (src/http/routes/triggers.ts), so the inline run's budget leaves them free.
 */
export const STREAM_MAX_POLLS = 240;
/** Statements one poll sends (`readStreamProgress`). */
export const STREAM_STATEMENTS_PER_POLL = 1;
/** A stream ends after this long (or `STREAM_MAX_POLLS`), whichever comes first. */
export const STREAM_MAX_MS = 60_000;

export interface StreamOptions {
  pollMs?: number;
  maxPolls?: number;
  /** The stream ends after this long even if the execution does not (it keeps running). */
  maxMs?: number;
  now?: () => number;
  /** The polls reserved in the invocation's query count: each poll uses one, the end gives the rest back. */
  reservation?: QueryReservation;
}

const progressOf = (s: StepProgressRecord): StepProgress => ({
  vertexId: s.vertexId,
  state: s.state,
  attempt: s.attempt,
  epoch: s.epoch,
  output: s.outputJson === null ? null : (JSON.parse(s.outputJson) as unknown),
  outputOmitted: omitted(s.outputJson, s.outputBytes),
  error: s.error,
});

/**
 * A `text/event-stream` of the execution: `execution.started`, `step.started`,
 * `step.completed`, `step.failed` (attempt, epoch), `step.skipped`, `step.cancelled`,
 * `execution.finished` — or, once its polls or its time are spent while the execution runs,
 * `stream.timeout`. Every event's id is the position of the poll that saw it in the order of
 * `GET /v1/executions/{id}/events` (`<major>.<minor>`; `….end` on `execution.finished`): a client
 * continues there with `Last-Event-ID` and gets exactly what was committed after it.
 * Returns the response and the pump's promise (hand it to `ctx.waitUntil`).
 */
export function streamExecution(
  db: D1Database,
  workspace: string,
  start: StartResult,
  options: StreamOptions = {},
): { response: Response; done: Promise<void> } {
  const pollMs = options.pollMs ?? STREAM_POLL_MS;
  const maxPolls = options.maxPolls ?? STREAM_MAX_POLLS;
  const now = options.now ?? Date.now;
  const deadline = now() + (options.maxMs ?? STREAM_MAX_MS);
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const encoder = new TextEncoder();
  const send = (e: StreamEvent, id: string) => writer.write(encoder.encode(formatEvent(id, e)));
  const { executionId } = start;

  const pump = async () => {
    let position: ChangePosition = [0, 0];
    await send({ event: "execution.started", data: { ...start } }, eventId(position));
    const seen = new Map<string, StepProgress>();
    // The (vertex, epoch) pairs already reported settled: their output is not read again.
    const settled = new Map<string, number>();
    let status: ExecutionStatus | null = null;
    for (let polls = 1; ; polls++) {
      const progress = await readStreamProgress(db, workspace, executionId, [...settled]);
      options.reservation?.use(STREAM_STATEMENTS_PER_POLL);
      if (!progress) break; // gone (retention): nothing more to say
      status = progress.status;
      position = progress.position;
      const steps = progress.steps.map(progressOf);
      for (const e of stepEvents(seen, steps)) await send(e, eventId(position));
      for (const s of steps) {
        seen.set(s.vertexId, s);
        if (FINAL.has(s.state)) settled.set(s.vertexId, s.epoch);
      }
      if (!isLive(status) || polls >= maxPolls || now() >= deadline) break;
      await sleep(pollMs);
    }
    const id = eventId(position);
    if (status !== null && !isLive(status)) {
      await send({ event: "execution.finished", data: { executionId, status } }, `${id}.end`);
    } else {
      const detail = `The execution is still running; follow it with GET /v1/executions/${executionId}/events and Last-Event-ID: ${id}.`;
      await send({ event: "stream.timeout", data: { executionId, lastEventId: id, detail } }, id);
    }
    await writer.close();
  };

  const done = pump()
    .catch(async (error: unknown) => {
      // A write to a disconnected client fails: stop polling; the execution is unaffected.
      await writer.abort(error).catch(() => undefined);
    })
    .finally(() => options.reservation?.release());
  const response = new Response(readable, {
    status: start.deduplicated ? 200 : 202,
    headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-execution-id": executionId },
  });
  return { response, done };
}
