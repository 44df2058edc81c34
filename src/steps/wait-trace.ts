/**
 * What the trace says of a WAIT_FOR_EVENT step (SPEC section 14, docs/waits.md, docs/steps.md
 * "The trace of a wait"): the event it waits for, its correlation value, its timeout, the
 * decisions a person may take from the inspector, and the events that arrived on its name and
 * correlation value with what became of each. Built from the step's registration and its events
 * (src/ledger/trace-reads.ts, read in the trace's one batch) and the pinned definition.
 */
import { WorkflowDefinition, type WaitForEventVertex } from "../definitions/schema";
import type { WaitEventRecord, WaitRecord } from "../ledger";
import { isoTime } from "../lib/iso-time";

/** What became of an event that arrived for a wait. */
export type WaitEventState = "taken" | "taken-elsewhere" | "buffered" | "expired";

export interface WaitEventTrace {
  eventId: string;
  receivedAt: string | null;
  /** The event source it came through; null for `POST /v1/events`. */
  source: string | null;
  /** Deliveries of the same event after the first (deduplicated). */
  duplicates: number;
  state: WaitEventState;
}

export interface WaitTrace {
  /** The event's name it waits for. */
  event: string;
  /** The correlation value (`match`'s value for this execution); null before the wait registered. */
  match: string | number | null;
  consume: "one" | "all";
  /** When the wait registered (its first claim); null before that. */
  registeredAt: string | null;
  /** When it times out; null before it registered. */
  timeoutAt: string | null;
  /** The timeout passed with no event taken (the step then failed, or completed with null). */
  timedOut: boolean;
  /** The decisions a person may take from the inspector (the definition's `decisions`); null when it declares none. */
  decisions: string[] | null;
  /** The events on its name and correlation value, newest first (at most `TRACE_WAIT_EVENTS_MAX`). */
  events: WaitEventTrace[];
}

const parsedVersions = new Map<string, Map<string, WaitForEventVertex>>();

/**
 * The WAIT_FOR_EVENT vertices of a stored definition by id; empty when it cannot be read. Kept per
 * isolate under `version` (workspace/workflow/version, immutable), at most 500 of them.
 */
export function waitVerticesOf(definitionJson: string | null, version: string): Map<string, WaitForEventVertex> {
  const cached = parsedVersions.get(version);
  if (cached) return cached;
  const waits = parseWaits(definitionJson);
  if (definitionJson !== null) {
    if (parsedVersions.size >= 500) parsedVersions.delete(parsedVersions.keys().next().value as string);
    parsedVersions.set(version, waits);
  }
  return waits;
}

function parseWaits(definitionJson: string | null): Map<string, WaitForEventVertex> {
  const waits = new Map<string, WaitForEventVertex>();
  if (definitionJson === null) return waits;
  let parsed: ReturnType<typeof WorkflowDefinition.safeParse>;
  try {
    parsed = WorkflowDefinition.safeParse(JSON.parse(definitionJson));
  } catch {
    return waits;
  }
  if (!parsed.success) return waits;
  for (const vertex of parsed.data.vertices) if (vertex.type === "WAIT_FOR_EVENT") waits.set(vertex.id, vertex);
  return waits;
}

/** The stored correlation value (canonical JSON of a string or a number) as the value. */
function matchOf(matchValue: string): string | number {
  try {
    const value: unknown = JSON.parse(matchValue);
    if (typeof value === "string" || typeof value === "number") return value;
  } catch {
    // not JSON: shown as stored
  }
  return matchValue;
}

/** `taken` by this registration, `taken-elsewhere` by another wait, else `buffered` until its buffer ends, then `expired`. */
export function waitEventState(e: WaitEventRecord, readAt: number): WaitEventState {
  if (e.takenHere) return "taken";
  if (e.taken) return "taken-elsewhere";
  return e.bufferedUntil > readAt ? "buffered" : "expired";
}

/**
 * The step's `wait`: from its registration when it has one (with the definition's decisions), else
 * from the definition (not registered yet: no correlation value, no times, no events). Null for a
 * step that is no WAIT_FOR_EVENT.
 */
export function waitTrace(vertex: WaitForEventVertex | undefined, registered: WaitRecord | undefined, readAt: number): WaitTrace | null {
  const decisions = vertex?.config.decisions ? [...vertex.config.decisions] : null;
  if (registered) {
    return {
      event: registered.name,
      match: matchOf(registered.matchValue),
      consume: registered.consume,
      registeredAt: isoTime(registered.registeredAt),
      timeoutAt: isoTime(registered.timeoutAt),
      timedOut: registered.timedOut,
      decisions,
      events: registered.events.map((e) => ({
        eventId: e.eventId,
        receivedAt: isoTime(e.receivedAt),
        source: e.source,
        duplicates: e.duplicates,
        state: waitEventState(e, readAt),
      })),
    };
  }
  if (!vertex) return null;
  return {
    event: vertex.config.event,
    match: null,
    consume: vertex.config.consume,
    registeredAt: null,
    timeoutAt: null,
    timedOut: false,
    decisions,
    events: [],
  };
}
