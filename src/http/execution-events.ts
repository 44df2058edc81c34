/**
 * GET /v1/executions/{id}/events: the execution's changes as server-sent events, resumable
 * (docs/events.md). Read with `fetch` (EventSource cannot send Authorization); the client passes
 * the last id it got as `Last-Event-ID` (or `?lastEventId=`) when it reconnects.
 *
 * Event ids are positions in the execution's change order (src/ledger/execution-changes.ts):
 * `<major>.<minor>`, and `<major>.<minor>.end` on `execution.finished`. The same change has the
 * same id on every connection; a resume delivers exactly the changes after the id.
 *
 * Bounded per connection: at most `MAX_POLLS` polls (one round trip each, a batch of three
 * statements) and `MAX_STREAM_MS`; then `stream.end` and the client reconnects.
 */
import { eventId, parseUndoRowKey, readExecutionChanges, type ChangePosition, type ExecutionChange, type ExecutionStatus } from "../ledger";

/** Polls per connection at most: with the first read, at most 100 round trips, 300 statements. */
export const MAX_POLLS = 100;
/** A connection ends after this long (or `MAX_POLLS`), whichever comes first. */
export const MAX_STREAM_MS = 25_000;
/** The pause between polls when nothing was pending. */
export const POLL_MS = 250;
/** Rows of each kind one poll reads at most; more pending → the next poll follows at once. */
export const CHANGES_PER_POLL = 200;
/** What the client waits before reconnecting after `stream.end` (also the SSE `retry:` field). */
export const RECONNECT_MS = 1_000;

export interface EventStreamOptions {
  pollMs?: number;
  maxPolls?: number;
  maxMs?: number;
  perPoll?: number;
  now?: () => number;
}

const ID = /^(\d{1,15})\.(\d{1,15})(\.end)?$/;

/** The position an event id names; `[0, 0]` without one; null when it is not an id of this stream. */
export function parseEventId(id: string | null | undefined): ChangePosition | null {
  if (id === null || id === undefined || id === "") return [0, 0];
  const match = ID.exec(id.trim());
  if (!match) return null;
  return [Number(match[1]), Number(match[2])];
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function frame(event: string, data: unknown, id?: string): string {
  return `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * A change of an undo step (its row key `<vertex>#undo#<place>`, docs/steps.md "Compensation")
 * also names the step it undoes and its place: `undo: { of, place }`.
 */
function undoMember(vertexId: string): { undo?: { of: string; place: number } } {
  const undo = parseUndoRowKey(vertexId);
  return undo ? { undo: { of: undo.vertexId, place: undo.place } } : {};
}

/** An execution still changes while RUNNING or COMPENSATING (its undo steps run). */
const isLive = (status: ExecutionStatus): boolean => status === "RUNNING" || status === "COMPENSATING";

function changeFrame(c: ExecutionChange): string {
  const id = eventId(c.position);
  if (c.kind === "attempt") {
    const { kind: _kind, position: _position, ...data } = c;
    return frame("attempt", { ...data, ...undoMember(c.vertexId) }, id);
  }
  return frame("step.event", { id: c.id, vertexId: c.vertexId, type: c.type, epoch: c.epoch, at: c.at, ...undoMember(c.vertexId) }, id);
}

/**
 * The first read, before any byte is sent: null when the execution is not the workspace's (the
 * route answers 404). Its changes are the stream's first events.
 */
export async function openExecutionEvents(
  db: D1Database,
  workspace: string,
  executionId: string,
  after: ChangePosition,
  options: EventStreamOptions = {},
): Promise<{ response: Response; done: Promise<void> } | null> {
  const perPoll = options.perPoll ?? CHANGES_PER_POLL;
  const first = await readExecutionChanges(db, workspace, executionId, after, perPoll);
  if (first.status === null) return null;
  const pollMs = options.pollMs ?? POLL_MS;
  const maxPolls = options.maxPolls ?? MAX_POLLS;
  const now = options.now ?? Date.now;
  const deadline = now() + (options.maxMs ?? MAX_STREAM_MS);
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const encoder = new TextEncoder();
  const write = (text: string) => writer.write(encoder.encode(text));

  const pump = async () => {
    await write(`retry: ${RECONNECT_MS}\n\n`);
    let position = after;
    let read = first;
    let polls = 1;
    for (;;) {
      for (const change of read.changes) {
        await write(changeFrame(change));
        position = change.position;
      }
      const status: ExecutionStatus | null = read.status;
      if (status === null) break; // gone (retention): nothing more to say
      if (!read.more && !isLive(status)) {
        await write(frame("execution.finished", { executionId, status }, `${eventId(position)}.end`));
        break;
      }
      if (polls >= maxPolls || now() >= deadline) {
        await write(frame("stream.end", { reason: "budget", retryMs: RECONNECT_MS, executionId }));
        break;
      }
      if (!read.more) {
        await write(": keep-alive\n\n");
        await sleep(pollMs);
      }
      read = await readExecutionChanges(db, workspace, executionId, position, perPoll);
      polls++;
    }
    await writer.close();
  };
  const done = pump().catch(async (error: unknown) => {
    // A client gone away fails the write: stop polling; the execution is unaffected.
    await writer.abort(error).catch(() => undefined);
  });
  const response = new Response(readable, {
    status: 200,
    headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-accel-buffering": "no" },
  });
  return { response, done };
}
