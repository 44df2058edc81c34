/**
 * Watching an execution from the request that started it: `Prefer: wait=N` on test runs, and
 * the `text/event-stream` of stream runs. Both poll D1 (one round trip per poll) — the steps run
 * elsewhere, on the queue consumer, so polling the rows is the only view of their progress.
 * Watching never affects the execution: when the client goes away, polling stops and the steps
 * carry on.
 */
import { readExecutionStatus } from "../ledger";
import { readTrace, type Trace } from "../steps/trace";
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
    if (status !== "RUNNING") return true;
    if (Date.now() >= deadline) return false;
    await sleep(Math.min(pollMs, Math.max(0, deadline - Date.now())));
  }
}

/** What the stream compares between polls: a step of the trace (src/steps/trace.ts). */
export type StepProgress = Pick<Trace["steps"][number], "vertexId" | "state" | "attempt" | "epoch" | "output" | "error">;

export interface StreamEvent {
  event: string;
  data: Record<string, unknown>;
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
    const base = { vertexId: step.vertexId, attempt: step.attempt, epoch: step.epoch };
    // A cancel moves the epoch too (to fence out a worker still running): that is no start.
    const claimed = step.state !== "CANCELLED" && step.epoch > 0 && (before === undefined || step.epoch > before.epoch);
    if (claimed) events.push({ event: "step.started", data: base });
    const final = step.state === "COMPLETED" || step.state === "FAILED" || step.state === "SKIPPED" || step.state === "CANCELLED";
    if (final && before?.state !== step.state) {
      if (step.state === "COMPLETED") events.push({ event: "step.completed", data: { ...base, output: step.output } });
      else if (step.state === "FAILED") events.push({ event: "step.failed", data: { ...base, error: step.error } });
      else if (step.state === "CANCELLED") events.push({ event: "step.cancelled", data: base });
      else events.push({ event: "step.skipped", data: base });
    } else if (step.state === "DISPATCHED" && before?.state === "EXECUTING") {
      // Back to DISPATCHED after a claim: a retry is waiting (its error says why).
      events.push({ event: "step.failed", data: { ...base, error: step.error, retrying: true } });
    }
  }
  return events;
}

export function formatEvent(id: number, e: StreamEvent): string {
  return `id: ${id}\nevent: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`;
}

export interface StreamOptions {
  pollMs?: number;
  /** The stream ends after this long even if the execution does not (it keeps running). */
  maxMs?: number;
}

/**
 * A `text/event-stream` of the execution: `execution.started`, `step.started`,
 * `step.completed`, `step.failed` (attempt, epoch), `step.skipped`, `execution.finished`.
 * Returns the response and the pump's promise (hand it to `ctx.waitUntil`).
 */
export function streamExecution(
  db: D1Database,
  workspace: string,
  start: StartResult,
  options: StreamOptions = {},
): { response: Response; done: Promise<void> } {
  const pollMs = options.pollMs ?? 200;
  const maxMs = options.maxMs ?? 5 * 60_000;
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const encoder = new TextEncoder();
  let nextId = 1;
  const send = (e: StreamEvent) => writer.write(encoder.encode(formatEvent(nextId++, e)));

  const pump = async () => {
    await send({ event: "execution.started", data: { ...start } });
    const seen = new Map<string, StepProgress>();
    const deadline = Date.now() + maxMs;
    let progress: Trace | null;
    for (;;) {
      // The same read as GET /v1/executions/{id}: the stream shows what the trace shows.
      progress = await readTrace(db, workspace, start.executionId);
      if (!progress) break;
      for (const e of stepEvents(seen, progress.steps)) await send(e);
      for (const s of progress.steps) seen.set(s.vertexId, s);
      if (progress.status !== "RUNNING" || Date.now() >= deadline) break;
      await sleep(pollMs);
    }
    if (progress && progress.status !== "RUNNING") {
      await send({ event: "execution.finished", data: { executionId: start.executionId, status: progress.status } });
    } else {
      await send({
        event: "stream.timeout",
        data: { executionId: start.executionId, detail: "The execution is still running; follow it with GET /v1/executions/{id}." },
      });
    }
    await writer.close();
  };

  const done = pump().catch(async (error: unknown) => {
    // A write to a disconnected client fails: stop polling; the execution is unaffected.
    await writer.abort(error).catch(() => undefined);
  });
  const response = new Response(readable, {
    status: start.deduplicated ? 200 : 202,
    headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-execution-id": start.executionId },
  });
  return { response, done };
}
